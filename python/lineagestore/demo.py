"""A real stateful streaming job on lineagestore, on a local-filesystem checkpoint, explained as it runs.

Run it with ``dev/demo`` (or ``python -m lineagestore.demo [--dir DIR] [--batches N]``). Each batch writes
a file of events, runs the query until the input is drained (``trigger(availableNow=True)``), stops it, and
restarts it for the next batch, so every batch also exercises a restore from the checkpoint. After each batch
it prints the running totals, the state size Spark reports, the checkpoint files written and the lineage.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
from pathlib import Path


def _write_batch(directory: Path, batch: int, rows: list[dict]) -> None:
    tmp = directory / f".batch-{batch}.json.tmp"
    tmp.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    os.replace(tmp, directory / f"batch-{batch:04d}.json")


def _describe_stores(spark, checkpoint: Path) -> dict[int, dict]:
    """Each partition's store as ``lineagestore inspect`` reports it (the same JVM code, in this session)."""
    from lineagestore import checkpoint as ckpt
    from lineagestore.jvm import JvmTools

    tools = JvmTools(spark._jvm)
    report = ckpt.inspect(tools, ckpt.load(tools, str(checkpoint)))
    return {s["partitionId"]: s for s in report["stores"] if s["operatorId"] == 0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lineagestore.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--dir", help="working directory (default: a new temporary directory)")
    parser.add_argument("--batches", type=int, default=6, help="number of batches to run (default 6)")
    parser.add_argument("--keys", type=int, default=50, help="distinct keys in the input (default 50)")
    args = parser.parse_args(argv)

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import lineagestore

    work = Path(args.dir or tempfile.mkdtemp(prefix="lineagestore-demo-"))
    shutil.rmtree(work, ignore_errors=True)
    source, checkpoint = work / "input", work / "checkpoint"
    source.mkdir(parents=True)

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("lineagestore-demo")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.streaming.stateStore.minDeltasForSnapshot", "2")
        .config("spark.sql.streaming.stateStore.maintenanceInterval", "1s")
        .config("spark.sql.streaming.minBatchesToRetain", "3")
    )
    spark = lineagestore.configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    print(f"lineagestore {lineagestore.__version__} on Spark {spark.version}; working in {work}")

    rng = random.Random(42)
    expected: dict[str, int] = {}
    totals: dict[str, int] = {}

    def sink(df, batch_id):
        for row in df.collect():
            totals[row["user"]] = row["clicks"]

    for batch in range(args.batches):
        rows = [{"user": f"user-{rng.randrange(args.keys):03d}", "n": 1} for _ in range(200)]
        for r in rows:
            expected[r["user"]] = expected.get(r["user"], 0) + 1
        _write_batch(source, batch, rows)
        query = (
            spark.readStream.schema("user string, n int")
            .json(str(source))
            .groupBy("user")
            .agg(F.sum("n").alias("clicks"))
            .writeStream.outputMode("update")
            .foreachBatch(sink)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        progress = query.lastProgress or {}
        state = (progress.get("stateOperators") or [{}])[0]
        custom = state.get("customMetrics", {})
        print(
            f"\nbatch {batch}: {len(rows)} events, {len(totals)} users seen; state rows "
            f"{state.get('numRowsTotal')}, state memory {state.get('memoryUsedBytes')} B, "
            f"commit {custom.get('lineagestoreCommitMs')} ms, deltas replayed on load "
            f"{custom.get('lineagestoreDeltasReplayed')}"
        )
        stores = _describe_stores(spark, checkpoint)
        for partition in range(2):
            info = stores[partition]
            files = [
                f"{c['version']}_{c['uniqueId'][:8]}"
                + (".delta" if c["delta"] else "")
                + (" +zip" if c["snapshot"] else "")
                for c in info["checkpoints"]
            ]
            newest = info["checkpoints"][-1] if info["checkpoints"] else None
            lineage = (
                " <- ".join(a.split("_")[0] + "_" + a.split("_")[1][:8] for a in newest["ancestors"])
                if newest
                else ""
            )
            print(
                f"  partition {partition}: files {', '.join(files)}; shared SST blobs {info['totals']['blobs']}"
            )
            if newest:
                origin = (
                    "(parent: the empty state)" if newest["version"] == 1 else "(starts at its own snapshot)"
                )
                print(f"    lineage of {newest['version']}_{newest['uniqueId'][:8]}: {lineage or origin}")

    ok = totals == expected
    print(f"\nresult: {len(totals)} users, totals {'match' if ok else 'DO NOT match'} a plain-Python count")
    spark.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Issue 18, scenario 5: a query with two stateful operators at Spark's default 200 shuffle partitions on a
standalone cluster of 3 one-core executors. Per executor JVM after every batch: threads, open file
descriptors, resident memory; per batch: the state stores' memory (RocksDB, as the progress reports it) and
commit time per store.

    PYTHONPATH=integration-tests .venv/bin/python integration-tests/bench/cluster_scale.py \\
        [--jar before=/path/old.jar] [--jar after=/path/new.jar] [--batches 8] [--partitions 200]

Each ``--jar LABEL=PATH`` runs the same workload with that lineagestore jar, one after the other, each in a
process and cluster of its own (a driver JVM keeps the first jar it loads); without one it runs the
installed package's jar. Prints
one JSON line per label with the medians over the batches after the first and the maxima.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE.parent / "python"))


def proc_stats(pid: int) -> dict:
    base = Path(f"/proc/{pid}")
    status = dict(line.split(":", 1) for line in (base / "status").read_text().splitlines() if ":" in line)
    return {
        "threads": int(status["Threads"].strip()),
        "openFiles": len(list((base / "fd").iterdir())),
        "rssMiB": round(int(status["VmRSS"].split()[0]) / 1024, 1),
    }


def run_label(label: str, jar: str | None, cluster, args, work: Path) -> dict:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import lineagestore

    builder = SparkSession.builder.appName(f"cluster-scale-{label}")
    builder = cluster.configure(builder)
    for k, v in {
        "spark.sql.shuffle.partitions": str(args.partitions),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.stateStore.maintenanceInterval": "5s",
    }.items():
        builder = builder.config(k, v)
    if jar:
        # another build's jar: set the provider by hand (configure's listeners may not exist in that jar)
        builder = (
            builder.config("spark.jars", jar)
            .config("spark.sql.streaming.stateStore.providerClass", lineagestore.PROVIDER_CLASS)
            .config("spark.sql.streaming.stateStore.checkpointFormatVersion", "2")
        )
        spark = builder.getOrCreate()
    else:
        spark = lineagestore.configure(builder).getOrCreate()
    try:
        inp = work / label / "in"
        inp.mkdir(parents=True)
        events = spark.readStream.schema("id LONG, k INT, v INT").json(str(inp))
        # two stateful operators: deduplication by event id, then a running count per key
        query = (
            events.dropDuplicates(["id"])
            .groupBy("k")
            .agg(F.count("*").alias("n"), F.sum("v").alias("total"))
            .writeStream.outputMode("update")
            .format("noop")
            .option("checkpointLocation", str(work / label / "checkpoint"))
            .start()
        )
        samples = []
        next_id = 0
        for b in range(args.batches):
            rows = []
            for j in range(args.rows):
                rows.append(json.dumps({"id": next_id, "k": (next_id * 7919) % args.keys, "v": j}))
                next_id += 1
            (inp / f"b{b:04d}.json").write_text("\n".join(rows))
            query.processAllAvailable()
            p = query.lastProgress
            ops = p["stateOperators"]
            pids = cluster.executor_pids()
            per_exec = [proc_stats(pid) for pid in pids.values()]
            samples.append(
                {
                    "batch": b,
                    "batchMs": p["durationMs"].get("triggerExecution"),
                    "commitMsPerStore": round(
                        sum(o["commitTimeMs"] for o in ops) / (len(ops) * args.partitions), 2
                    ),
                    "stateMemoryMiB": round(sum(o["memoryUsedBytes"] for o in ops) / 2**20, 1),
                    "executors": len(pids),
                    "threadsMax": max(s["threads"] for s in per_exec),
                    "openFilesMax": max(s["openFiles"] for s in per_exec),
                    "rssMiBMax": max(s["rssMiB"] for s in per_exec),
                }
            )
            print(label, json.dumps(samples[-1]), file=sys.stderr, flush=True)
        query.stop()
    finally:
        spark.stop()
    steady = samples[1:] or samples
    keys = ["batchMs", "commitMsPerStore", "stateMemoryMiB", "threadsMax", "openFilesMax", "rssMiBMax"]
    return {
        "label": label,
        "jar": jar or "installed",
        "partitions": args.partitions,
        "batches": args.batches,
        "median": {k: statistics.median(s[k] for s in steady) for k in keys},
        "max": {k: max(s[k] for s in samples) for k in keys},
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jar", action="append", default=[], help="LABEL=PATH (repeatable)")
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--keys", type=int, default=5000)
    ap.add_argument("--workers", type=int, default=3)
    args = ap.parse_args()
    from lineagestore.testing.cluster import StandaloneCluster

    labels = [tuple(x.split("=", 1)) for x in args.jar] or [("installed", None)]
    if len(labels) > 1:
        # one process (and cluster) per jar: a driver JVM keeps the first jar it loaded
        for label, jar in labels:
            raw = sys.argv[1:]
            argv = [
                a
                for i, a in enumerate(raw)
                if not a.startswith("--jar") and (i == 0 or raw[i - 1] != "--jar")
            ]
            subprocess.run([sys.executable, __file__, *argv, "--jar", f"{label}={jar}"], check=True)
        return
    cluster = StandaloneCluster(workers=args.workers, memory="1536m").start()
    work = Path(tempfile.mkdtemp(prefix="cluster-scale-"))
    try:
        label, jar = labels[0]
        started = time.time()
        result = run_label(label, jar, cluster, args, work)
        result["seconds"] = round(time.time() - started, 1)
        print(json.dumps(result), flush=True)
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()

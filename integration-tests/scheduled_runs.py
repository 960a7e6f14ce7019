"""One process running a count aggregation as ``runs`` short availableNow runs, for test_scheduled_runs and
bench/scheduled_runs_compare.py.

Spark's maintenance thread never runs here (maintenanceInterval 1h), as in a short scheduled run whose
process ends first: every snapshot must come from lineagestore itself (catch-up on commit, upload at exit).
Prints two JSON lines per run: the custom metrics of the stateful operator (a list), then
``{"coordinator": [...], "addBatchMs": n}``: the newest snapshot version Spark's state store coordinator was
told of per partition in that run (None: none), and the time of the run's last batch.

    python scheduled_runs.py ROOT RUNS PROVIDER_CLASS [KEY=VALUE ...] [--checkpoint URI] [--first-run N]

ROOT holds the input files (written here, one per run); the checkpoint is ROOT/checkpoint unless
``--checkpoint`` names another (``s3a://...``). ``--first-run`` numbers the runs from N (a later process
continuing the same query writes new input). KEY=VALUE pairs are Spark settings (``spark.master=...``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

PARTITIONS = 2


def coordinator_uploads(spark, checkpoint: str, run_id) -> list:
    """The newest snapshot version Spark's state store coordinator heard of, per partition, in this run."""
    jvm = spark.sparkContext._jvm
    state = jvm.org.apache.spark.sql.execution.streaming.state
    coordinator = spark._jsparkSession.streams().stateStoreCoordinator()
    location = checkpoint if "://" in checkpoint else "file:" + str(Path(checkpoint).resolve())
    run = jvm.java.util.UUID.fromString(str(run_id))
    out = []
    for part in range(PARTITIONS):
        store = state.StateStoreId(location + "/state", 0, part, "default")
        known = coordinator.getLatestSnapshotVersionForTesting(state.StateStoreProviderId(store, run))
        out.append(known.get() if known.isDefined() else None)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", type=Path)
    ap.add_argument("runs", type=int)
    ap.add_argument("provider")
    ap.add_argument("conf", nargs="*", help="KEY=VALUE Spark settings")
    ap.add_argument("--checkpoint")
    ap.add_argument("--first-run", type=int, default=0)
    args = ap.parse_args()
    from lineagestore.testing.session import local_session

    conf = {
        "spark.sql.streaming.stateStore.maintenanceInterval": "1h",
        "spark.sql.streaming.stateStore.providerClass": args.provider,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        **dict(kv.split("=", 1) for kv in args.conf),
    }
    spark = local_session(partitions=PARTITIONS, conf=conf)
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", args.provider)
    inp = args.root / "in"
    inp.mkdir(parents=True, exist_ok=True)
    checkpoint = args.checkpoint or str(args.root / "checkpoint")
    for i in range(args.first_run, args.first_run + args.runs):
        rows = (json.dumps({"k": (i * 7 + j) % 40, "v": i}) for j in range(100))
        (inp / f"part-{i:04d}.json").write_text("\n".join(rows))
        df = spark.readStream.schema("k INT, v INT").json(str(inp)).groupBy("k").count()
        told = []

        def batch(out, _batch_id, told=told):
            out.collect()  # runs the batch: its commits, and their reports (synchronous RPCs), are done
            # read while the query runs: the coordinator forgets a run's stores when the run ends
            run_id = next(q.runId for q in spark.streams.active)  # one query at a time here
            told.append(coordinator_uploads(spark, checkpoint, run_id))

        query = (
            df.writeStream.outputMode("update")
            .foreachBatch(batch)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        progress = [json.loads(p.json) for p in query.recentProgress]
        ops = [op for p in progress for op in p.get("stateOperators", [])]
        print(json.dumps([op.get("customMetrics", {}) for op in ops]), flush=True)
        last = {
            "coordinator": told[-1] if told else [None] * PARTITIONS,
            "addBatchMs": progress[-1]["durationMs"].get("addBatch") if progress else None,
        }
        print(json.dumps(last), flush=True)
    # no spark.stop(), no wait: the process ends as a scheduled run's does


if __name__ == "__main__":
    main()

"""One process running a count aggregation as ``runs`` short availableNow runs, for test_scheduled_runs.

Spark's maintenance thread never runs here (maintenanceInterval 1h), as in a short scheduled run whose
process ends first: every snapshot must come from lineagestore itself (catch-up on commit, upload at exit).
Prints two JSON lines per run: the custom metrics of the stateful operator (a list), and the newest
snapshot version Spark's state store coordinator was told of per partition (``{"coordinator": [...]}``).

    python scheduled_runs.py <root> <runs> <provider class> [key=value ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def coordinator_uploads(spark, root: str, run_id) -> list:
    """The newest snapshot version Spark's state store coordinator heard of, per partition, in this run
    (``None``: none)."""
    jvm = spark.sparkContext._jvm
    state = jvm.org.apache.spark.sql.execution.streaming.state
    coordinator = spark._jsparkSession.streams().stateStoreCoordinator()
    location = "file:" + str((Path(root) / "checkpoint" / "state").resolve())
    run = jvm.java.util.UUID.fromString(str(run_id))
    out = []
    for part in range(2):
        store = state.StateStoreId(location, 0, part, "default")
        known = coordinator.getLatestSnapshotVersionForTesting(state.StateStoreProviderId(store, run))
        out.append(known.get() if known.isDefined() else None)
    return out


def query_run_id(spark):
    """The run ID of the active query (one at a time here)."""
    return next(q.runId for q in spark.streams.active)


def main() -> None:
    root, runs, provider, *extra = sys.argv[1:]
    from pyspark.sql import SparkSession

    import lineagestore

    builder = (
        SparkSession.builder.master("local[2]")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.streaming.stateStore.maintenanceInterval", "1h")
        .config("spark.sql.streaming.stateStore.providerClass", provider)
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
    )
    for kv in extra:
        key, value = kv.split("=", 1)
        builder = builder.config(key, value)
    spark = lineagestore.configure(builder).getOrCreate()
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", provider)
    spark.sparkContext.setLogLevel("ERROR")
    inp = Path(root) / "in"
    checkpoint = str(Path(root) / "checkpoint")
    inp.mkdir(parents=True, exist_ok=True)
    for i in range(int(runs)):
        rows = (json.dumps({"k": (i * 7 + j) % 40, "v": i}) for j in range(100))
        (inp / f"part-{i:04d}.json").write_text("\n".join(rows))
        df = spark.readStream.schema("k INT, v INT").json(str(inp)).groupBy("k").count()
        told = []

        def batch(out, _batch_id, told=told):
            out.collect()  # runs the batch: its commits, and their reports (synchronous RPCs), are done
            # read while the query runs: the coordinator forgets a run's stores when the run ends
            told.append(coordinator_uploads(spark, root, query_run_id(spark)))

        query = (
            df.writeStream.outputMode("update")
            .foreachBatch(batch)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        ops = [op for p in query.recentProgress for op in json.loads(p.json).get("stateOperators", [])]
        print(json.dumps([op.get("customMetrics", {}) for op in ops]), flush=True)
        print(json.dumps({"coordinator": told[-1] if told else [None, None]}), flush=True)
    # no spark.stop(), no wait: the process ends as a scheduled run's does


if __name__ == "__main__":
    main()

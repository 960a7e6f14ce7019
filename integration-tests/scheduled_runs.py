"""One process running a count aggregation as ``runs`` short availableNow runs, for test_scheduled_runs.

Spark's maintenance thread never runs here (maintenanceInterval 1h), as in a short scheduled run whose
process ends first: every snapshot must come from lineagestore itself (catch-up on commit, upload at exit).
Prints one JSON line per run: the custom metrics of the stateful operator.

    python scheduled_runs.py <root> <runs> <provider class> [key=value ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


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
    inp.mkdir(parents=True, exist_ok=True)
    for i in range(int(runs)):
        rows = (json.dumps({"k": (i * 7 + j) % 40, "v": i}) for j in range(100))
        (inp / f"part-{i:04d}.json").write_text("\n".join(rows))
        df = spark.readStream.schema("k INT, v INT").json(str(inp)).groupBy("k").count()
        query = (
            df.writeStream.outputMode("update")
            .format("noop")
            .option("checkpointLocation", str(Path(root) / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        ops = [op for p in query.recentProgress for op in json.loads(p.json).get("stateOperators", [])]
        print(json.dumps([op.get("customMetrics", {}) for op in ops]), flush=True)
    # no spark.stop(), no wait: the process ends as a scheduled run's does


if __name__ == "__main__":
    main()

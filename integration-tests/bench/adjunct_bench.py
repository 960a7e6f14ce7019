"""Adjunct-table lookup vs Spark's stream-static join re-reading Parquet (issue 19's benchmark).

    python integration-tests/bench/adjunct_bench.py --keys 1000000 --events 100000 --change 0.01 --batches 5

A table of ``--keys`` keys is kept twice: as an adjunct table (maintained batch by batch, one version per
batch) and as Parquet rewritten per version (Spark's usual static side). Per batch, ``--change`` of the keys
change; then ``--events`` events with random keys are enriched both ways and written to Spark's ``noop``
sink: the lookup at the batch's version from the executor's replica, and ``events.join(read.parquet)``
re-reading the table. Reported per batch: both enrichment times and what the replica loaded (deltas
replayed, delta bytes, snapshot bytes downloaded). Timing covers enrichment only, not maintenance or the
Parquet rewrite. local[2], local filesystem.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import lineagestore
from lineagestore import adjunct


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--change", type=float, default=0.01)
    ap.add_argument("--batches", type=int, default=5)
    args = ap.parse_args()
    spark = lineagestore.configure(
        SparkSession.builder.master("local[2]")
        .config("spark.driver.memory", "3g")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    ).getOrCreate()
    base = tempfile.mkdtemp(prefix="adjunct-bench-")
    table = f"{base}/table"
    rows = (
        spark.range(args.keys)
        .select(
            F.col("id").cast("int").alias("id"),
            F.lit("upsert").alias("op"),
            F.lit(0).cast("long").alias("seq"),
            F.concat(F.lit("name-"), F.col("id").cast("string")).alias("name"),
            (F.col("id") * 0.5).alias("score"),
        )
        .cache()
    )
    t0 = time.time()
    adjunct.maintain_batch(rows, 0, table, ["id"], "seq", source="bench")
    build_s = time.time() - t0
    rows.drop("op", "seq").write.parquet(f"{base}/parquet/0")
    results = []
    n_change = int(args.keys * args.change)
    for b in range(1, args.batches + 1):
        changed = (
            spark.range(n_change)
            .select(
                ((F.col("id") * 7919 + b * 104729) % args.keys).cast("int").alias("id"),
                F.lit("upsert").alias("op"),
                F.lit(b).cast("long").alias("seq"),
                F.concat(F.lit(f"name-v{b}-"), F.col("id").cast("string")).alias("name"),
                F.lit(float(b)).alias("score"),
            )
            .cache()
        )
        version = adjunct.maintain_batch(changed, b, table, ["id"], "seq", source="bench")
        prev = spark.read.parquet(f"{base}/parquet/{b - 1}")
        prev.join(changed.select("id"), "id", "left_anti").unionByName(
            changed.drop("op", "seq")
        ).write.parquet(f"{base}/parquet/{b}")
        events = spark.range(args.events).select(
            F.col("id").alias("event"), ((F.col("id") * 31 + b) % args.keys).cast("int").alias("id")
        )
        before = adjunct.local_replica_stats(spark, table)
        t = time.time()
        adjunct.lookup(events, table, version=version).write.format("noop").mode("overwrite").save()
        lookup_s = time.time() - t
        after = adjunct.local_replica_stats(spark, table)
        t = time.time()
        events.join(spark.read.parquet(f"{base}/parquet/{b}"), "id", "left").write.format("noop").mode(
            "overwrite"
        ).save()
        join_s = time.time() - t
        replayed = after["deltasReplayed"] - before.get("deltasReplayed", 0)
        delta_bytes = sum(
            os.path.getsize(os.path.join(table, "store/0", f))
            for f in os.listdir(os.path.join(table, "store/0"))
            if f.startswith(f"{version}_") and f.endswith(".delta")
        )
        results.append(
            {
                "batch": b,
                "version": version,
                "lookup_s": round(lookup_s, 3),
                "parquet_join_s": round(join_s, 3),
                "deltas_replayed": replayed,
                "delta_bytes": delta_bytes,
                "snapshot_bytes_downloaded": after["bytesDownloaded"] - before.get("bytesDownloaded", 0),
            }
        )
        print(json.dumps(results[-1]), flush=True)
    steady = results[1:] if len(results) > 1 else results  # batch 1: the replica's first, full load
    med_lookup = statistics.median(r["lookup_s"] for r in steady)
    med_join = statistics.median(r["parquet_join_s"] for r in steady)
    table_bytes = sum(
        os.path.getsize(os.path.join(d, f))
        for d, _, fs in os.walk(os.path.join(table, "store/0"))
        for f in fs
    )
    print(
        json.dumps(
            {
                "keys": args.keys,
                "events": args.events,
                "changed_per_batch": n_change,
                "initial_build_s": round(build_s, 1),
                "median_lookup_s": med_lookup,
                "median_parquet_join_s": med_join,
                "speedup": round(med_join / med_lookup, 2),
                "median_delta_bytes": statistics.median(r["delta_bytes"] for r in steady),
                "table_store_bytes": table_bytes,
            }
        )
    )


if __name__ == "__main__":
    main()

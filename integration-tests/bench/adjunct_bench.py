"""Adjunct-table lookup vs Spark's stream-static join re-reading Parquet (issue 19's benchmark).

    python integration-tests/bench/adjunct_bench.py --keys 1000000 --events 100000 --change 0.01 --batches 5

A table of ``--keys`` keys is kept twice: as an adjunct table (maintained batch by batch, one version per
batch) and as Parquet rewritten per version (Spark's usual static side). Per batch, ``--change`` of the keys
change; then ``--events`` events with random keys are enriched both ways and written to Spark's ``noop``
sink: the lookup at the batch's version from the executor's replica, and ``events.join(read.parquet)``
re-reading the table. Reported per batch: both enrichment times and what the replica loaded (deltas
replayed, delta bytes, snapshot bytes downloaded). Timing covers enrichment only, not maintenance or the
Parquet rewrite. Times are wall seconds and the JVM's CPU seconds (user + system, /proc), the latter less
sensitive to other load on the machine. Also per batch: the lookup again at the same version (the replica
already holds it: the lookup without its refresh) and the events alone into the same sink (the Spark job any
enrichment runs). ``--jfr PREFIX`` records JFR profiles (see the option). local[2], local filesystem.

Maintain (issue 52): each maintain call's wall time, and per executor what its maintain tasks did (tasks,
their time, the packed change bytes they received, the delta bytes they wrote, the bytes their loads
downloaded), from ``MaintainTasks.lastReport``. ``--partitions N`` keeps the table in N partitions (the
events are then shuffled like it), ``--cluster W`` runs on a standalone cluster of W one-core executors
instead of local[2] (the CPU figures are then the driver's only), ``--maintain-only`` skips the enrichment.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from pyspark.sql import functions as F

from lineagestore import adjunct
from lineagestore.testing.session import local_builder


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--change", type=float, default=0.01)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument(
        "--jfr",
        help="record JFR profiles (settings 'profile') of each steady batch's lookup and Parquet join, into "
        "JFR-lookup-bN.jfr and JFR-parquet-bN.jfr, and of the first build into JFR-build.jfr; summarise them with jfr_profile.py",
    )
    ap.add_argument("--partitions", type=int, default=None, help="maintain the table in N partitions")
    ap.add_argument("--cluster", type=int, default=0, help="run on a standalone cluster of W workers")
    ap.add_argument("--maintain-only", action="store_true", help="measure maintain only (no enrichment)")
    args = ap.parse_args()
    cluster = None
    if args.cluster:
        from lineagestore.testing.cluster import StandaloneCluster

        cluster = StandaloneCluster(workers=args.cluster, memory="1536m").start()
        builder = cluster.configure(local_builder(partitions=4, conf={"spark.driver.memory": "3g"}))
        spark = builder.getOrCreate()
        cluster.await_executors(spark)
    else:
        spark = local_builder(partitions=4, conf={"spark.driver.memory": "3g"}).getOrCreate()
    try:
        run(spark, args)
    finally:
        if cluster is not None:
            spark.stop()
            cluster.stop()


def maintain_tasks(spark: Any, table: str) -> dict[str, dict]:
    """Per executor, what the last maintain call's tasks did (an older build without the report: empty)."""
    try:
        text = spark._jvm.io.lineagestore.spark.adjunct.MaintainTasks.lastReport(table)
    except Exception:  # noqa: BLE001 - a build before maintain moved to the executors
        return {}
    per: dict[str, dict] = {}
    for r in map(json.loads, text.splitlines()):
        e = per.setdefault(
            f"{r['executor']}@{r['host']}",
            {"tasks": 0, "ms": 0, "change_bytes": 0, "delta_bytes": 0, "downloaded_bytes": 0, "warm": 0},
        )
        e["tasks"] += 1
        e["ms"] += r["millis"]
        e["change_bytes"] += r["changeBytes"]
        e["delta_bytes"] += r["deltaBytes"]
        e["downloaded_bytes"] += r["bytesDownloaded"]
        e["warm"] += int(r["warm"])
    return per


def run(spark: Any, args: Any) -> None:
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
    jvm_pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    ticks = os.sysconf("SC_CLK_TCK")

    def jvm_cpu_s() -> float:
        """CPU seconds the driver JVM (which runs the tasks in local mode) used so far, user + system."""
        with open(f"/proc/{jvm_pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks

    build_recording = None
    if args.jfr:
        jfr = spark._jvm.jdk.jfr
        build_recording = jfr.Recording(jfr.Configuration.getConfiguration("profile"))
        build_recording.start()
    t0, cpu0 = time.time(), jvm_cpu_s()
    adjunct.maintain_batch(rows, 0, table, ["id"], "seq", source="bench", partitions=args.partitions)
    build_s, build_cpu_s = time.time() - t0, jvm_cpu_s() - cpu0
    if build_recording is not None:
        build_recording.stop()
        build_recording.dump(spark._jvm.java.io.File(f"{args.jfr}-build.jfr").toPath())
        build_recording.close()
    print(
        json.dumps({"build_s": round(build_s, 1), "maintain_tasks": maintain_tasks(spark, table)}), flush=True
    )
    if not args.maintain_only:
        rows.drop("op", "seq").write.parquet(f"{base}/parquet/0")
    results = []

    def enrich(name: str, b: int, enriched: Callable[[], Any]) -> tuple[float, float]:
        """Builds the enriched DataFrame and writes it to the noop sink, under a JFR recording when --jfr asks
        (steady batches); returns the wall seconds and the JVM's CPU seconds both took (the recording's start
        and dump not included)."""

        def run() -> tuple[float, float]:
            t, cpu = time.time(), jvm_cpu_s()
            enriched().write.format("noop").mode("overwrite").save()
            return time.time() - t, jvm_cpu_s() - cpu

        if not args.jfr or b == 1:
            return run()
        jfr = spark._jvm.jdk.jfr
        recording = jfr.Recording(jfr.Configuration.getConfiguration("profile"))
        recording.start()
        try:
            return run()
        finally:
            recording.stop()
            recording.dump(spark._jvm.java.io.File(f"{args.jfr}-{name}-b{b}.jfr").toPath())
            recording.close()

    def parquet_join(events: Any, parquet: str) -> Any:
        return events.join(spark.read.parquet(parquet), "id", "left")

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
        t_maintain = time.time()
        version = adjunct.maintain_batch(changed, b, table, ["id"], "seq", source="bench")
        maintain_s = time.time() - t_maintain
        if args.maintain_only:
            results.append({"batch": b, "version": version, "maintain_s": round(maintain_s, 3)})
            print(json.dumps({**results[-1], "maintain_tasks": maintain_tasks(spark, table)}), flush=True)
            continue
        prev = spark.read.parquet(f"{base}/parquet/{b - 1}")
        prev.join(changed.select("id"), "id", "left_anti").unionByName(
            changed.drop("op", "seq")
        ).write.parquet(f"{base}/parquet/{b}")
        events = spark.range(args.events).select(
            F.col("id").alias("event"), ((F.col("id") * 31 + b) % args.keys).cast("int").alias("id")
        )
        if args.partitions:
            events = events.repartition(args.partitions, "id")
        before = adjunct.local_replica_stats(spark, table)
        lookup_s, lookup_cpu = enrich(
            "lookup", b, functools.partial(adjunct.lookup, events, table, version=version)
        )
        after = adjunct.local_replica_stats(spark, table)
        # the events alone into the same sink: the Spark job every enrichment runs, without any join
        events_s, events_cpu = enrich("events", 1, functools.partial(lambda e: e, events))
        # the same lookup again: the replica already holds the version, so this is the lookup alone
        again_s, again_cpu = enrich(
            "again", 1, functools.partial(adjunct.lookup, events, table, version=version)
        )
        join_s, join_cpu = enrich(
            "parquet", b, functools.partial(parquet_join, events, f"{base}/parquet/{b}")
        )
        replayed = after["deltasReplayed"] - before.get("deltasReplayed", 0)
        delta_bytes = sum(
            os.path.getsize(os.path.join(d, f))
            for d, _, fs in os.walk(os.path.join(table, "store"))
            for f in fs
            if f.endswith(".delta") and f in {f"{c}.delta" for c in committed_now(spark, table, version)}
        )
        results.append(
            {
                "batch": b,
                "version": version,
                "maintain_s": round(maintain_s, 3),
                "lookup_s": round(lookup_s, 3),
                "parquet_join_s": round(join_s, 3),
                "lookup_cpu_s": round(lookup_cpu, 2),
                "lookup_again_s": round(again_s, 3),
                "lookup_again_cpu_s": round(again_cpu, 2),
                "events_only_s": round(events_s, 3),
                "events_only_cpu_s": round(events_cpu, 2),
                "parquet_join_cpu_s": round(join_cpu, 2),
                "deltas_replayed": replayed,
                "delta_bytes": delta_bytes,
                "snapshot_bytes_downloaded": after["bytesDownloaded"] - before.get("bytesDownloaded", 0),
                # loads after which the replica sorted what it replayed (an older build: no figure)
                "replica_compactions": after.get("compactions", 0) - before.get("compactions", 0),
                "replica_load_ms": after.get("lastLoadMs"),
                "replica_compact_ms": after.get("lastCompactMs"),
                "replica_mark_ms": after.get("lastMarkMs"),
            }
        )
        print(json.dumps(results[-1]), flush=True)
    steady = results[1:] if len(results) > 1 else results  # batch 1: the replica's first, full load
    if args.maintain_only:
        print(
            json.dumps(
                {
                    "keys": args.keys,
                    "partitions": args.partitions,
                    "changed_per_batch": n_change,
                    "initial_build_s": round(build_s, 1),
                    "median_maintain_s": statistics.median(r["maintain_s"] for r in steady),
                }
            )
        )
        return
    med_lookup = statistics.median(r["lookup_s"] for r in steady)
    med_join = statistics.median(r["parquet_join_s"] for r in steady)
    med_lookup_cpu = statistics.median(r["lookup_cpu_s"] for r in steady)
    med_join_cpu = statistics.median(r["parquet_join_cpu_s"] for r in steady)
    med_again_cpu = statistics.median(r["lookup_again_cpu_s"] for r in steady)
    med_events_cpu = statistics.median(r["events_only_cpu_s"] for r in steady)
    table_bytes = sum(
        os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(table, "store")) for f in fs
    )
    print(
        json.dumps(
            {
                "keys": args.keys,
                "events": args.events,
                "changed_per_batch": n_change,
                "median_maintain_s": statistics.median(r["maintain_s"] for r in steady),
                "initial_build_s": round(build_s, 1),
                "initial_build_cpu_s": round(build_cpu_s, 1),
                "median_lookup_s": med_lookup,
                "median_parquet_join_s": med_join,
                "speedup": round(med_join / med_lookup, 2),
                "median_lookup_cpu_s": med_lookup_cpu,
                "median_parquet_join_cpu_s": med_join_cpu,
                "cpu_ratio": round(med_join_cpu / med_lookup_cpu, 2),
                "median_lookup_again_cpu_s": med_again_cpu,
                "median_events_only_cpu_s": med_events_cpu,
                "median_delta_bytes": statistics.median(r["delta_bytes"] for r in steady),
                "table_store_bytes": table_bytes,
            }
        )
    )


def committed_now(spark: Any, table: str, version: int) -> set[str]:
    """The store checkpoints (``<v>_<id>``) table version ``version`` committed: the one store's, or each
    partition's that changed."""
    text = open(os.path.join(table, "_adjunct", "commits", str(version))).read()
    rec = dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
    if "partitions" not in rec:
        return {f"{rec['version']}_{rec['uniqueId']}"}
    previous = os.path.join(table, "_adjunct", "commits", str(version - 1))
    before = set()
    if os.path.exists(previous):
        with open(previous) as f:
            before = {line for line in f.read().splitlines() if line.startswith("store.")}
    return {
        line.split("=", 1)[1]
        for line in text.splitlines()
        if line.startswith("store.") and line not in before
    }


if __name__ == "__main__":
    main()

"""Repartition and migrate benchmark (issue 16): lineagestore's ``repartition`` against Spark 4.3's own offline
repartition (``spark._streamingCheckpointManager.repartition``) of the same state in Spark's RocksDB provider,
in the same run, on the local filesystem and on S3 (the harness's local S3 server).

    python integration-tests/bench/repartition_bench.py --keys 1000000 --out /tmp/repart-bench.json
    python integration-tests/bench/repartition_bench.py --smoke          # seconds: keeps the script working

Two states, each built once per provider from the same input (``--keys`` distinct string keys, then a second
batch updating a tenth of them; ``--from`` partitions): an aggregation (``groupBy(k).agg(sum, count)``) and a
dropDuplicates (``dropDuplicates([k])``). Spark's RocksDB provider runs with checkpoint format version 2 and
changelog checkpointing; lineagestore with its defaults. Each built checkpoint is copied (local: a directory
copy; S3: uploaded under a fresh prefix) before every measured operation, so every operation starts from the
same bytes. Measured per operation: wall time, bytes read and written and requests by type, as the store saw
them (local: the counting filesystem ``lsbench://``, CountingFileSystem.java; S3: s3a's IOStatistics of the
bucket's filesystem, which every client in the JVM shares). Both tools run in the same JVM (local[2]).
lineagestore's is measured three ways: in the tools' JVM on its threads (the command line without
``--master``), as a Spark job on the session (``repartition(spark, ...)``: on local[2] its tasks run in the same
JVM, on two cores), and in the tools' JVM with its grouped, parallel rewrite for multiples and divisors turned
off (``general_path_only``), which shows what that path gains.

Also measured: ``lineagestore.migrate.migrate`` of the RocksDB provider's checkpoints (same partition count).
After every operation the resulting checkpoint's state is counted with Spark's ``statestore`` data source
(outside the timing): a repartition that lost or duplicated a key fails the run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from measure import LocalCounters, S3Counters, diff, summarize_ops  # noqa: E402

from lineagestore import PROVIDER_CLASS as LINEAGE  # noqa: E402

RDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
FS_CHECKPOINT_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
PROVIDERS = {"rocksdb_v2": (RDB, {CHANGELOG: "true"}), "lineagestore": (LINEAGE, {CHANGELOG: "false"})}
WORKLOADS = ("agg", "dedup")
# lineagestore: the tools' JVM on its threads (the command line without --master); lineagestore_job: the
# in-session entry point, a Spark job on the session's executors; lineagestore_general: the tools' JVM with
# its grouped, parallel rewrite turned off (what it gains)
TOOLS = ("spark", "lineagestore", "lineagestore_job", "lineagestore_general")
BUCKET = "lsbench-repartition"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--from", dest="old", type=int, default=8, help="partitions the states are built with")
    ap.add_argument("--to", default="12,4", help="new partition counts, comma separated")
    ap.add_argument("--stores", default="local,s3", help="local, s3 or both")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="agg, dedup or both")
    ap.add_argument("--rounds", type=int, default=1, help="repeats of every operation (median reported)")
    ap.add_argument("--no-migrate", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="2000 keys, agg, 2 -> 3, local only, one round")
    ap.add_argument("--work-dir")
    ap.add_argument("--out", help="results JSON (also printed)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.keys, args.old, args.to, args.stores, args.rounds = 2000, 2, "3", "local", 1
        args.workloads = "agg"
    args.targets = [int(n) for n in args.to.split(",") if n]
    args.store_list = [s for s in args.stores.split(",") if s]
    args.workload_list = [w for w in args.workloads.split(",") if w]
    return args


# ------------------------------------------------------------------------------------------- set-up
def start_session(work: Path, s3: Any | None):
    from environment import compile_counting_fs, find_jar
    from pyspark.sql import SparkSession

    import lineagestore

    counting = compile_counting_fs(work / "counting-classes")
    jar = work / find_jar().name  # a stable copy: a build may replace the jar while the benchmark runs
    shutil.copy2(find_jar(), jar)
    jars = [str(jar)]
    classpath = [str(counting)]
    if s3 is not None:
        from lineagestore.testing.s3 import s3a_jars

        jars += s3a_jars()
        classpath += s3a_jars()  # on the driver's class path too: py4j's FileSystem.get must find s3a
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("repartition-bench")
        .config("spark.driver.memory", "3g")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.local.dir", str(work / "spark-local"))
        .config("spark.jars", ",".join(jars))
        .config("spark.driver.extraClassPath", os.pathsep.join(classpath))
        .config("spark.hadoop.fs.lsbench.impl", "io.lineagestore.bench.CountingFileSystem")
        .config(
            "spark.hadoop.fs.AbstractFileSystem.lsbench.impl", "io.lineagestore.bench.CountingFileSystem$Fs"
        )
        # every request through the one cached FileSystem per scheme/bucket, whose statistics count them
        .config("spark.sql.streaming.checkpointFileManagerClass", FS_CHECKPOINT_MANAGER)
        .config("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    )
    if s3 is not None:
        for k, v in s3.spark_conf(BUCKET).items():
            builder = builder.config(k, v)
    spark = lineagestore.configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    from lineagestore.jvm import connect

    tools = connect(in_session="ignore")
    # the command-line tools keep a Hadoop configuration of their own
    tools.set_hadoop_conf("fs.lsbench.impl", "io.lineagestore.bench.CountingFileSystem")
    if s3 is not None:
        for k, v in s3.hadoop_conf(BUCKET).items():
            tools.set_hadoop_conf(k, v)
    return spark, tools


def write_input(spark, root: Path, keys: int) -> Path:
    """Batch 0: every key once; batch 1: a tenth of the keys again (updates the aggregation, duplicates for
    dropDuplicates). One Parquet file per batch (the source reads one file per trigger)."""
    from pyspark.sql import functions as F

    src = root / "input"
    if (src / "_done").exists():
        return src
    shutil.rmtree(src, ignore_errors=True)
    for b, (n, step) in enumerate([(keys, 1), (max(1, keys // 10), 10)]):
        df = spark.range(n).select(
            F.format_string("key-%09d", F.col("id") * step).alias("k"), (F.col("id") % 97).alias("v")
        )
        tmp = root / f"input-{b}"
        df.coalesce(1).write.mode("overwrite").parquet(str(tmp))
        src.mkdir(parents=True, exist_ok=True)
        (part,) = tmp.glob("part-*.parquet")
        os.replace(part, src / f"batch-{b}.parquet")
        shutil.rmtree(tmp)
    (src / "_done").write_text("")
    return src


def build(spark, provider: str, workload: str, source: Path, checkpoint: str, partitions: int) -> float:
    from pyspark.sql import functions as F

    cls, extra = PROVIDERS[provider]
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", cls)
    spark.conf.set("spark.sql.streaming.stateStore.checkpointFormatVersion", "2")
    for k, v in extra.items():
        spark.conf.set(k, v)
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    df = spark.readStream.schema("k string, v long").option("maxFilesPerTrigger", 1).parquet(str(source))
    if workload == "agg":
        out, mode = df.groupBy("k").agg(F.sum("v").alias("s"), F.count("*").alias("c")), "update"
    else:
        out, mode = df.dropDuplicates(["k"]), "append"
    t0 = time.monotonic()
    q = (
        out.writeStream.format("noop")
        .outputMode(mode)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    return time.monotonic() - t0


def state_rows(spark, checkpoint: str) -> tuple[int, int]:
    """(rows, partitions) of operator 0's state at the last committed batch, read by Spark."""
    from pyspark.sql import functions as F

    r = (
        spark.read.format("statestore")
        .load(checkpoint)
        .agg(F.count("*").alias("n"), F.countDistinct("partition_id").alias("p"))
        .collect()[0]
    )
    return int(r["n"]), int(r["p"])


# --------------------------------------------------------------------------------------- copies
class Place:
    """Where the measured checkpoints live: the counting local filesystem or the S3 bucket."""

    def __init__(self, kind: str, work: Path, spark, s3: Any | None):
        self.kind, self.work, self.spark, self.s3 = kind, work, spark, s3
        self.counters = LocalCounters(spark) if kind == "local" else None
        self.area = "state" if kind == "local" else "all"
        self._n = 0

    def fresh_copy(self, base: Path) -> str:
        """A copy of the built checkpoint at ``base`` (a local directory) to run one operation on."""
        self._n += 1
        name = f"{base.parent.name}-{base.name}-{self._n}"
        if self.kind == "local":
            dest = self.work / "copies" / name
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(base, dest)
            return f"lsbench://{dest}"
        client = self.s3.boto3_client()
        for f in base.rglob("*"):
            if f.is_file() and not f.name.endswith(".crc"):
                client.upload_file(str(f), BUCKET, f"{name}/{f.relative_to(base)}")
        if self.counters is None:  # the bucket's FileSystem exists once the session touched it
            self.counters = S3Counters(self.spark, BUCKET)
        return f"s3a://{BUCKET}/{name}"

    def discard(self, uri: str) -> None:
        if self.kind == "local":
            shutil.rmtree(uri.removeprefix("lsbench://"), ignore_errors=True)
        else:
            client = self.s3.boto3_client()
            prefix = uri.removeprefix(f"s3a://{BUCKET}/") + "/"
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
                keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
                if keys:
                    client.delete_objects(Bucket=BUCKET, Delete={"Objects": keys})

    def measure(self, fn) -> dict[str, Any]:
        before = self.counters.raw()
        t0 = time.monotonic()
        out = fn()
        wall = time.monotonic() - t0
        d = diff(self.counters.raw(), before)
        io = summarize_ops(d, self.area)
        if self.kind == "local":  # Spark's JSON logs (offsets, commits) are outside state/: count them too
            meta = summarize_ops(d, "meta")
            io = {k: io[k] + meta[k] for k in io}
        return {"wall_s": round(wall, 3), "io": io, "out": out}


# ------------------------------------------------------------------------------------------ operations
def spark_repartition(spark, uri: str, n: int) -> None:
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", RDB)
    spark._streamingCheckpointManager.repartition(uri, n)


def lineagestore_repartition(target, uri: str, n: int, general_path_only: bool) -> dict[str, Any]:
    """``target``: the tools (their JVM's threads) or the SparkSession (a Spark job)."""
    from lineagestore.repartition import repartition

    out = repartition(target, uri, n, general_path_only=general_path_only)
    return {"rowsMoved": out["rowsMoved"], "phasesMs": out["phasesMs"], "tasks": out.get("tasks")}


def lineagestore_migrate(spark, uri: str) -> dict[str, Any]:
    from lineagestore.migrate import migrate

    out = migrate(spark, uri)
    return {"rowsMoved": out["rowsMoved"]}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    middle = sorted(runs, key=lambda r: r["wall_s"])[len(runs) // 2]  # the median run's bytes and phases
    io = middle["io"]
    phases = (middle["out"] or {}).get("phasesMs")
    return {
        **({"phasesMs": phases} if phases else {}),
        "wall_s": round(statistics.median(r["wall_s"] for r in runs), 3),
        "wall_s_all": [r["wall_s"] for r in runs],
        "bytes_read": io["get_bytes"],
        "bytes_written": io["put_bytes"],
        "requests": {k: v for k, v in io.items() if not k.endswith("_bytes")},
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="repart-bench-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    s3 = None
    if "s3" in args.store_list:
        from lineagestore.testing.s3 import S3Server

        s3 = S3Server().start()
        s3.bucket(BUCKET)
    spark, tools = start_session(work, s3)
    results: dict[str, Any] = {
        "keys": args.keys,
        "from": args.old,
        "to": args.targets,
        "rounds": args.rounds,
        "machine": {"nproc": os.cpu_count(), "load_avg_start": os.getloadavg()},
        "builds": {},
        "cases": [],
    }
    try:
        source = write_input(spark, work, args.keys)
        bases: dict[tuple[str, str], Path] = {}
        for workload in args.workload_list:
            for provider in PROVIDERS:
                base = work / "built" / f"{workload}-{provider}"
                shutil.rmtree(base, ignore_errors=True)
                base.parent.mkdir(parents=True, exist_ok=True)
                secs = build(spark, provider, workload, source, f"lsbench://{base}", args.old)
                rows, parts = state_rows(spark, f"lsbench://{base}")
                results["builds"][f"{workload}/{provider}"] = {"build_s": round(secs, 1), "state_rows": rows}
                print(
                    f"built {workload}/{provider}: {rows} rows in {parts} partitions, {secs:.1f}s", flush=True
                )
                bases[(workload, provider)] = base
        for kind in args.store_list:
            place = Place(kind, work, spark, s3)
            for workload in args.workload_list:
                expected = results["builds"][f"{workload}/rocksdb_v2"]["state_rows"]
                for n in args.targets:
                    case: dict[str, Any] = {"store": kind, "workload": workload, "from": args.old, "to": n}
                    for tool in TOOLS:
                        provider = "rocksdb_v2" if tool == "spark" else "lineagestore"
                        runs = []
                        for _ in range(args.rounds):
                            uri = place.fresh_copy(bases[(workload, provider)])
                            if tool == "spark":
                                r = place.measure(lambda u=uri, m=n: spark_repartition(spark, u, m))
                            else:
                                general = tool == "lineagestore_general"
                                target = spark if tool == "lineagestore_job" else tools
                                r = place.measure(
                                    lambda u=uri, m=n, g=general, t=target: lineagestore_repartition(
                                        t, u, m, g
                                    )
                                )
                            rows, parts = state_rows(spark, uri)
                            if rows != expected or parts != n:
                                raise SystemExit(
                                    f"{tool} repartition of {workload} to {n} on {kind}: {rows} rows in {parts} "
                                    f"partitions, expected {expected} rows in {n}"
                                )
                            runs.append(r)
                            place.discard(uri)
                        case[tool] = summarize(runs)
                    case["ratio"] = round(case["lineagestore"]["wall_s"] / case["spark"]["wall_s"], 3)
                    case["ratio_job"] = round(case["lineagestore_job"]["wall_s"] / case["spark"]["wall_s"], 3)
                    results["cases"].append(case)
                    print(json.dumps(case), flush=True)
                if not args.no_migrate:
                    runs = []
                    for _ in range(args.rounds):
                        uri = place.fresh_copy(bases[(workload, "rocksdb_v2")])
                        r = place.measure(lambda u=uri: lineagestore_migrate(spark, u))
                        rows, _ = state_rows(spark, uri)
                        if rows != expected:
                            raise SystemExit(
                                f"migrate of {workload} on {kind}: {rows} rows, expected {expected}"
                            )
                        runs.append(r)
                        place.discard(uri)
                    m = {"store": kind, "workload": workload, "migrate": summarize(runs)}
                    results.setdefault("migrations", []).append(m)
                    print(json.dumps(m), flush=True)
    finally:
        results["machine"]["load_avg_end"] = os.getloadavg()
        tools.close()
        spark.stop()
        if s3 is not None:
            s3.stop()
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(results, indent=1)
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return results


if __name__ == "__main__":
    main()

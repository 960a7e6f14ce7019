"""Recovery after executor loss (issue 18): lineagestore against Spark's RocksDB provider (checkpoint format V2,
changelog checkpointing), same standalone cluster, same S3 server, same run.

    PYTHONPATH=integration-tests .venv/bin/python integration-tests/bench/recovery_bench.py \\
        --keys 4000000 --s3-stream-limit 16 --out docs/benchmarks/recovery

Per provider, one query (a running aggregation whose state holds a random, incompressible payload per key,
about ``--payload-bytes`` each) is built to ``--keys`` keys on ``s3a://`` in ``--build-batches`` batches, then
updated until every partition has a snapshot on S3 (both providers snapshot every ``minDeltasForSnapshot``
versions; Spark's maintenance uploads its snapshots, lineagestore uploads its own after the commit). Then, per
kill: the input of one update batch arrives, and ``--kill-after`` seconds into that batch one executor JVM is
SIGKILLed and its host's lineagestore local directory removed (a lost machine: the replacement executor the
Worker starts there has an empty disk for both providers; Spark's provider never reuses a dead executor's
directory anyway). Measured: seconds from the kill to the end of that batch, and the bytes every client
downloaded from S3 meanwhile (counted by the per-connection throttle, ``stream_limit.py``), next to the same
batch size without a kill. After each kill the next starts only once the replacement executor has registered
with the driver and ``--settle-batches`` update batches have run on it (:func:`settle`), so a cold JVM's
start-up is in neither provider's recovery window; each kill's line says how many executors were registered
at the kill (``executorsAtKill``). ``--thread-dumps DIR`` samples every executor with jstack during each kill's
batch (``thread_dumps.py`` summarises them).

S3 serves one GET stream at a fraction of a host's bandwidth: ``--s3-stream-limit MB/s`` holds every connection
to it, so a restore that reads one file at a time is measured as it would be against S3.
Prints one JSON line per kill and writes ``summary.json`` and ``summary.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "python"))
sys.path.insert(0, str(HERE))

from lineagestore import PROVIDER_CLASS  # noqa: E402

PROVIDERS = {
    "lineagestore": PROVIDER_CLASS,
    "standby": PROVIDER_CLASS,  # lineagestore with standby copies (--standby-replicas)
    "builtin": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}
STANDBY_KEY = "spark.sql.streaming.stateStore.lineagestore.standbyReplicas"


def store_key(location: str) -> str:
    """The local directory name lineagestore gives the store at ``location`` (LocalDirectories.keyOf)."""
    return hashlib.sha256(location.encode()).digest()[:16].hex()


def local_store_bytes(cluster, host: str, checkpoint: str, partitions: int) -> dict[int, int]:
    """Bytes of each of the query's stores (by partition) whose own directory is on ``host``'s disk."""
    out = {}
    for p in range(partitions):
        d = cluster.local_dir(host) / "lineagestore" / "stores" / store_key(f"{checkpoint}/state/0/{p}")
        if d.is_dir():
            out[p] = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
    return out


def standby_snapshots(cluster, host: str, checkpoint: str) -> dict[int, int]:
    """Per partition of operator 0, the snapshot version of the complete standby copy on ``host``."""
    out = {}
    for record in (cluster.local_dir(host) / "lineagestore" / "standby").glob("*/STANDBY"):
        try:
            fields = dict(line.split(" ", 1) for line in record.read_text().splitlines() if " " in line)
        except OSError:
            continue  # replaced while read
        loc = fields.get("location", "").rstrip("/")
        if loc.startswith(f"{checkpoint}/state/0/") and "snapshot" in fields:
            out[int(loc.rsplit("/", 1)[1])] = int(fields["snapshot"].split(" ")[0])
    return out


def wait_standbys(cluster, checkpoint: str, newest: dict[int, int], replicas: int, timeout_s: float) -> float:
    """Until every partition has ``replicas`` complete standby copies (-1: one on every host but one) at or
    past ``newest`` (its newest snapshot on S3 when asked), on hosts other than its owner's; seconds waited."""
    wanted = len(cluster.hosts) - 1 if replicas < 0 else replicas
    started = time.monotonic()
    while True:
        held = {p: 0 for p in newest}
        for host in cluster.hosts:
            for p, v in standby_snapshots(cluster, host, checkpoint).items():
                if p in held and v >= newest[p]:
                    held[p] += 1
        if min(held.values()) >= wanted:
            return time.monotonic() - started
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(
                f"standby copies per partition after {timeout_s:.0f}s: {held} (wanted {wanted})"
            )
        time.sleep(1)


def session(cluster, s3_conf: dict[str, str], args):
    from pyspark.sql import SparkSession

    import lineagestore
    from lineagestore.testing.s3 import s3a_jars

    builder = SparkSession.builder.appName("recovery-bench")
    builder = cluster.configure(builder)
    confs = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "2g",
        "spark.sql.shuffle.partitions": str(args.partitions),
        "spark.sql.streaming.stateStore.minDeltasForSnapshot": str(args.min_deltas),
        "spark.sql.streaming.stateStore.maintenanceInterval": "5s",
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        # tasks of a lost executor's partitions run where a core is free, without waiting for locality
        "spark.locality.wait": "0s",
        **s3_conf,
        **dict(c.split("=", 1) for c in args.conf),
    }
    for k, v in confs.items():
        builder = builder.config(k, v)
    builder = lineagestore.configure(builder)
    # configure() put lineagestore's jar in spark.jars: the s3a jars go with it to the executors
    jars = builder._options.get("spark.jars", "")
    builder = builder.config("spark.jars", ",".join(filter(None, [jars, *s3a_jars()])))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def write_batch(inp: Path, name: str, first: int, count: int, stride: int, keys: int, round_: int) -> None:
    """``count`` rows ``k,r``: keys first, first+stride, ... (mod keys), tagged with the round that makes
    their payload new."""
    tmp = inp.parent / f".{name}"
    with open(tmp, "w") as out:
        for i in range(count):
            out.write(f"{(first + i * stride) % keys},{round_}\n")
    tmp.rename(inp / f"{name}.csv")


def query(spark, provider: str, inp: Path, checkpoint: str, payload_bytes: int, standby_replicas: int = 0):
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.streaming.stateStore.providerClass", PROVIDERS[provider])
    if provider == "standby":
        spark.conf.set(STANDBY_KEY, str(standby_replicas))
    else:
        spark.conf.unset(STANDBY_KEY)
    rows = spark.readStream.schema("k LONG, r INT").option("maxFilesPerTrigger", 1).csv(str(inp))
    # random bytes (SHA-512 of key and round, chained), base64: no codec shrinks them much
    digests = max(1, payload_bytes * 3 // 4 // 64)
    seed = F.concat_ws("/", F.col("k").cast("string"), F.col("r").cast("string"))
    parts = [F.unhex(F.sha2(F.concat(seed, F.lit(f"#{i}")), 512)) for i in range(digests)]
    payload = F.base64(F.concat(*parts))
    return (
        rows.select("k", "r", payload.alias("p"))
        .groupBy("k")
        .agg(F.max(F.struct("r", "p")).alias("latest"), F.count("*").alias("n"))
        .writeStream.outputMode("update")
        .format("noop")
        .option("checkpointLocation", checkpoint)
        .queryName(f"recovery-{provider}")
        .start()
    )


def run_batch(q) -> float:
    """Runs what the input holds (the file just written) to its end; the moment it ended."""
    q.processAllAvailable()
    return time.monotonic()


def wait_idle(q, timeout_s: float = 60) -> None:
    """Until the query's triggers find no data: the batch before has ended whole (its trigger too)."""
    deadline = time.monotonic() + timeout_s
    while q.status["isDataAvailable"] or q.status["isTriggerActive"]:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{q.name} still busy after {timeout_s:.0f}s")
        time.sleep(0.05)


def state_objects(s3, bucket: str, prefix: str) -> list[tuple[str, int]]:
    client = s3.boto3_client()
    out = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/state/"):
        out += [(o["Key"], o["Size"]) for o in page.get("Contents", [])]
    return out


def snapshot_versions(objects: list[tuple[str, int]], partitions: int) -> dict[int, int]:
    """Newest snapshot version per partition of operator 0 (``<v>_<id>.zip`` in either provider's layout)."""
    newest = {p: 0 for p in range(partitions)}
    for key, _ in objects:
        parts = key.split("/")
        if len(parts) >= 4 and parts[-1].endswith(".zip") and parts[-4] == "state" and parts[-3] == "0":
            p, v = int(parts[-2]), int(parts[-1].split("_")[0].split(".")[0])
            newest[p] = max(newest[p], v)
    return newest


def settle(spark, cluster, q) -> None:
    """Until the Worker's replacement for a killed executor has registered with the driver (a running JVM
    is not enough: at load 25 one took 19 s to register), and the batch in progress has ended. The settle
    batches that follow run with every host's executor, so they, not the next kill's window, take the new
    executor's first tasks (its fetch of the application's jars, 0.7 GB with s3a's SDK bundle, its code
    generation, its first s3a filesystem, the stores it is handed). Without this, a replacement that
    registered late joined the next kill's batch for whichever provider had recovered faster the time before,
    and a cold JVM's minute of start-up was measured as that provider's recovery (docs/benchmarks.md,
    "Recovery after executor loss").
    """
    cluster.await_executors(spark)
    wait_idle(q)


def executors_registered(spark) -> int:
    """Executors the driver knows now (its own entry left out)."""
    return len(spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()) - 1


def run_provider(provider: str, spark, cluster, s3, limit, args, work: Path) -> dict:
    bucket = s3.bucket(f"recovery-{provider}")
    checkpoint = f"s3a://{bucket}/ckpt"
    inp = work / provider / "in"
    inp.mkdir(parents=True)
    q = query(spark, provider, inp, checkpoint, args.payload_bytes, args.standby_replicas)
    batch, round_ = -1, 0
    per_build = -(-args.keys // args.build_batches)

    def next_batch(rows: int, first: int, stride: int) -> int:
        nonlocal batch, round_
        batch += 1
        round_ += 1
        write_batch(inp, f"b{batch:04d}", first, rows, stride, args.keys, round_)
        return batch

    started = time.monotonic()
    for b in range(args.build_batches):
        n = min(per_build, args.keys - b * per_build)
        next_batch(n, b * per_build, 1)
        run_batch(q)
        print(provider, f"built batch {batch}: {min(args.keys, (b + 1) * per_build)} keys", file=sys.stderr)
    build_s = time.monotonic() - started
    stride = max(1, args.keys // args.update_rows) | 1
    plain: list[float] = []
    # updates until every partition has a snapshot at or after the build's end on S3
    deadline = time.monotonic() + args.snapshot_wait_s
    while True:
        t0 = time.monotonic()
        next_batch(args.update_rows, batch * 7919, stride)
        plain.append(run_batch(q) - t0)
        objects = state_objects(s3, bucket, "ckpt")
        if min(snapshot_versions(objects, args.partitions).values()) >= args.build_batches:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{provider}: no snapshot in every partition after {args.snapshot_wait_s}s")
        time.sleep(args.maintenance_pause_s)
    state_bytes = sum(size for _, size in objects)
    kills = []
    for i in range(args.kills):
        victim = cluster.hosts[(i + 1) % len(cluster.hosts)]
        before = limit.served_bytes()
        killed: dict = {}

        def kill_in_batch(victim: str = victim, killed: dict = killed) -> None:
            deadline = time.monotonic() + 300  # the trigger that found the new file
            while not (q.status["isDataAvailable"] and q.status["isTriggerActive"]):
                if time.monotonic() > deadline:
                    return
                time.sleep(0.01)
            time.sleep(args.kill_after)
            killed["executors"] = executors_registered(spark)
            killed["pid"] = cluster.kill_executor(victim)
            killed["at"] = time.monotonic()
            shutil.rmtree(cluster.local_dir(victim) / "lineagestore", ignore_errors=True)

        wait_idle(q)
        standby_wait = None
        if provider == "standby":  # the copies of the snapshots on S3 now, on the hosts that follow them
            newest = snapshot_versions(state_objects(s3, bucket, "ckpt"), args.partitions)
            standby_wait = wait_standbys(
                cluster, checkpoint, newest, args.standby_replicas, args.snapshot_wait_s
            )
        lost = local_store_bytes(cluster, victim, checkpoint, args.partitions)
        killer = threading.Thread(target=kill_in_batch)
        killer.start()
        dumps = None
        if args.thread_dumps is not None:
            from thread_dumps import ThreadDumps

            dumps = ThreadDumps(cluster, args.thread_dumps, f"{provider}-kill{i + 1}", args.dump_interval_s)
            dumps.start()
        target = next_batch(args.update_rows, (batch + 1) * 7919, stride)
        done = run_batch(q)
        killer.join()
        if dumps is not None:
            dumps.stop()
        if "at" not in killed or killed["at"] > done:
            raise RuntimeError(f"{provider}: the kill did not land inside batch {target}")
        downloaded = limit.served_bytes() - before
        progress = q.lastProgress

        def metric(name: str, progress: dict = progress):
            return next(
                (
                    v
                    for op in progress["stateOperators"]
                    for k, v in op.get("customMetrics", {}).items()
                    if k == name
                ),
                None,
            )

        kill = {
            "provider": provider,
            "kill": i + 1,
            "host": victim,
            "batch": target,
            "recoveryS": round(done - killed["at"], 2),
            "executorsAtKill": killed["executors"],
            "downloadedBytes": downloaded,
            # the victim's stores' local bytes just before the kill: what a recovery has to bring back
            "lostStores": sorted(lost),
            "lostStoreBytes": sum(lost.values()),
            # None where the lost stores are not known (Spark's provider's local layout is not read here)
            "downloadedOfLost": round(downloaded / sum(lost.values()), 3) if lost else None,
            "lineagestoreBytesDownloaded": metric("lineagestoreBytesDownloaded"),
            "lineagestoreLoadsFromStandby": metric("lineagestoreLoadsFromStandby"),
            "lineagestoreStandbyBytesTaken": metric("lineagestoreStandbyBytesTaken"),
            "lineagestoreStandbyDeltasReplayed": metric("lineagestoreStandbyDeltasReplayed"),
            "standbyWaitS": None if standby_wait is None else round(standby_wait, 1),
        }
        kills.append(kill)
        print(json.dumps(kill), flush=True)
        settle(spark, cluster, q)
        for _ in range(args.settle_batches):
            t0 = time.monotonic()
            next_batch(args.update_rows, (batch + 3) * 7919, stride)
            plain.append(run_batch(q) - t0)
            wait_idle(q)
    q.stop()
    return {
        "provider": provider,
        "keys": args.keys,
        "stateBytesOnS3": state_bytes,
        "buildS": round(build_s, 1),
        "updateBatchS": round(statistics.median(plain), 2),
        "kills": kills,
        "recoveryS": round(statistics.median(k["recoveryS"] for k in kills), 2),
        "downloadedBytes": int(statistics.median(k["downloadedBytes"] for k in kills)),
        "downloadedOfLost": (
            round(statistics.median(known), 3)
            if (known := [k["downloadedOfLost"] for k in kills if k["downloadedOfLost"] is not None])
            else None
        ),
    }


def summarize(results: dict, args, out: Path) -> None:
    """Every provider that ran, each lineagestore variant's ratios to Spark's provider of the same run."""
    spark = results["builtin"]
    ratio = {
        name: {
            "recoveryS": round(r["recoveryS"] / spark["recoveryS"], 2),
            "downloadedBytes": round(r["downloadedBytes"] / max(1, spark["downloadedBytes"]), 2),
            "updateBatchS": round(r["updateBatchS"] / spark["updateBatchS"], 2),
        }
        for name, r in results.items()
        if name != "builtin"
    }
    summary = {
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "out"},
        "providers": results,
        "ratio": ratio,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = [
        "| provider | state on S3 | update batch (no kill) | recovery, kill to batch end (each kill) | "
        "median | downloaded (median) | downloaded / lost stores' bytes |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        each = ", ".join(f"{k['recoveryS']:.1f}" for k in r["kills"])
        lines.append(
            f"| {name} | {r['stateBytesOnS3'] / 1e9:.2f} GB | {r['updateBatchS']:.1f} s | {each} s | "
            f"{r['recoveryS']:.1f} s | {r['downloadedBytes'] / 1e6:.0f} MB | "
            + (f"{r['downloadedOfLost']:.1%} |" if r["downloadedOfLost"] is not None else "not measured |")
        )
    for name, rt in ratio.items():
        lines.append(
            f"\nRatio {name} / Spark's provider: recovery {rt['recoveryS']}x, bytes downloaded "
            f"{rt['downloadedBytes']}x, update batch {rt['updateBatchS']}x."
        )
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=4_000_000)
    ap.add_argument("--payload-bytes", type=int, default=256, help="state payload per key (base64 of random)")
    ap.add_argument("--build-batches", type=int, default=8)
    ap.add_argument("--update-rows", type=int, default=50_000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--min-deltas", type=int, default=4, help="minDeltasForSnapshot, both providers")
    ap.add_argument("--kills", type=int, default=2)
    ap.add_argument("--kill-after", type=float, default=1.0, help="seconds into the batch")
    ap.add_argument(
        "--settle-batches",
        type=int,
        default=2,
        help="update batches after each kill once every host's executor has registered (not measured as "
        "recovery; counted in the update batch median)",
    )
    ap.add_argument("--s3-stream-limit", type=float, default=16.0, help="MB/s per connection")
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--worker-memory", default="4g")
    ap.add_argument("--snapshot-wait-s", type=float, default=600)
    ap.add_argument("--maintenance-pause-s", type=float, default=6.0)
    ap.add_argument(
        "--providers",
        default="lineagestore,builtin",
        help="comma-separated, run in this order: lineagestore, standby (lineagestore with standby copies), "
        "builtin (Spark's RocksDB provider)",
    )
    ap.add_argument(
        "--standby-replicas",
        type=int,
        default=-1,
        help="standbyReplicas of the `standby` provider (-1: a copy on every executor but the store's own)",
    )
    ap.add_argument(
        "--thread-dumps",
        type=Path,
        default=None,
        metavar="DIR",
        help="jstack every executor during each kill's batch into DIR (summarise with thread_dumps.py)",
    )
    ap.add_argument("--dump-interval-s", type=float, default=0.5)
    ap.add_argument("--out", type=Path, default=Path("/tmp/recovery-bench"))
    ap.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for both providers, e.g. spark.hadoop.fs.s3a.input.stream.type=classic",
    )
    args = ap.parse_args()

    from stream_limit import StreamLimit

    from lineagestore.testing.cluster import StandaloneCluster
    from lineagestore.testing.s3 import S3Server

    work = Path(tempfile.mkdtemp(prefix="recovery-bench-"))
    s3 = S3Server().start()
    limit = StreamLimit(s3.endpoint, int(args.s3_stream_limit * 1e6)).start()
    cluster = StandaloneCluster(workers=args.workers, memory=args.worker_memory, base_dir=work / "cluster")
    cluster.start()
    spark = None
    try:
        s3_conf = {k: v for k, v in s3.spark_conf().items()}
        s3_conf["spark.hadoop.fs.s3a.endpoint"] = limit.endpoint
        spark = session(cluster, s3_conf, args)
        results = {}
        for provider in args.providers.split(","):
            results[provider] = run_provider(provider, spark, cluster, s3, limit, args, work)
            print(json.dumps({k: v for k, v in results[provider].items() if k != "kills"}), flush=True)
        if "builtin" in results and len(results) > 1:
            summarize(results, args, args.out)
    finally:
        if spark is not None:
            spark.stop()
        cluster.stop()
        limit.stop()
        s3.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

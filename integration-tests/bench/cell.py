"""One benchmark cell: one provider x one workload x one store, in a fresh Python process and JVM.

``python cell.py SPEC.json`` reads the cell's specification (written by run.py), runs it and writes the
result JSON to ``spec["result_path"]``. A fresh process per cell gives every provider a cold JVM, its own
peak-memory figure (VmHWM of the JVM) and no leftovers of another provider's run.

What a cell does, in order (the query runs with a processing-time trigger of 0 s; each batch's input file
is added only after the previous batch finished, so the store's requests are attributed to one batch):

1. load batch (fills the state), then ``batches`` steady batches; per batch: StreamingQueryProgress
   (durations, state operator metrics incl. custom metrics) and the store requests/bytes since the
   previous batch (from the counting filesystem, or s3a's own statistics on S3);
2. an idle window with the query still running and no input (only maintenance works), then the storage
   footprint of the state directory;
3. stop, unload every state store of the JVM (``StateStore.unloadAll``), restart on the same local
   directory and run one small batch: *warm restore*;
4. stop, unload, restart on a fresh, empty local directory: *cold restore* (with ``--profile-restore``, a JFR
   recording of this step only: ``start_profile``);
5. peak RSS of the JVM, snapshot-upload and clean-up times from the providers' logs.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import workloads  # noqa: E402
from measure import (  # noqa: E402
    LocalCounters,
    S3Counters,
    by_kind,
    diff,
    footprint,
    machine_cpu_seconds,
    parse_log,
    proc_cpu_seconds,
    proc_status,
    progress_record,
    raw_get_throughput,
    summarize_ops,
    thread_cpu,
)

from lineagestore import PROVIDER_CLASS  # noqa: E402

RDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
LINEAGE = PROVIDER_CLASS

# name -> (provider class, checkpoint format version, extra SQL confs)
PROVIDERS: dict[str, tuple[str, int, dict[str, str]]] = {
    "lineagestore": (LINEAGE, 2, {}),
    "rocksdb_v2": (RDB, 2, {"spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}),
    "rocksdb_v1": (RDB, 1, {"spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}),
    "hdfs": (HDFS, 1, {}),
}
LOCAL_DIR_KEY = "spark.sql.streaming.stateStore.lineagestore.localDir"
# How long a batch may take before the cell fails as hung: a load batch writes every key (10 GiB at 10M keys of
# 1 KiB, which took 11 minutes on s3a:// beside the busy mode's load), every other batch a fraction of them.
LOAD_BATCH_TIMEOUT_S = 3600
BATCH_TIMEOUT_S = 600


class Runner:
    def __init__(self, spec: dict[str, Any]):
        self.spec = spec
        self.work = Path(spec["work_dir"])
        self.input_root = self.work / "input"
        self.sizes = workloads.Sizes(**spec["sizes"])
        self.workload = spec["workload"]
        self.provider = spec["provider"]
        self.store = spec["store"]
        self.checkpoint = spec["checkpoint_uri"]
        self.spark = None
        self.counters: LocalCounters | S3Counters | None = None
        self.query = None
        self.next_batch_id = 0
        self.batch_no = 0
        self.cpu_mark = 0.0  # the JVM's CPU seconds at the end of the previous batch
        self.server_pid = spec.get("server_pid")  # the S3 server's process (local-process backend), if any
        self.server_cpu_mark = 0.0
        self.machine_mark: dict[str, float] = {}
        self.result: dict[str, Any] = {
            "provider": self.provider,
            "workload": self.workload,
            "store": self.store,
            "round": spec["round"],
            "batches": [],
            "status": "running",
        }

    # ------------------------------------------------------------------------------------ session
    def start_session(self) -> None:
        """Starts the JVM and SparkSession with the settings common to every provider."""
        from pyspark.sql import SparkSession

        s = self.spec
        # A System.gc() (Spark's periodic GC, which lets its ContextCleaner delete finished batches' shuffle
        # files: --context-conf spark.cleaner.periodicGC.interval) runs as a concurrent cycle, not a full pause
        java_opts = (
            f"-Dlog4j2.configurationFile=file:{s['log4j_conf']} -Dlsbench.log={s['log_path']} "
            "-XX:+ExplicitGCInvokesConcurrent"
        )
        builder = (
            SparkSession.builder.master(f"local[{s['cores']}]")
            .appName("lsbench")
            .config("spark.driver.memory", s["driver_memory"])
            .config("spark.driver.extraJavaOptions", java_opts)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.local.dir", s["spark_local_dir"])
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.shuffle.partitions", str(s["partitions"]))
            .config("spark.default.parallelism", str(s["partitions"]))
            .config("spark.sql.streaming.noDataMicroBatches.enabled", "false")
        )
        for key, value in s.get("context_confs", {}).items():
            builder = builder.config(key, value)
        jars = [s["lineagestore_jar"], *s.get("extra_jars", [])]
        builder = builder.config("spark.jars", ",".join(jars))
        # transformWithState on lineagestore (the tws workload); leaves every other plan as it is
        builder = builder.config("spark.sql.extensions", "io.lineagestore.spark.LineageSessionExtensions")
        # the counting filesystem's classes and async-profiler's Java API (--profiler cpu)
        class_path = [
            p
            for p in (s["counting_classes"] if self.store == "local" else "", s.get("profiler_jar", ""))
            if p
        ]
        if class_path:
            builder = builder.config("spark.driver.extraClassPath", os.pathsep.join(class_path))
        if self.store == "local":
            builder = builder.config(
                "spark.hadoop.fs.lsbench.impl", "io.lineagestore.bench.CountingFileSystem"
            ).config(
                "spark.hadoop.fs.AbstractFileSystem.lsbench.impl",
                "io.lineagestore.bench.CountingFileSystem$Fs",
            )
        self.spark = builder.getOrCreate()
        self.jvm_pid = int(self.spark._jvm.java.lang.ProcessHandle.current().pid())

    def use(self, spark, jvm_pid: int) -> None:
        """Sets this cell's provider (SQL confs are read when a query starts) and store."""
        self.spark, self.jvm_pid = spark, jvm_pid
        s = self.spec
        cls, fmt, extra = PROVIDERS[self.provider]
        conf = spark.conf
        conf.set("spark.sql.streaming.stateStore.providerClass", cls)
        conf.set("spark.sql.streaming.stateStore.checkpointFormatVersion", str(fmt))
        conf.set("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "false")
        conf.set(LOCAL_DIR_KEY, str(self.work / "local-warm"))
        for k, v in {**extra, **s["confs"]}.items():
            conf.set(k, v)
        hadoop = spark.sparkContext._jsc.hadoopConfiguration()
        for k, v in {**s.get("hadoop_conf", {}), **s["confs"]}.items():
            hadoop.set(k, v)
        if self.store == "s3":  # credentials come from the environment only (run.py), never from the spec
            prefix = f"fs.s3a.bucket.{s['bucket']}."
            hadoop.set(prefix + "access.key", os.environ["LSBENCH_S3_ACCESS_KEY"])
            hadoop.set(prefix + "secret.key", os.environ["LSBENCH_S3_SECRET_KEY"])
            self.counters = S3Counters(spark, s["bucket"])
        else:
            self.counters = LocalCounters(spark)
        self.result["jvm_pid"] = jvm_pid
        self.result["shared_jvm"] = bool(s.get("shared_jvm"))

    def unload_all(self) -> None:
        """Close every loaded state store provider in this JVM (as an executor restart would)."""
        jvm = self.spark._jvm
        module = getattr(jvm.org.apache.spark.sql.execution.streaming.state, "StateStore$")
        getattr(module, "MODULE$").unloadAll()

    # -------------------------------------------------------------------------------------- query
    def start_query(self):
        for source in workloads.sources(self.workload):
            (self.input_root / source).mkdir(parents=True, exist_ok=True)
        df, mode = workloads.build_query(self.spark, self.workload, self.sizes, self.input_root)
        return (
            df.writeStream.outputMode(mode)
            .format("noop")
            .option("checkpointLocation", self.checkpoint)
            .queryName(f"lsbench_{self.workload}")
            .trigger(processingTime="0 seconds")
            .start()
        )

    def wait_batch(self, batch_id: int, kind: str) -> dict[str, Any]:
        timeout_s = LOAD_BATCH_TIMEOUT_S if kind == "load" else BATCH_TIMEOUT_S
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            p = self.query.lastProgress
            if p is not None and p["batchId"] >= batch_id and "addBatch" in p["durationMs"]:
                return json.loads(p.json) if hasattr(p, "json") else dict(p)
            if not self.query.isActive:
                exc = self.query.exception()
                raise RuntimeError(f"query stopped: {exc}")
            time.sleep(0.01)
        raise TimeoutError(f"{kind} batch {batch_id} did not finish within {timeout_s}s")

    def run_batch(self, kind: str) -> tuple[dict[str, Any], dict[str, int]]:
        """Writes the next input batch, waits for its micro-batch, returns its record."""
        rows = workloads.write_batch(
            self.workload, self.sizes, self.batch_no, kind, self.input_root, self.spec["seed"]
        )
        before = self.counters.raw()
        t0 = time.monotonic()
        p = self.wait_batch(self.next_batch_id, kind)
        wall = (time.monotonic() - t0) * 1000
        d = diff(self.counters.raw(), before)
        rec = progress_record(p)
        rec.update(kind=kind, input_rows=rows, wall_ms=round(wall, 1), io=self._io(d))
        rec["rss"] = proc_status(self.jvm_pid).get("VmRSS", 0)
        # from the end of the previous batch: what maintenance did between batches is charged to this one
        cpu = proc_cpu_seconds(self.jvm_pid)
        rec["cpu_s"] = round(cpu - self.cpu_mark, 3)
        self.cpu_mark = cpu
        machine = machine_cpu_seconds()
        rec["machine_cpu_s"] = {k: round(v - self.machine_mark.get(k, 0.0), 3) for k, v in machine.items()}
        self.machine_mark = machine
        if self.server_pid:  # the S3 server's, over the same span (it serves this cell alone)
            server = proc_cpu_seconds(self.server_pid)
            rec["server_cpu_s"] = round(server - self.server_cpu_mark, 3)
            self.server_cpu_mark = server
        self.next_batch_id = p["batchId"] + 1
        self.batch_no += 1
        return rec, d

    def raw_get(self, restored_bytes: int) -> dict[str, Any]:
        """The server's parallel-GET throughput for as many bytes of this checkpoint's state as the cold
        restore read (see measure.raw_get_throughput)."""
        import boto3

        s = self.spec
        hadoop = s.get("hadoop_conf", {})
        endpoint = hadoop.get(f"fs.s3a.bucket.{s['bucket']}.endpoint") or hadoop.get("fs.s3a.endpoint")
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name=hadoop.get(f"fs.s3a.bucket.{s['bucket']}.endpoint.region", "us-east-1"),
            aws_access_key_id=os.environ["LSBENCH_S3_ACCESS_KEY"],
            aws_secret_access_key=os.environ["LSBENCH_S3_SECRET_KEY"],
        )
        prefix = self.checkpoint.split(f"s3a://{s['bucket']}/", 1)[1].rstrip("/") + "/state/"
        return raw_get_throughput(client, s["bucket"], prefix, restored_bytes, threads=s["raw_get_threads"])

    def start_profile(self, path: str, profiler: str = "jfr"):
        """A profile of the driver JVM, which runs the tasks in local mode, to be written to ``path`` by
        ``stop_profile``; None when ``path`` is empty (no --profile-restore / --profile-commits). ``profiler``
        "cpu": async-profiler's CPU samples of every thread, as collapsed stacks (``--profiler cpu``,
        cpu_profile.py); "jfr": a JFR recording (settings "profile": 10 ms Java samples)."""
        if not path:
            return None
        if profiler == "cpu":
            import cpu_profile

            async_profiler = self.spark._jvm.one.profiler.AsyncProfiler.getInstance(self.spec["profiler_lib"])
            async_profiler.execute(cpu_profile.start_command())
            return async_profiler
        jfr = self.spark._jvm.jdk.jfr
        recording = jfr.Recording(jfr.Configuration.getConfiguration("profile"))
        recording.start()
        return recording

    def stop_profile(self, recording, path: str, profiler: str = "jfr") -> None:
        if recording is None:
            return
        if profiler == "cpu":
            import cpu_profile

            recording.execute(cpu_profile.stop_command(path))
        else:
            recording.stop()
            recording.dump(self.spark._jvm.java.io.File(path).toPath())
            recording.close()

    def _count_vectored_reads(self, rec: dict[str, Any]) -> None:
        """s3a's default (analytics) input stream does not count the bytes of vectored reads, by which
        lineagestore downloads large files in ranges; where the provider's own count of bytes downloaded is
        larger than s3a's count, it stands in (s3a's is kept as ``get_bytes_counted_by_s3a``)."""
        if self.store != "s3":
            return
        io = rec["io"]["all"]
        reported = rec.get("custom", {}).get("lineagestoreBytesDownloaded", 0)
        if reported > io["get_bytes"]:
            io["get_bytes_counted_by_s3a"] = io["get_bytes"]
            io["get_bytes"] = reported

    def _io(self, d: dict[str, int]) -> dict[str, dict[str, int]]:
        return {area: summarize_ops(d, area) for area in self.counters.areas}

    # --------------------------------------------------------------------------------------- run
    def run(self) -> dict[str, Any]:
        s = self.spec
        r = self.result
        r["versions"] = {
            "spark": self.spark.version,
            "java": self.spark._jvm.java.lang.System.getProperty("java.version"),
        }
        self.query = self.start_query()
        self.cpu_mark = proc_cpu_seconds(self.jvm_pid)
        self.server_cpu_mark = proc_cpu_seconds(self.server_pid) if self.server_pid else 0.0
        self.machine_mark = machine_cpu_seconds()
        t_start = time.time() * 1000
        steady_raw_before = None
        threads_before: dict[str, float] = {}
        steady_recording = None
        for i in range(1 + s["batches"]):
            kind = "load" if i == 0 else "steady"
            rec, _ = self.run_batch(kind)
            r["batches"].append(rec)
            if i == s["warmup"]:  # the steady window starts after the load batch and the warm-up batches
                steady_raw_before = self.counters.raw()
                threads_before = thread_cpu(self.jvm_pid)
                steady_recording = self.start_profile(s["steady_profile_path"], s["steady_profiler"])
                t_steady = time.time() * 1000
            if s.get("verbose"):
                print(
                    f"  batch {rec['batchId']} {kind} {rec['durationMs'].get('triggerExecution')} ms",
                    flush=True,
                )
        if steady_raw_before is None:
            steady_raw_before = self.counters.raw()
            t_steady = time.time() * 1000
        steady_end = self.counters.raw()
        steady = diff(steady_end, steady_raw_before)
        threads = thread_cpu(self.jvm_pid)
        self.stop_profile(steady_recording, s["steady_profile_path"], s["steady_profiler"])
        cpu_by_thread = {g: round(v - threads_before.get(g, 0.0), 3) for g, v in threads.items()}
        # idle window: the query keeps running without input; only maintenance does anything
        time.sleep(s["idle_s"])
        idle = diff(self.counters.raw(), steady_end)
        t_idle_end = time.time() * 1000
        areas = self.counters.areas
        r["steady"] = {
            "batches": s["batches"] - s["warmup"],
            "io": self._io(steady),
            "put_bytes_by_kind": {a: by_kind(steady, "bytes", "PUT", a) for a in areas},
            "put_count_by_kind": {a: by_kind(steady, "count", "PUT", a) for a in areas},
            "list_by_kind": {a: by_kind(steady, "count", "LIST", a) for a in areas},
            "delete_by_kind": {a: by_kind(steady, "count", "DELETE", a) for a in areas},
            "raw": steady if self.store == "s3" else {},
            "cpu_by_thread": {g: v for g, v in cpu_by_thread.items() if v >= 0.01},
        }
        r["idle"] = {"seconds": s["idle_s"], "io": self._io(idle), "raw": idle if self.store == "s3" else {}}
        r["footprint"] = footprint(self.spark, self.checkpoint.rstrip("/") + "/state")
        r["log"] = parse_log(Path(s["log_path"]), t_steady, t_idle_end)
        r["log_all"] = parse_log(Path(s["log_path"]), t_start, t_idle_end)
        self.query.stop()
        self.query = None
        self.unload_all()
        r["restore"] = {}
        for phase in ("warm", "cold") if s.get("restores", 1) else ():
            if phase == "cold":
                self.spark.conf.set(LOCAL_DIR_KEY, str(self.work / "local-cold"))
            recording = self.start_profile(s.get("jfr_path", "")) if phase == "cold" else None
            before = self.counters.raw()
            t0 = time.monotonic()
            self.query = self.start_query()
            rec, _ = self.run_batch("restore")
            restart_ms = (time.monotonic() - t0) * 1000
            self.stop_profile(recording, s.get("jfr_path", ""))
            d = diff(self.counters.raw(), before)
            rec.update(restart_ms=round(restart_ms, 1), io=self._io(d))
            self._count_vectored_reads(rec)
            r["restore"][phase] = rec
            self.query.stop()
            self.query = None
            self.unload_all()
            if phase == "cold" and self.store == "s3" and s.get("raw_get_threads"):
                # after the stop: no maintenance deletes what is being read
                rec["raw_get"] = self.raw_get(rec["io"]["all"]["get_bytes"])
        r["memory"] = {} if s.get("shared_jvm") else proc_status(self.jvm_pid)
        r["local_dirs"] = {name: _du(self.work / name) for name in ("local-warm", "local-cold")}
        r["status"] = "ok"
        return r


def _du(path: Path) -> int:
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(d, f)).st_size
            except OSError:
                pass
    return total


def _short_error(exc: BaseException) -> str:
    text = getattr(exc, "_desc", None) or str(exc)
    text = text.split("\n\nJVM stacktrace:")[0].split("=== Streaming Query ===")[0]
    return f"{type(exc).__name__}: {text.strip()[:1500]}"


UNSUPPORTED = ("STORE_BACKEND_NOT_SUPPORTED_FOR_TWS", "STATE_STORE_PROVIDER_DOES_NOT_SUPPORT")


def run_cell(runner: Runner) -> bool:
    """Runs one cell in the current session; writes its result file; False if it failed."""
    ok = True
    try:
        runner.run()
    except BaseException as exc:  # recorded in the result; the run goes on with the next cell
        msg = _short_error(exc)
        runner.result["error"] = msg
        runner.result["status"] = "unsupported" if any(u in msg for u in UNSUPPORTED) else "failed"
        if runner.result["status"] == "failed":
            runner.result["traceback"] = traceback.format_exc()[-4000:]
            ok = False
        if isinstance(exc, KeyboardInterrupt):
            raise
    finally:
        if runner.query is not None:
            try:
                runner.query.stop()
            except Exception:
                pass
            runner.query = None
        if runner.spark is not None:
            try:
                runner.unload_all()
            except Exception:
                pass
        Path(runner.spec["result_path"]).write_text(json.dumps(runner.result, indent=1, sort_keys=True))
    return ok


def main(argv: list[str]) -> int:
    """``cell.py SPEC.json [SPEC.json ...]``: the cells run one after the other in one JVM."""
    specs = [json.loads(Path(a).read_text()) for a in argv[1:]]
    first = Runner(specs[0])
    failed = 0
    try:
        first.start_session()
    except BaseException as exc:
        for spec in specs:
            r = Runner(spec)
            r.result.update(status="failed", error=f"session start: {_short_error(exc)}")
            Path(spec["result_path"]).write_text(json.dumps(r.result, indent=1, sort_keys=True))
        return 1
    spark, pid = first.spark, first.jvm_pid
    try:
        for spec in specs:
            runner = first if spec is specs[0] else Runner(spec)
            runner.use(spark, pid)
            failed += not run_cell(runner)
            print(f"cell {spec['workload']} {spec['provider']}: {runner.result['status']}", flush=True)
    finally:
        spark.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

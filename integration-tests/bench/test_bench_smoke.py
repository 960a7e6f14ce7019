"""Keeps the benchmark harness working: the small preset, 2 providers x 2 workloads (agg, and tws:
transformWithState, on lineagestore through its session extension) x 3 batches, one JVM.

Not a timed test: it asserts that the run finishes and that results.json / summary.json / results.md have
the fields the report and docs/benchmarks.md rely on, never what the figures are.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import report  # noqa: E402
import run  # noqa: E402


def _jar_or_skip() -> None:
    try:
        run.find_jar()
    except SystemExit as exc:
        pytest.skip(str(exc))


def _run_smoke(script: str, out: Path, work: Path) -> None:
    """Runs a bench script's ``--smoke`` into ``out``; fails with the end of its output if it fails."""
    cmd = [sys.executable, str(HERE / script), "--smoke", "--out", str(out), "--work-dir", str(work)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{script} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"


@pytest.mark.skipif(shutil.which("javac") is None, reason="the counting filesystem is compiled with javac")
def test_small_preset_two_providers_two_workloads(tmp_path):
    _jar_or_skip()
    out = tmp_path / "out"
    plots = importlib.util.find_spec("matplotlib") is not None
    cmd = [
        sys.executable,
        str(HERE / "run.py"),
        "--preset",
        "small",
        "--providers",
        "lineagestore,rocksdb_v2",
        "--workloads",
        "agg,tws",
        "--batches",
        "3",
        "--jvm",
        "shared",
        "--work-dir",
        str(tmp_path / "work"),
        "--out",
        str(out),
        "--profile-restore",
        *([] if plots else ["--no-plots"]),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"run.py failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"

    data = json.loads((out / "results.json").read_text())
    meta = data["meta"]
    for key in ("machine", "versions", "settings", "spark_confs", "providers", "workloads", "baseline"):
        assert key in meta, key
    assert {"nproc", "memory_bytes", "cpu"} <= set(meta["machine"])
    assert {"pyspark", "jar_sha256", "java"} <= set(meta["versions"])
    assert meta["settings"]["batches"] == 3

    by_workload = {(c["workload"], c["provider"]): c for c in data["cells"]}
    assert set(by_workload) == {(w, p) for w in ("agg", "tws") for p in ("lineagestore", "rocksdb_v2")}
    cells = {p: c for (w, p), c in by_workload.items() if w == "agg"}
    for name, cell in by_workload.items():
        assert cell["status"] == "ok", (name, cell.get("error"))
        assert len(cell["batches"]) == 1 + 3  # the load batch and 3 batches
        for b in cell["batches"]:
            assert "triggerExecution" in b["durationMs"]
            assert {"commitTimeMs", "numRowsTotal", "memoryUsedBytes"} <= set(b["state"])
            assert {"PUT", "GET", "LIST", "DELETE", "RENAME", "put_bytes"} <= set(b["io"]["state"])
        assert cell["batches"][-1]["state"]["numRowsTotal"] > 0
        assert cell["footprint"]["bytes"] > 0
        assert {"warm", "cold"} == set(cell["restore"])
        for phase in ("warm", "cold"):
            assert "get_bytes" in cell["restore"][phase]["io"]["state"]
    assert any(k.startswith("lineagestore") for k in cells["lineagestore"]["batches"][-1]["custom"])
    assert any(k.startswith("rocksdb") for k in cells["rocksdb_v2"]["batches"][-1]["custom"])

    summary = json.loads((out / "summary.json").read_text())
    agg = summary["workloads"]["agg"]
    for name in ("lineagestore", "rocksdb_v2"):
        figures = agg["providers"][name]["figures"]
        assert set(report.FIGURES) <= set(figures), set(report.FIGURES) - set(figures)
        assert "ratios" in agg["providers"][name]
    assert agg["providers"]["rocksdb_v2"]["ratios"]["batch_p50_ms"] == pytest.approx(1.0)
    # transformWithState runs on lineagestore (its session extension) and has ratios like the others
    assert "ratios" in summary["workloads"]["tws"]["providers"]["lineagestore"]
    assert [t["figure"] for t in agg["targets"]] == [t[0] for t in report.TARGETS]
    md = (out / "results.md").read_text()
    assert "| target |" in md and "rocksdb_v2" in md
    if plots:
        assert summary["plots"] and all((out / p).is_file() for p in summary["plots"])

    # --profile-restore: one JFR recording per cell, of its cold restore, which jfr_profile.py reads
    recordings = sorted(out.glob("*.cold-restore.jfr"))
    assert [r.name for r in recordings] == [
        "r0-agg-lineagestore.cold-restore.jfr",
        "r0-agg-rocksdb_v2.cold-restore.jfr",
        "r0-tws-lineagestore.cold-restore.jfr",
        "r0-tws-rocksdb_v2.cold-restore.jfr",
    ]
    if shutil.which("jfr"):
        import jfr_profile

        text = jfr_profile.summarize(str(recordings[0]))
        assert "CPU samples of Java code" in text and "slow JIT compilations" in text


# The long run only: scale.py runs run.py (the small preset's test above) once per mode and adds its report.
@pytest.mark.long_run
@pytest.mark.skipif(shutil.which("javac") is None, reason="the counting filesystem is compiled with javac")
def test_scale_runs_idle_and_busy_and_reports_the_targets(tmp_path):
    """scale.py end to end at a tiny size: one run per mode (busy beside one CPU-bound process), each with its
    CPU figures and CPU by thread group, then scale.md with the scale preset's four targets per mode."""
    _jar_or_skip()
    out = tmp_path / "scale"
    cmd = [
        sys.executable,
        str(HERE / "scale.py"),
        "--out",
        str(out),
        "--sizes",
        "1m-100k-100b",
        "--busy",
        "1",
        "--batches",
        "3",
        "--",
        "--keys",
        "2000",
        "--warmup",
        "1",
        "--idle-s",
        "1",  # the preset's idle window (5 s) measures nothing at this size
        "--jvm",
        "shared",
        "--no-plots",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"scale.py failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    rows = json.loads((out / "scale.json").read_text())
    assert [(r["size"], r["mode"]) for r in rows] == [("1m-100k-100b", "idle"), ("1m-100k-100b", "busy")]
    for r in rows:
        assert [t["figure"] for t in r["targets"]] == [t[0] for t in report.PRESET_TARGETS["scale"]]
        for provider in ("lineagestore", "rocksdb_v2"):
            figures = r["figures"][provider]
            assert figures["cpu_s_per_batch"] > 0 and figures["cpu_us_per_row"] > 0
            assert figures["commit_p99_ms"] is not None
            assert figures["cpu_by_thread"], provider
    busy = json.loads((out / "1m-100k-100b-busy" / "results.json").read_text())
    assert busy["meta"]["busy"] == 1 and busy["meta"]["settings"]["value_bytes"] == 100
    assert "| 1m-100k-100b | busy |" in (out / "scale.md").read_text()


def test_cell_order_interleaves_and_rotates():
    order = run.cell_order(2, ["agg"], ["a", "b", "c"])
    assert [p for _, _, p in order] == ["a", "b", "c", "b", "c", "a"]


@pytest.mark.skipif(shutil.which("go") is None, reason="the stream limit proxy is built with Go")
def test_stream_limit_passes_every_byte_and_holds_a_connection_to_its_rate():
    """The proxy behind --s3-stream-limit: bytes arrive unchanged, in order, counted, and no faster than the limit,
    also on a connection that was idle first (a pooled keep-alive connection earns no credit). The lower
    bound is the proxy's own pacing, so it cannot be flaky; no upper bound is asserted."""
    import os
    import socket
    import threading
    import time

    import stream_limit

    payload = os.urandom(3_000_000)
    server = socket.create_server(("127.0.0.1", 0))

    def serve():
        conn, _ = server.accept()
        with conn:
            request = conn.recv(16)
            conn.sendall(request + payload)

    threading.Thread(target=serve, daemon=True).start()
    limit = stream_limit.StreamLimit(f"http://127.0.0.1:{server.getsockname()[1]}", 2_000_000).start()
    try:
        host, port = limit.endpoint.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as client:
            time.sleep(1.0)  # idle: worth 2 MB at the rate, were idle time credited
            t0 = time.monotonic()
            client.sendall(b"hello")
            got = bytearray()
            while chunk := client.recv(1 << 16):
                got += chunk
        elapsed = time.monotonic() - t0
        served = limit.served_bytes()  # what recovery_bench.py reads as the bytes clients downloaded
    finally:
        limit.stop()
        server.close()
    assert bytes(got) == b"hello" + payload
    assert served == len(got), served
    # 3 MB at 2 MB/s: the proxy paces the last byte no earlier than ~1.5 s after the first
    assert elapsed >= 1.4, elapsed


@pytest.mark.skipif(shutil.which("javac") is None, reason="the counting filesystem is compiled with javac")
def test_repartition_bench_smoke(tmp_path):
    """repartition_bench.py --smoke: the aggregation state built by both providers, Spark's repartition
    against lineagestore's (both of its paths) and a migration, 2000 keys on the counting local filesystem. The script itself fails when a repartition
    loses or duplicates a key; here only the shape of its results is checked, never the figures."""
    _jar_or_skip()
    out = tmp_path / "repartition.json"
    _run_smoke("repartition_bench.py", out, tmp_path / "work")
    data = json.loads(out.read_text())
    assert [(c["workload"], c["to"]) for c in data["cases"]] == [("agg", 3)]
    for case in data["cases"]:
        for tool in ("spark", "lineagestore", "lineagestore_general"):
            figures = case[tool]
            assert figures["wall_s"] > 0 and figures["bytes_read"] > 0 and figures["bytes_written"] > 0
            assert figures["requests"]["PUT"] > 0
        assert case["ratio"] > 0
        assert {"loadOld", "readPlacePut", "commit", "uploadSnapshot"} <= set(
            case["lineagestore"]["phasesMs"]
        )
    assert [m["workload"] for m in data["migrations"]] == ["agg"]


# The long run only (40-100 s): the real-time path itself is RealTimeModeSuite's, in every run (sbt).
@pytest.mark.long_run
@pytest.mark.skipif(
    shutil.which("javac") is None, reason="the bench's source and sink are compiled with javac"
)
def test_realtime_bench_smoke(tmp_path):
    """realtime_bench.py --smoke: an aggregation in real-time mode on both providers, 2 s of records measured.
    Only the report's shape and that every measured record reached the sink are checked, never the figures."""
    _jar_or_skip()
    out = tmp_path / "out"
    _run_smoke("realtime_bench.py", out, tmp_path / "work")
    summary = json.loads((out / "summary.json").read_text())
    per = summary["workloads"]["aggregation"]
    for provider in ("lineagestore", "builtin"):
        f = per[provider]
        assert f["rounds"] == 1
        assert f["rows_per_round"] == f["created_per_round"] and f["created_per_round"][0] > 0, f
        assert 0 < f["p50_ms"] <= f["p99_ms"], f
        assert (
            f["batches"] >= 1 and f["commit_p50_ms"] is not None and f["commit_p95_ms"] >= f["commit_p50_ms"]
        )
        assert f["first_batch_ms"] > 0
    assert set(per["ratio"]) == {"p50_ms", "p99_ms", "commit_p50_ms", "commit_p95_ms"}
    assert {"loadavg_start", "loadavg_end", "machine", "versions"} <= set(summary["meta"])
    assert "| aggregation | lineagestore |" in (out / "summary.md").read_text()


def test_busy_load_ends_with_the_process_that_started_it():
    """A benchmark killed mid-run (no ``__exit__``) leaves no spinner behind to load the runs after it."""
    starter = (
        f"import sys; sys.path.insert(0, {str(HERE)!r}); import os, busy\n"
        "load = busy.CpuLoad(1).__enter__()\n"
        "print(load._procs[0].pid, flush=True)\n"
        "os._exit(0)\n"
    )
    out = subprocess.run([sys.executable, "-c", starter], capture_output=True, text=True, check=True)
    pid = int(out.stdout.strip())
    import os
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, 9)
    pytest.fail(f"spinner {pid} outlived the process that started it")


def test_cpu_profile_splits_the_store_from_the_rest_of_the_query(tmp_path):
    """cpu_profile.py on collapsed stacks as async-profiler writes them (lines shaped like a real profile of
    both providers): task-thread stacks through store code (ours, RocksDB's JNI and library, Spark's RocksDB
    provider) are the store's, Spark's state-package operator code (StateStoreRDD) is not, other threads do
    not count; then per batch: the task threads from those samples, RocksDB's and our threads (their /proc
    CPU) wholly the store's, GC and JIT apart, /proc's task-thread figure unused."""
    import cpu_profile

    task = "[Executor task launch worker for task 1.0 in stage 7.0 (TID 30) tid=101]"
    idle_task = "[Executor task idle worker#97 tid=102]"
    rdd = "org/apache/spark/sql/execution/streaming/state/StateStoreRDD.compute"
    lines = [
        f"{task};java/lang/Thread.run;{rdd};org/apache/spark/sql/execution/streaming/state/"
        "RocksDBStateStoreProvider$RocksDBStateStore.put;Java_org_rocksdb_RocksDB_put__JJ_3BII_3BII;"
        "rocksdb::MemTable::Add 20",
        f"{idle_task};java/lang/Thread.run;{rdd};io/lineagestore/spark/LineageStateStore.put 5",
        f"{task};java/lang/Thread.run;{rdd};__GI_write;rocksdb::BlockFetcher::ReadBlock 5",
        f"{task};java/lang/Thread.run;{rdd};org/apache/spark/sql/catalyst/expressions/UnsafeRow.copy 70",
        "[rocksdb:high tid=201];start_thread;rocksdb::FlushJob::Run 15",
        "[stream execution thread for lsbench_agg [id = 1, runId = 2] tid=205];io/lineagestore/x.y 10",
    ]
    path = tmp_path / "p.collapsed"
    path.write_text("\n".join(lines) + "\n")
    assert cpu_profile.task_samples(str(path)) == (100, 30)

    proc = {
        "Executor task i": 8.0,
        "Executor task l": 2.0,
        "rocksdb:high": 1.0,
        "lineagestore-ap": 1.0,
        "state-store-mai": 0.5,
        "GC Thread": 0.4,
        "G1 Conc": 0.2,
        "C2 CompilerThre": 0.6,
        "stream executio": 0.3,
    }
    # the task threads from the samples (100 samples of 10 ms over 2 batches), not from /proc
    got = cpu_profile.split(proc, batches=2, task=(100, 30))
    want = {
        "task threads, in the store": 0.15,
        "task threads, the query": 0.35,
        "store threads": 1.25,
        "GC": 0.3,
        "JIT": 0.3,
        "other threads": 0.15,
        "the store": 1.4,
        "all": 2.5,
    }
    assert {k: round(got[k], 3) for k in want} == want


def test_thread_dumps_parse_and_where():
    """thread_dumps.py reads jstack's format: each thread's name, state and frames, and names a waiting thread
    by the frames of ours below its top (an excerpt of a dump from a recovery run, owner lines included)."""
    import thread_dumps

    dump = "\n".join(
        [
            "# t=12.000 pid=1",
            '"Executor task launch worker for task 5.0 in stage 29.0 (TID 105)" #40 daemon prio=5 os_prio=0 '
            "cpu=33236.69ms elapsed=431.42s tid=0x1 nid=0x243 waiting on condition  [0x2]",
            "   java.lang.Thread.State: WAITING (parking)",
            "\tat jdk.internal.misc.Unsafe.park(java.base@17.0.15/Native Method)",
            "\t- parking to wait for  <0x3> (a java.util.concurrent.CountDownLatch$Sync)",
            "\tat java.util.concurrent.CountDownLatch.await(java.base@17.0.15/CountDownLatch.java:230)",
            "\tat io.lineagestore.store.PoolTasks$.runAll(PoolTasks.scala:37)",
            "\tat io.lineagestore.store.CheckpointFiles.restoreSnapshot(CheckpointFiles.scala:230)",
            "",
            '"lineagestore-transfer-1" #83 daemon prio=5 os_prio=0 cpu=1ms elapsed=1s tid=0x4 nid=0x745 runnable',
            "   java.lang.Thread.State: RUNNABLE",
            "\tat java.util.zip.CRC32C.update(java.base@17.0.15/CRC32C.java:192)",
            "",
        ]
    )
    threads = thread_dumps.parse(dump)
    assert [(name.split(" (")[0], state, len(frames)) for name, state, frames in threads] == [
        ("Executor task launch worker for task 5.0 in stage 29.0", "WAITING", 4),
        ("lineagestore-transfer-1", "RUNNABLE", 1),
    ]
    task_frames = threads[0][2]
    assert thread_dumps.where(task_frames, ("io.lineagestore",), depth=1) == (
        "jdk.internal.misc.Unsafe.park < io.lineagestore.store.PoolTasks$.runAll"
    )

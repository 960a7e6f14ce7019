"""Where a benchmark's CPU went, per thread, Java and native alike: async-profiler's CPU sampling.

    python integration-tests/bench/run.py ... --profile-commits --profiler cpu --out OUT
    python integration-tests/bench/cpu_profile.py OUT/1m-100k-1k-idle       # a run.py output directory

JFR (``--profiler jfr``) samples threads running Java code only, and one thread in native code per 20 ms
among all of them, most idle: it cannot say how much of a task thread's CPU went into RocksDB's JNI calls,
nor see RocksDB's own threads. async-profiler (``tools.profiler:async-profiler`` from Maven Central, fetched
once into ``~/.cache/lineagestore-bench``, its checksum checked) samples every thread of the JVM by CPU time
(Linux perf events, one sample per 10 ms of a thread's CPU), through Java, JNI and native frames. ``run.py``
loads it into the cell's JVM through its Java API and records the steady window of each cell as collapsed
stacks (``OUT/r0-agg-<provider>.steady.collapsed``, one line per distinct stack with its sample count).

This script splits each provider's CPU per steady batch into **the state store's work** (RocksDB's own
threads, our threads, Spark's maintenance: ``STORE_THREADS``; and the share of the task threads' samples
whose stack passes through store code: ``STORE_FRAMES``) and **the rest of the query**: what a batch of that
provider would cost with a store that cost nothing, so how low any store could bring the batch where the
cores are saturated (the batch p50 target). The other threads' CPU comes from ``results.json`` (``/proc``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import urllib.request
import zipfile
from pathlib import Path

VERSION = "4.6"
JAR_URL = (
    f"https://repo1.maven.org/maven2/tools/profiler/async-profiler/{VERSION}/async-profiler-{VERSION}.jar"
)
INTERVAL_S = 0.010  # the sampling interval start_command asks for

# A stack is the store's work when one of its frames is: our code; RocksDB's Java API and native library;
# Spark's RocksDB provider with its changelog writer/reader and its row encoders (Spark's other state-package
# classes, e.g. the aggregation's StreamingAggregationStateManager, belong to the operator, called alike
# whatever the provider); Spark's in-memory provider.
STORE_FRAMES = re.compile(
    r"^(io/lineagestore/|org/rocksdb/|Java_org_rocksdb_|rocksdb::|"
    r"org/apache/spark/sql/execution/streaming/state/(RocksDB|StateStoreChangelog|HDFSBacked|\w*StateEncoder|"
    r"\w*DataEncoder))"
)
# Thread groups (as /proc names them: 15 characters) that are the store's alone: RocksDB's native threads,
# our pools, Spark's maintenance and its changelog checksum writers. The JVM's own threads (GC, JIT) serve
# the whole query and are reported apart, unsplit.
STORE_THREADS = ("rocksdb:", "lineagestore-", "state-store-mai", "ChecksumCheckpo")
JVM_THREADS = {"GC": ("GC Thread", "G1 "), "JIT": ("C1 CompilerThre", "C2 CompilerThre")}
# Spark names a task thread "Executor task launch worker for task ..." while it runs a task and "Executor
# task idle worker" between tasks
TASK_THREAD = "Executor task"


def library(cache: Path | None = None) -> tuple[Path, Path]:
    """The async-profiler jar (for its Java API) and its linux-x64 native library, fetched once."""
    cache = cache or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lineagestore-bench"
    jar = cache / f"async-profiler-{VERSION}.jar"
    lib = cache / f"async-profiler-{VERSION}-linux-x64.so"
    if not lib.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(JAR_URL, timeout=120) as r:
            body = r.read()
        with urllib.request.urlopen(JAR_URL + ".sha1", timeout=60) as r:
            expected = r.read().decode().split()[0]
        if hashlib.sha1(body).hexdigest() != expected:
            raise RuntimeError(f"{JAR_URL}: SHA-1 does not match Maven Central's {expected}; not used")
        jar.write_bytes(body)
        with zipfile.ZipFile(jar) as z:
            lib.write_bytes(z.read("linux-x64/libasyncProfiler.so"))
    return jar, lib


def start_command() -> str:
    """What the cell's JVM runs to start sampling: every thread, by CPU time, one sample per 10 ms."""
    return f"start,event=cpu,interval={int(INTERVAL_S * 1000)}ms,threads"


def stop_command(path: str) -> str:
    return f"stop,file={path},collapsed,threads"


def task_samples(path: str) -> tuple[int, int]:
    """The task threads' samples of a collapsed profile: (all, those whose stack passes through store code)."""
    every = in_store = 0
    for line in Path(path).read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        if not frames[0].startswith("[" + TASK_THREAD):
            continue
        every += int(n)
        if any(STORE_FRAMES.match(f) for f in frames[1:]):
            in_store += int(n)
    return every, in_store


def split(cpu_by_thread: dict[str, float], batches: int, task: tuple[int, int]) -> dict[str, float]:
    """CPU seconds per batch of one provider: the store's (its threads, and its task threads' samples in
    store code), the task threads' rest (the query), GC, JIT and the other threads. The task threads come
    from the samples (``task``: all, in the store; ``task_samples``), every other thread group from its CPU
    over the steady window (/proc, as run.py measures it), each source where the other misses threads: /proc
    sees only the threads alive at the window's end (Spark ends idle task threads, and at a million rows per
    batch a third of our task threads' CPU was in threads ended within the window), the profiler only the
    native threads that existed when it started (RocksDB's, which Spark's provider may start later)."""
    out = dict.fromkeys(ROWS, 0.0)
    every, in_store = task
    out["task threads, in the store"] = in_store * INTERVAL_S / batches
    out["task threads, the query"] = (every - in_store) * INTERVAL_S / batches
    for group, seconds in cpu_by_thread.items():
        s = seconds / batches
        jvm = next((k for k, prefixes in JVM_THREADS.items() if group.startswith(prefixes)), None)
        if group.startswith(STORE_THREADS):
            out["store threads"] += s
        elif group.startswith(TASK_THREAD):
            pass
        elif jvm:
            out[jvm] += s
        else:
            out["other threads"] += s
    out["the store"] = out["store threads"] + out["task threads, in the store"]
    out["all"] = sum(out[k] for k in ROWS[2:])
    return out


ROWS = (
    "all",
    "the store",
    "store threads",
    "task threads, in the store",
    "task threads, the query",
    "other threads",
    "GC",
    "JIT",
)


def report(out_dir: str) -> str:
    """The split of every provider of a run.py output directory recorded with --profiler cpu, and what a
    store costing nothing would leave of rocksdb_v2's CPU per batch."""
    out = Path(out_dir)
    rows: dict[str, dict[str, float]] = {}
    notes: dict[str, str] = {}
    for cell in json.loads((out / "results.json").read_text())["cells"]:
        path = out / f"r{cell['round']}-{cell['workload']}-{cell['provider']}.steady.collapsed"
        steady = cell.get("steady", {})
        if path.is_file() and "cpu_by_thread" in steady:
            every, in_store = task_samples(str(path))
            rows[cell["provider"]] = split(steady["cpu_by_thread"], steady["batches"], (every, in_store))
            window = [b["cpu_s"] for b in cell["batches"] if b.get("kind") == "steady"][-steady["batches"] :]
            notes[cell["provider"]] = (
                f"{in_store / max(1, every):.0%} of {every} task-thread samples in the store; "
                f"JVM CPU per batch measured whole (/proc/<pid>/stat) {sum(window) / len(window):.2f}"
            )
    if not rows:
        return f"{out_dir}: no steady profile with thread CPU (run.py --profile-commits --profiler cpu)"
    names = sorted(rows)
    lines = [f"{out_dir}: CPU seconds per steady batch (task threads from samples, other threads from /proc)"]
    lines += ["", "| | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    lines += [f"| {k} | " + " | ".join(f"{rows[n][k]:.2f}" for n in names) + " |" for k in ROWS]
    lines += [""] + [f"{n}: {notes[n]}" for n in names]
    base = rows.get("rocksdb_v2")
    if base:
        floor = base["all"] - base["the store"]
        lines.append(
            f"rocksdb_v2 with a store costing nothing: {floor / base['all']:.2f}x of its CPU per batch "
            f"({(floor - base['GC']) / base['all']:.2f}x if its GC were all the store's too)"
        )
        for n in names:
            if n != "rocksdb_v2":
                r = rows[n]
                lines.append(
                    f"{n}: {r['all'] / base['all']:.2f}x of rocksdb_v2's CPU per batch; its store "
                    f"{r['the store'] / base['the store']:.2f}x of rocksdb_v2's, the rest "
                    f"{(r['all'] - r['the store']) / floor:.2f}x"
                )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", nargs="+", help="a run.py output directory recorded with --profiler cpu")
    args = ap.parse_args(argv)
    print("\n\n".join(report(d) for d in args.run_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())

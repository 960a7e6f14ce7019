"""Wall-clock thread sampling of a cluster's executors: ``jstack`` on every executor JVM at an interval while
something runs (the recovery benchmark: from a kill to the end of its batch), and a summary of where the
threads that matter were, by top frame. JFR samples CPU (threads running Java code); a restore that waits
(on a download, a lock, a pool's queue, RocksDB's native open) shows only in where its threads stand.

    python integration-tests/bench/thread_dumps.py DIR [--threads 'Executor task launch|lineagestore-']

``DIR`` holds ``<label>-<host>-<n>.txt`` dumps written by :class:`ThreadDumps`. For every thread whose name
matches ``--threads``, it prints how many samples it spent at each frame: the first frame of our code,
RocksDB's or Hadoop's (``--frames``) below the top, with the thread state; the samples are one every
``interval`` seconds, so N samples are about N * interval seconds of that thread's time.
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import threading
import time
from pathlib import Path


class ThreadDumps:
    """Dumps every executor JVM of ``cluster`` every ``interval_s`` seconds into ``out`` while started."""

    def __init__(self, cluster, out: Path, label: str, interval_s: float = 0.5):
        self.cluster, self.out, self.label, self.interval_s = cluster, out, label, interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> ThreadDumps:
        self.out.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            started = time.monotonic()
            for host, pid in self.cluster.executor_pids().items():
                try:
                    dump = subprocess.run(
                        ["jstack", str(pid)], capture_output=True, text=True, timeout=10
                    ).stdout
                except subprocess.TimeoutExpired:
                    continue
                if dump:
                    (self.out / f"{self.label}-{host}-{n:04d}.txt").write_text(
                        f"# t={started:.3f} pid={pid}\n{dump}"
                    )
            n += 1
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))


THREAD = re.compile(r'^"(?P<name>[^"]+)".*$')
STATE = re.compile(r"^\s+java.lang.Thread.State: (?P<state>\S+)")
FRAME = re.compile(r"^\s+at (?P<frame>[^(\s]+)")  # the method, without its source location


def parse(text: str) -> list[tuple[str, str, list[str]]]:
    """(thread name, state, frames top first) of each thread of one dump."""
    threads, current = [], None
    for line in text.splitlines():
        if m := THREAD.match(line):
            current = [m["name"], "", []]
            threads.append(current)
        elif current is not None and (m := STATE.match(line)):
            current[1] = m["state"]
        elif current is not None and (m := FRAME.match(line)):
            current[2].append(m["frame"])
    return [tuple(t) for t in threads]


def where(frames: list[str], interesting: tuple[str, ...], depth: int) -> str:
    """The top frame, and the first ``depth`` frames of interest below it."""
    if not frames:
        return "(no Java frame)"
    picked = [f for f in frames[1:] if any(i in f for i in interesting)][:depth]
    return " < ".join([frames[0], *picked])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--threads", default="Executor task launch|lineagestore-|s3a-transfer|RocksDB")
    ap.add_argument(
        "--frames", default="io.lineagestore,org.rocksdb,org.apache.spark.sql.execution.streaming"
    )
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--glob", default="*.txt")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    names = re.compile(args.threads)
    interesting = tuple(args.frames.split(","))
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    dumps = sorted(args.dir.glob(args.glob))
    for path in dumps:
        host = path.name.rsplit("-", 1)[0]
        for name, state, frames in parse(path.read_text()):
            if names.search(name):
                group = re.sub(r"\d+", "N", name)
                counts[f"{host} {group}"][f"{state:13} {where(frames, interesting, args.depth)}"] += 1
    print(f"{len(dumps)} dumps")
    for key in sorted(counts):
        print(f"\n== {key}: {sum(counts[key].values())} thread-samples")
        for what, n in counts[key].most_common(args.top):
            print(f"{n:6d}  {what}")


if __name__ == "__main__":
    main()

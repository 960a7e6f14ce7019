"""Summarises a JFR recording of a cold restore (``run.py --profile-restore``): where the JVM's CPU went.

    python integration-tests/bench/jfr_profile.py OUT/r0-agg-lineagestore.cold-restore.jfr

Prints the CPU samples (``jdk.ExecutionSample``: threads running Java code) by thread, the methods they
were in (self), the lineagestore / RocksDB / s3a / checksum frames they passed through (inclusive), and
the JIT compilations that took longer than the recording's threshold. Reads the recording with the JDK's
``jfr`` tool. docs/benchmarks.md quotes its output.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import subprocess
import sys
from typing import Any

INTERESTING = ("lineagestore", "rocksdb", "s3a", "Digest", "CRC32", "FileChannel", "FileOutputStream")


def events(path: str, kinds: str, depth: int = 64) -> list[dict[str, Any]]:
    jfr = shutil.which("jfr")
    if jfr is None:
        sys.exit("jfr_profile.py needs the JDK's jfr tool on PATH")
    out = subprocess.run(
        [jfr, "print", "--json", "--stack-depth", str(depth), "--events", kinds, path],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)["recording"]["events"]


def frame_name(frame: dict[str, Any]) -> str:
    method = frame["method"]
    return f"{method['type']['name'].replace('/', '.')}.{method['name']}"


def thread_group(name: str) -> str:
    """Thread names without their numbers: 'lineagestore-transfer-3' -> 'lineagestore-transfer-#'."""
    return re.sub(r"\d+", "#", name.split(" [")[0])


def seconds(duration: str) -> float:
    """An ISO-8601 duration as jfr prints it (PT0.123S, PT1M2.5S)."""
    m = re.fullmatch(r"PT(?:(\d+)M)?(?:([\d.]+)S)?", duration)
    return 0.0 if m is None else int(m.group(1) or 0) * 60 + float(m.group(2) or 0)


def summarize(path: str, top: int = 15) -> str:
    samples = events(path, "jdk.ExecutionSample")
    by_thread: collections.Counter[str] = collections.Counter()
    self_frames: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    for e in samples:
        v = e["values"]
        by_thread[thread_group((v.get("sampledThread") or {}).get("javaName") or "?")] += 1
        frames = (v.get("stackTrace") or {}).get("frames") or []
        if frames:
            self_frames[frame_name(frames[0])] += 1
        for name in {frame_name(f) for f in frames}:
            if any(s in name for s in INTERESTING):
                inclusive[name] += 1
    compilations = sorted(
        (
            (seconds(e["values"]["duration"]), frame_name({"method": e["values"]["method"]}))
            for e in events(path, "jdk.Compilation")
        ),
        reverse=True,
    )
    lines = [f"{path}: {len(samples)} CPU samples of Java code", "", "by thread:"]
    lines += [f"  {n:5d}  {t}" for t, n in by_thread.most_common(top)]
    lines += ["", "self (the method running):"]
    lines += [f"  {n:5d}  {f}" for f, n in self_frames.most_common(top)]
    lines += ["", "inclusive (lineagestore, RocksDB, s3a, checksums, file writes):"]
    lines += [f"  {n:5d}  {f}" for f, n in inclusive.most_common(top)]
    total = sum(s for s, _ in compilations)
    lines += ["", f"slow JIT compilations: {len(compilations)}, {total:.1f} s in total"]
    lines += [f"  {s * 1000:7.0f} ms  {m}" for s, m in compilations[:top]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recording", nargs="+", help="a .jfr file written by run.py --profile-restore")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args(argv)
    print("\n\n".join(summarize(p, args.top) for p in args.recording))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What a benchmark cell measures, apart from running the query: requests and bytes sent to the store (the
counting filesystem on local disk, s3a's own statistics on S3), the storage footprint, the timings providers
log, the JVM's memory, the parts of StreamingQueryProgress the report uses, and the raw parallel-GET
throughput of the S3 server (the physical limit a restore is compared with).
"""

from __future__ import annotations

import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

OPS = ("PUT", "GET", "LIST", "DELETE", "RENAME", "HEAD", "MKDIR")

# s3a IOStatistics counter -> request type (on S3 a rename is a COPY plus a DELETE). PUTs are counted as
# completed: every whole-object PUT and every part, whether s3a's output stream or Hadoop's multipart
# uploader (lineagestore's streamed deltas) sent it (object_put_request and multipart_upload_part_put see
# only the stream's). The POSTs that start and complete a multipart upload are in no counter here.
S3A_COUNTERS = {
    "object_put_request_completed": "PUT",
    "action_http_get_request": "GET",
    "object_list_request": "LIST",
    "object_continue_list_request": "LIST",
    "object_delete_request": "DELETE",
    "object_bulk_delete_request": "DELETE",
    "object_copy_requests": "RENAME",
    "action_http_head_request": "HEAD",
}


# ------------------------------------------------------------------------------------------ store I/O
class LocalCounters:
    """Requests counted by io.lineagestore.bench.CountingFileSystem (the lsbench:// scheme)."""

    areas = ("state", "meta")

    def __init__(self, spark):
        self._cls = spark._jvm.io.lineagestore.bench.CountingFileSystem

    def raw(self) -> dict[str, int]:
        return {str(k): int(v) for k, v in dict(self._cls.snapshot()).items()}


class S3Counters:
    """Requests counted by the s3a filesystem of the bucket (IOStatistics); no state/meta split."""

    areas = ("all",)

    def __init__(self, spark, bucket: str):
        jvm = spark._jvm
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        self._fs = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI(f"s3a://{bucket}/"), conf)

    def raw(self) -> dict[str, int]:
        counters = {str(k): int(v) for k, v in dict(self._fs.getIOStatistics().counters()).items()}
        out: dict[str, int] = {}
        for name, op in S3A_COUNTERS.items():
            out[f"count|{op}|all|all"] = out.get(f"count|{op}|all|all", 0) + counters.get(name, 0)
        out["bytes|PUT|all|all"] = counters.get("object_put_bytes", 0)
        out["bytes|GET|all|all"] = counters.get("stream_read_bytes", 0)
        out.update({f"s3a|{k}": v for k, v in counters.items() if v})
        return out


def diff(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


def summarize_ops(d: dict[str, int], area: str) -> dict[str, int]:
    """Request counts by type and PUT/GET bytes of one area from a counter diff."""
    out = {op: 0 for op in OPS}
    out["put_bytes"] = out["get_bytes"] = 0
    for key, value in d.items():
        parts = key.split("|")
        if len(parts) != 4 or parts[2] != area:
            continue
        what, op = parts[0], parts[1]
        if what == "count":
            out[op] = out.get(op, 0) + value
        elif what == "bytes" and op in ("PUT", "GET"):
            out[f"{op.lower()}_bytes"] += value
    return out


def by_kind(d: dict[str, int], what: str, op: str, area: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for key, value in d.items():
        parts = key.split("|")
        if len(parts) == 4 and parts[0] == what and parts[1] == op and parts[2] == area:
            out[parts[3]] = out.get(parts[3], 0) + value
    return out


# ------------------------------------------------------------------------------------------- footprint
def kind_of(name: str) -> str:
    for kind in ("crc", "sst", "zip", "changelog", "delta", "snapshot"):
        if name.endswith("." + kind) or f".{kind}." in name:
            return kind
    return "other"


def footprint(spark, state_uri: str) -> dict[str, Any]:
    """Bytes and files under the state directory by kind (through Hadoop, so it works on every store)."""
    jvm = spark._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    path = jvm.org.apache.hadoop.fs.Path(state_uri)
    fs = path.getFileSystem(conf)
    total = files = 0
    kinds: dict[str, dict[str, int]] = {}
    if not fs.exists(path):
        return {"bytes": 0, "files": 0, "by_kind": {}}
    it = fs.listFiles(path, True)
    while it.hasNext():
        st = it.next()
        name = st.getPath().getName()
        if "/_metadata/" in st.getPath().toUri().getPath():
            kind = "metadata"
        else:
            kind = kind_of(name)
        k = kinds.setdefault(kind, {"bytes": 0, "files": 0})
        k["bytes"] += st.getLen()
        k["files"] += 1
        total += st.getLen()
        files += 1
    return {"bytes": total, "files": files, "by_kind": kinds}


# ------------------------------------------------------------------------------------------------ logs
LOG_PATTERNS = {
    "snapshot_upload_ms": [
        re.compile(r"Upload snapshot of version \d+.*?time taken: (\d+) ms"),  # RocksDB (both formats)
        re.compile(r"writeSnapshotFile\(\) took (\d+) ms"),  # HDFSBackedStateStoreProvider
    ],
    "cleanup_ms": [
        re.compile(r"Cleaned old data, time taken: (\d+) ms"),  # RocksDB
        re.compile(r"deleting files took (\d+) ms"),  # HDFSBackedStateStoreProvider
    ],
}


def parse_log(path: Path, start_ms: float, end_ms: float) -> dict[str, list[int]]:
    """Timings the providers log (INFO of org.apache.spark.sql.execution.streaming.state) in a window."""
    out: dict[str, list[int]] = {k: [] for k in LOG_PATTERNS}
    if not path.is_file():
        return out
    with open(path, errors="replace") as f:
        for line in f:
            ts, _, rest = line.partition(" ")
            if not ts.isdigit() or not start_ms <= int(ts) <= end_ms:
                continue
            for name, patterns in LOG_PATTERNS.items():
                for p in patterns:
                    m = p.search(rest)
                    if m:
                        out[name].append(int(m.group(1)))
    return out


# ---------------------------------------------------------------------------------------------- memory
def proc_status(pid: int) -> dict[str, int]:
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                out[key] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return out


# ------------------------------------------------------------------------------------------------ CPU
_TICKS = os.sysconf("SC_CLK_TCK")


def _stat_times(stat: str) -> tuple[str, float]:
    """(thread name, user + system CPU seconds) from a /proc stat line; the name may hold spaces."""
    name = stat[stat.index("(") + 1 : stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2 :].split()
    return name, (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime: fields 14 and 15 of stat


def proc_cpu_seconds(pid: int) -> float:
    """CPU seconds of the whole process so far: every thread, RocksDB's native background threads, the
    JIT and the garbage collector included (in local mode the driver JVM is the executor)."""
    try:
        return _stat_times(Path(f"/proc/{pid}/stat").read_text())[1]
    except OSError:
        return 0.0


def machine_cpu_seconds() -> dict[str, float]:
    """The machine's CPU seconds so far by state, summed over its cores (/proc/stat): what the cores did
    beside the JVM (the S3 server, the busy load) and how long they sat idle or waiting for the disk."""
    ticks = os.sysconf("SC_CLK_TCK")
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return {}
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    return {n: int(v) / ticks for n, v in zip(names, fields, strict=False)}


def thread_group(name: str) -> str:
    """A thread's group: its name without a trailing number ("rocksdb:low3", "GC Thread#1" -> "rocksdb:low",
    "GC Thread"); Linux keeps the first 15 characters of a Java thread's name."""
    return re.sub(r"[-#\s]*\d+$", "", name) or name


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds so far of each live thread group of a process (threads that ended are not counted: use
    the difference of two calls over a window where the pools live throughout)."""
    out: dict[str, float] = {}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            name, seconds = _stat_times((task / "stat").read_text())
        except (OSError, ValueError):
            continue
        group = thread_group(name)
        out[group] = out.get(group, 0.0) + seconds
    return out


# ------------------------------------------------------------------------------------------- progress
STATE_FIELDS = (
    "numRowsTotal",
    "numRowsUpdated",
    "numRowsRemoved",
    "commitTimeMs",
    "allUpdatesTimeMs",
    "allRemovalsTimeMs",
    "memoryUsedBytes",
)


def progress_record(p: dict[str, Any]) -> dict[str, Any]:
    """The parts of a StreamingQueryProgress the report uses; state metrics summed over operators."""
    state: dict[str, Any] = {k: 0 for k in STATE_FIELDS}
    custom: dict[str, int] = {}
    for op in p.get("stateOperators", []):
        for k in STATE_FIELDS:
            state[k] += int(op.get(k, 0) or 0)
        for k, v in (op.get("customMetrics") or {}).items():
            if isinstance(v, int | float):
                custom[k] = custom.get(k, 0) + int(v)
    return {
        "batchId": p["batchId"],
        "numInputRows": p.get("numInputRows", 0),
        "durationMs": p.get("durationMs", {}),
        "state": state,
        "custom": custom,
        "operators": len(p.get("stateOperators", [])),
    }


# ------------------------------------------------------------------------------- raw S3 throughput
def raw_get_throughput(
    client,
    bucket: str,
    prefix: str,
    target_bytes: int,
    threads: int = 8,
    repeats: int = 3,
    part_bytes: int = 8 << 20,
) -> dict[str, Any]:
    """The S3 server's raw parallel-GET throughput for about ``target_bytes`` of the objects under
    ``prefix``: the largest objects first (a restore moves mostly large SST files), read as ranges of
    ``part_bytes`` and discarded by ``threads`` concurrent requests, so that a few large objects still keep
    every thread busy; the median of ``repeats`` passes. ``client`` is a boto3 S3 client. This is the
    physical limit a restore of the same bytes is compared with."""
    objects: list[tuple[str, int]] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        objects += [(o["Key"], o["Size"]) for o in page.get("Contents", [])]
    objects.sort(key=lambda o: -o[1])
    chosen, total = [], 0
    for key, size in objects:
        if total >= target_bytes:
            break
        chosen.append((key, size))
        total += size
    if not chosen:
        return {}
    ranges = [
        (key, start, min(start + part_bytes, size) - 1)
        for key, size in chosen
        for start in range(0, size, part_bytes)
    ]

    def get(part: tuple[str, int, int]) -> int:
        key, first, last = part
        body = client.get_object(Bucket=bucket, Key=key, Range=f"bytes={first}-{last}")["Body"]
        n = 0
        while chunk := body.read(1 << 20):
            n += len(chunk)
        return n

    passes = []
    for _ in range(repeats):
        t0 = time.monotonic()
        with ThreadPoolExecutor(threads) as pool:
            moved = sum(pool.map(get, ranges))
        passes.append(moved / (time.monotonic() - t0))
    passes.sort()
    return {
        "bytes": total,
        "objects": len(chosen),
        "ranges": len(ranges),
        "threads": threads,
        "bytes_per_s": passes[len(passes) // 2],
        "passes_bytes_per_s": passes,
    }

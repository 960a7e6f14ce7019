"""The soak's oracle: its input data, what each committed micro-batch read (from the checkpoint's own logs)
and the comparison of the query's output with a plain-Python model. Used by ``soak.py``."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any


# ------------------------------------------------------------------------------------------ the data
def event(event_id: int) -> dict[str, Any]:
    """Every occurrence of an id is the same row, so dropDuplicates keeps a well-defined row."""
    return {"id": event_id, "k": f"k{event_id % 13}", "v": event_id % 97 + 1}


def make_batches(seed: int, batches: int, rows: int = 25, ids: int = 600) -> list[list[dict]]:
    rnd = random.Random(seed)
    return [[event(rnd.randrange(ids)) for _ in range(rows)] for _ in range(batches)]


def oracle(batches: list[list[dict]]) -> dict[int, list[tuple]]:
    """Per batch (its input rows): sorted (k, count, sum) of every key that got a new distinct id in it."""
    seen: set[int] = set()
    totals: dict[str, list[int]] = {}
    out: dict[int, list[tuple]] = {}
    for b, rows in enumerate(batches):
        touched = set()
        for r in rows:
            if r["id"] in seen:
                continue
            seen.add(r["id"])
            acc = totals.setdefault(r["k"], [0, 0])
            acc[0] += 1
            acc[1] += r["v"]
            touched.add(r["k"])
        out[b] = sorted((k, totals[k][0], totals[k][1]) for k in touched)
    return out


def batch_files(client, bucket: str, seen: dict[str, dict] | None = None) -> dict[int, list[int]]:
    """Which input files (by number) each committed micro-batch (``commits/<n>``) read, from the checkpoint.

    Usually batch n reads file n, but not always: a process killed after the file source logged its next
    file (``sources/0/<n>``) and before the offset log entry of that batch makes the restarted batch read
    the logged file and the next one (Spark's file source, by design). So the oracle follows the offset log
    (``logOffset`` of the file source per batch) and the source log (files per source log entry).

    Spark purges the commit and offset logs beyond ``minBatchesToRetain``, and the oldest remaining batch
    then has no predecessor to say where it started. ``seen`` (kept by the caller across calls, filled here)
    remembers every committed batch's log offset and source entry once read; a committed batch's offsets
    never change, so what was read before stays true.
    """
    seen = {"offsets": {}, "sources": {}} if seen is None else seen

    def read(key: str) -> list[str]:
        return client.get_object(Bucket=bucket, Key=key)["Body"].read().decode().splitlines()

    committed = {
        int(k.rsplit("/", 1)[-1])
        for k in list_all(client, bucket, "checkpoint/commits/")
        if k.rsplit("/", 1)[-1].isdigit()
    }
    log_offsets = {}  # of committed batches only: a planned batch without a commit runs again later
    for key in list_all(client, bucket, "checkpoint/offsets/"):
        name = key.rsplit("/", 1)[-1]
        if name.isdigit() and int(name) in committed:
            log_offsets[int(name)] = json.loads(read(key)[2])["logOffset"]
    source: dict[int, list[int]] = {}
    for key in list_all(client, bucket, "checkpoint/sources/0/"):
        name = key.rsplit("/", 1)[-1]
        if name.removesuffix(".compact").isdigit():
            for line in read(key)[1:]:
                entry = json.loads(line)
                number = int(entry["path"].rsplit("/f", 1)[-1].split(".")[0])
                source.setdefault(entry["batchId"], [])
                if number not in source[entry["batchId"]]:
                    source[entry["batchId"]].append(number)
    log_offsets = seen["offsets"] | log_offsets
    source = seen["sources"] | source
    seen["offsets"], seen["sources"] = log_offsets, source
    out: dict[int, list[int]] = {}
    previous = -1
    for b in sorted(log_offsets):
        out[b] = [f for sb in range(previous + 1, log_offsets[b] + 1) for f in sorted(source.get(sb, []))]
        previous = log_offsets[b]
    return out


def compare(
    client, bucket: str, data: list[list[dict]], out_dir: Path, seen: dict[str, dict]
) -> tuple[list[int], dict[int, Any]]:
    """Batches whose output differs from the oracle (following the batches' real inputs), with details.
    ``seen``: see ``batch_files``."""
    files = batch_files(client, bucket, seen)
    committed = sorted(files)
    inputs = [[row for f in files[b] for row in data[f]] for b in committed]
    expected = dict(zip(committed, oracle(inputs).values(), strict=True))
    got = _read_outputs(out_dir)
    bad = [b for b in committed if got.get(b, []) != expected[b]]
    consumed = sorted(f for b in committed for f in files[b])
    if consumed != list(range(len(consumed))):
        bad.append(-1)  # a file read twice or skipped
    return bad, {b: {"files": files.get(b), "expected": expected.get(b), "got": got.get(b)} for b in bad[:3]}


def _read_outputs(out: Path) -> dict[int, list[tuple]]:
    result: dict[int, list[tuple]] = {}
    for d in out.glob("batch_id=*"):
        b = int(d.name.split("=")[1])
        rows = []
        for part in d.glob("part-*"):
            rows += [json.loads(line) for line in part.read_text().splitlines() if line]
        result[b] = sorted((r["k"], r["n"], r["s"]) for r in rows)
    return result


def list_all(client, bucket: str, prefix: str) -> list[str]:
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return keys

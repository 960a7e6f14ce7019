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
    """Which input files (by number) each committed micro-batch (``commits/<n>``) and all batches before it
    had read, from the checkpoint.

    Usually batch n reads file n, but not always: a process killed after the file source logged its next
    file (``sources/0/<n>``) and before the offset log entry of that batch makes the restarted batch read
    the logged file and the next one (Spark's file source, by design). So the oracle follows the offset log
    (``logOffset`` of the file source per batch) and the source log (files per source log entry).

    Spark purges the commit and offset logs beyond ``minBatchesToRetain``, and the oldest remaining batch
    then has no predecessor to say where it started. ``seen`` (kept by the caller across calls, filled here)
    remembers every committed batch's log offset and source entry once read; a committed batch's offsets
    never change, so what was read before stays true, and entries already remembered are not read again:
    ``soak.py`` calls this every second while a query runs, so no batch's entries are purged unseen. What one
    batch read alone is the difference with its predecessor's (``compare``).
    """
    seen = {"offsets": {}, "sources": {}} if seen is None else seen

    def read(key: str) -> list[str]:
        """The lines of a log entry; none if Spark purged it since the listing (read while a query runs)."""
        try:
            return client.get_object(Bucket=bucket, Key=key)["Body"].read().decode().splitlines()
        except client.exceptions.NoSuchKey:
            return []

    committed = {
        int(k.rsplit("/", 1)[-1])
        for k in list_all(client, bucket, "checkpoint/commits/")
        if k.rsplit("/", 1)[-1].isdigit()
    }
    log_offsets = {}  # of committed batches only: a planned batch without a commit runs again later
    for key in list_all(client, bucket, "checkpoint/offsets/"):
        name = key.rsplit("/", 1)[-1]
        if name.isdigit() and int(name) in committed and int(name) not in seen["offsets"]:
            lines = read(key)
            if len(lines) > 2:
                log_offsets[int(name)] = json.loads(lines[2])["logOffset"]
    source: dict[int, list[int]] = {}
    for key in list_all(client, bucket, "checkpoint/sources/0/"):
        name = key.rsplit("/", 1)[-1]
        plain = name.isdigit() and int(name) not in seen["sources"]  # an entry never changes once written
        if plain or (name.endswith(".compact") and name.removesuffix(".compact").isdigit()):
            for line in read(key)[1:]:
                entry = json.loads(line)
                number = int(entry["path"].rsplit("/f", 1)[-1].split(".")[0])
                source.setdefault(entry["batchId"], [])
                if number not in source[entry["batchId"]]:
                    source[entry["batchId"]].append(number)
    log_offsets = seen["offsets"] | log_offsets
    source = {
        b: sorted(set(seen["sources"].get(b, [])) | set(source.get(b, []))) for b in seen["sources"] | source
    }
    seen["offsets"], seen["sources"] = log_offsets, source
    return {b: sorted(f for sb in range(log_offsets[b] + 1) for f in source.get(sb, [])) for b in log_offsets}


def compare(
    client, bucket: str, data: list[list[dict]], out_dir: Path, seen: dict[str, dict]
) -> tuple[list[int], dict[int, Any], list[int]]:
    """Batches whose output differs from the oracle (following the batches' real inputs), with details, and
    the committed batches that could not be checked (``seen``: see ``batch_files``).

    A batch's expected output needs what it read (the files after its predecessor's, so the predecessor's
    log offset must be known) and the state before it (every file its predecessor had read). A batch whose
    predecessor's offset is unknown is listed as unchecked, never guessed.
    """
    consumed = batch_files(client, bucket, seen)
    got = read_outputs(out_dir)
    bad, unchecked, details = [], [], {}
    for b in sorted(consumed):
        before = consumed.get(b - 1, [] if b == 0 else None)
        if before is None:
            unchecked.append(b)
            continue
        own = [f for f in consumed[b] if f not in set(before)]
        if len(before) + len(own) != len(consumed[b]):
            bad.append(b)  # a file the predecessor read is missing from this batch's log (impossible)
            continue
        rows_before = [row for f in before for row in data[f]]
        expected = oracle([rows_before, [row for f in own for row in data[f]]])[1]
        if got.get(b, []) != expected:
            bad.append(b)
            if len(details) < 3:
                details[b] = {"files": own, "expected": expected, "got": got.get(b)}
    last = consumed[max(consumed)] if consumed else []
    if last != list(range(len(last))):
        bad.append(-1)  # a file read twice or skipped
    return bad, details, unchecked


def read_outputs(out: Path) -> dict[int, list[tuple]]:
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

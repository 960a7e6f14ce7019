"""Checkpoint-level operations behind ``lineagestore inspect|verify|gc|clone``.

This module knows Spark's checkpoint layout (``commits/``, ``offsets/``, ``metadata``, ``state/<op>/<part>
[/<store>]`` and the operator metadata naming the stores) and parses Spark's own JSON files. Everything of
lineagestore's on-storage format (delta files, snapshot indexes, shared blobs, lineage, clean-up planning)
is read and decided in Scala, called per store through :mod:`lineagestore.checkpoint_jvm`.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lineagestore.checkpoint_jvm import JvmTools
from lineagestore.checkpoint_spark import (
    foreign_provider,
    not_lineagestore,
    operator_kind,
    unfinished_repartition,
)
from lineagestore.progress import NO_PROGRESS, Progress  # noqa: F401  (re-exported for the CLI)

DEFAULT_STORE = "default"
# Spark's stream-stream join keeps four stores per partition, in this order (SymmetricHashJoinStateManager)
JOIN_STORES = [
    "left-keyToNumValues",
    "left-keyWithIndexToValue",
    "right-keyToNumValues",
    "right-keyWithIndexToValue",
]


class CheckpointError(Exception):
    """The checkpoint cannot be used as asked (missing, not a checkpoint, unreadable Spark file, a clone
    destination that is not empty). The message names the file and what to do."""


# ---- the checkpoint as Spark lays it out --------------------------------------------------------------------


@dataclass
class Store:
    """One state store directory and what Spark's commit log says each batch committed in it."""

    operator_id: int
    partition_id: int
    store_name: str
    uri: str
    path: str  # relative to the checkpoint, e.g. state/0/1 or state/0/1/left-keyToNumValues
    commits: list[tuple[int, int, str]] = field(default_factory=list)  # (batchId, version, uniqueId)

    def commit_log(self, batches: Iterable[int] | None = None) -> str:
        wanted = None if batches is None else set(batches)
        return "\n".join(f"{b} {v} {u}" for b, v, u in self.commits if wanted is None or b in wanted)


@dataclass
class Checkpoint:
    uri: str
    display: str
    query_id: str | None
    batches: list[int]  # committed batch ids, ascending
    uncommitted: list[int]  # batches with an offset but no commit (in progress or failed)
    operators: dict[int, list[str]]  # operator id -> store names
    partitions: dict[int, int]  # operator id -> number of partitions
    stores: list[Store]
    notes: list[str] = field(default_factory=list)
    operator_names: dict[int, str] = field(default_factory=dict)  # operator id -> Spark's name, if recorded

    def rel(self, uri: str) -> str:
        return uri[len(self.uri) :].lstrip("/") if uri.startswith(self.uri) else uri


def to_uri(path: str) -> str:
    """A local path becomes an absolute ``file:`` URI; anything with a scheme (``s3a://``, ``hdfs://``,
    ``file:/``) is kept as given."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:/", path):
        return path.rstrip("/") if not path.endswith(":///") else path
    return Path(path).expanduser().resolve().as_uri()


def _batch_ids(entries: list[dict] | None) -> list[int]:
    return sorted(int(e["name"]) for e in entries or [] if not e["dir"] and e["name"].isdigit())


def _read_json_log(tools: JvmTools, uri: str, display: str) -> dict:
    """Spark's metadata-log entries: a version line (``v1``, ``v2``) then one JSON object."""
    text = tools.read_text(uri)
    if text is None:
        raise CheckpointError(f"{display} disappeared while reading it; is the query still running?")
    lines = text.split("\n", 1)
    if len(lines) < 2 or not re.fullmatch(r"v\d+", lines[0].strip()):
        raise CheckpointError(f"{display} is not a Spark log entry (expected a 'v<N>' line then JSON)")
    try:
        return json.loads(lines[1])
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{display} holds unreadable JSON ({e}); the file is damaged") from None


def load(tools: JvmTools, path: str) -> Checkpoint:
    """Read Spark's commit log and state layout of the checkpoint at ``path`` (a local path or a URI)."""
    uri = to_uri(path)
    top = tools.list(uri)
    if top is None:
        raise CheckpointError(f"{path} does not exist")
    names = {e["name"] for e in top}
    if "commits" not in names and "offsets" not in names:
        raise CheckpointError(
            f"{path} is not a Spark streaming checkpoint (it has no commits/ or offsets/ directory); "
            "pass the directory given as checkpointLocation"
        )
    query_id = None
    if "metadata" in names:
        text = tools.read_text(f"{uri}/metadata") or ""
        try:
            query_id = json.loads(text.strip().splitlines()[0]).get("id") if text.strip() else None
        except (json.JSONDecodeError, IndexError, AttributeError):
            raise CheckpointError(f"{uri}/metadata is not Spark's query metadata (unreadable JSON)") from None
    batches = _batch_ids(tools.list(f"{uri}/commits"))
    offsets = _batch_ids(tools.list(f"{uri}/offsets"))
    committed_set = set(batches)
    uncommitted = [b for b in offsets if b not in committed_set and (not batches or b > batches[-1])]

    ids_by_batch: dict[int, dict[str, Any]] = {}
    for b in batches:
        entry = _read_json_log(tools, f"{uri}/commits/{b}", f"{uri}/commits/{b}")
        ids_by_batch[b] = entry.get("stateUniqueIds") or {}

    state = tools.list(f"{uri}/state") or []
    op_ids = sorted(int(e["name"]) for e in state if e["dir"] and e["name"].isdigit())
    notes: list[str] = []
    foreign = foreign_provider(tools, uri, offsets) if op_ids else None
    if foreign:  # another provider's files (its own format, even with format version 2's unique IDs)
        raise CheckpointError(foreign)
    if op_ids and batches and not any(ids_by_batch[b] for b in batches):
        raise CheckpointError(not_lineagestore(tools, uri, batches[-1], offsets))

    operators: dict[int, list[str]] = {}
    operator_names: dict[int, str] = {}
    partitions: dict[int, int] = {}
    stores: list[Store] = []
    for op in op_ids:
        op_uri = f"{uri}/state/{op}"
        listed_parts = sorted(
            int(e["name"]) for e in tools.list(op_uri) or [] if e["dir"] and e["name"].isdigit()
        )
        per_batch = [ids_by_batch[b].get(str(op)) for b in batches]
        widths = {len(p) for ids in per_batch if ids for p in ids if p is not None}
        names_, spark_name = _store_names(tools, op_uri, widths, listed_parts, notes)
        if spark_name:
            operator_names[op] = spark_name
        n_parts = max([len(ids) for ids in per_batch if ids] + [len(listed_parts)])
        operators[op] = names_
        partitions[op] = n_parts
        for part in range(n_parts):
            for idx, name in enumerate(names_):
                rel = f"state/{op}/{part}" + ("" if name == DEFAULT_STORE else f"/{name}")
                store = Store(op, part, name, f"{uri}/{rel}", rel)
                for b, ids in zip(batches, per_batch, strict=True):
                    if ids and part < len(ids) and ids[part] is not None and idx < len(ids[part]):
                        store.commits.append((b, b + 1, ids[part][idx]))
                stores.append(store)
    return Checkpoint(
        uri, path, query_id, batches, uncommitted, operators, partitions, stores, notes, operator_names
    )


def _store_names(
    tools: JvmTools, op_uri: str, widths: set[int], listed_parts: list[int], notes: list[str]
) -> tuple[list[str], str | None]:
    """Store names of an operator, in the order Spark lists their unique IDs in the commit log, and Spark's
    name of the operator (``operatorInfo.operatorName``, None when not recorded): from the operator's state
    metadata (``_metadata/metadata``, or the newest ``_metadata/v2/<batch>``), else the names from what the
    commit log's shape implies."""
    candidates = [f"{op_uri}/_metadata/metadata"]
    v2 = _batch_ids(tools.list(f"{op_uri}/_metadata/v2"))
    if v2:
        candidates.insert(0, f"{op_uri}/_metadata/v2/{v2[-1]}")
    for meta_uri in candidates:
        if tools.read_text(meta_uri) is None:
            continue
        try:
            meta = _read_json_log(tools, meta_uri, meta_uri)
            names = [s["storeName"] for s in meta.get("stateStoreInfo", [])]
            spark_name = (meta.get("operatorInfo") or {}).get("operatorName")
        except (CheckpointError, KeyError, TypeError, AttributeError):
            notes.append(f"{meta_uri} is unreadable; store names guessed from the commit log")
            continue
        if names and (not widths or widths == {len(names)}):
            return names, spark_name
    width = max(widths) if widths else 1
    if width == 1:
        return [DEFAULT_STORE], None
    if width == len(JOIN_STORES):
        return list(JOIN_STORES), None
    # unknown operator: name the sub-directories of the first partition, sorted
    if listed_parts:
        subdirs = sorted(
            e["name"]
            for e in tools.list(f"{op_uri}/{listed_parts[0]}") or []
            if e["dir"] and not e["name"].startswith(("_", ".")) and e["name"] != "shared"
        )
        if len(subdirs) == width:
            return subdirs, None
    raise CheckpointError(
        f"cannot tell the {width} store names of operator {op_uri}: no readable state metadata"
    )


# ---- inspect ----------------------------------------------------------------------------------------------

TOTAL_KEYS = (
    "deltas",
    "deltaBytes",
    "snapshots",
    "snapshotBytes",
    "blobs",
    "blobBytes",
    "sharedBlobs",
    "sharedBytes",
    "uniqueBlobs",
    "uniqueBytes",
    "orphanBlobs",
    "orphanBlobBytes",
    "orphanAttempts",
    "orphanAttemptBytes",
    "pendingAttempts",
    "unknownCheckpoints",
)


def inspect(tools: JvmTools, cp: Checkpoint, progress: Progress = NO_PROGRESS) -> dict:
    reports = []
    progress.start("inspect", len(cp.stores))
    for s in cp.stores:
        r = tools.inspect_store(s, s.commit_log())
        r["path"] = s.path
        reports.append(r)
        progress.step(s.path)
    progress.finish()
    totals = {k: sum(r["totals"][k] for r in reports) for k in TOTAL_KEYS}
    return {
        # damage seen on the way, one entry per finding: the summary and the exit code (1) come from here
        "problems": inspect_problems(reports),
        "checkpoint": cp.display,
        "uri": cp.uri,
        "queryId": cp.query_id,
        "commitLog": {
            "batches": len(cp.batches),
            "first": cp.batches[0] if cp.batches else None,
            "last": cp.batches[-1] if cp.batches else None,
            "uncommitted": cp.uncommitted,
        },
        "operators": [
            {
                "operatorId": op,
                "storeNames": names,
                "partitions": cp.partitions[op],
                "operatorName": cp.operator_names.get(op),
                "kind": operator_kind(cp.operator_names.get(op)),
            }
            for op, names in cp.operators.items()
        ],
        "stores": reports,
        "totals": totals,
        "notes": cp.notes,
    }


def inspect_problems(reports: list[dict]) -> list[dict]:
    """Unreadable files, commit-log/lineage conflicts and snapshots whose blobs are gone, per store."""
    out = []
    for r in reports:
        for msg in r["errors"]:
            out.append({"store": r["path"], "kind": "error", "message": msg})
        for msg in r["conflicts"]:
            out.append({"store": r["path"], "kind": "conflict", "message": msg})
        for snap in r["snapshots"]:
            if snap.get("missingBlobs"):
                zip_name = f"{snap['version']}_{snap['uniqueId']}.zip"
                out.append(
                    {
                        "store": r["path"],
                        "kind": "missing blobs",
                        "message": f"{zip_name} references missing blobs: " + ", ".join(snap["missingBlobs"]),
                    }
                )
    return out


# ---- verify -----------------------------------------------------------------------------------------------


def verify_window(tools: JvmTools, cp: Checkpoint, retain: int | None) -> tuple[list[int], list[int]]:
    """Which committed batches to verify: the newest ``retain`` ones, or by default the newest one and every
    older one down to the first whose checkpoint files are gone from every store (cleaned by retention).
    Returns (batches to check, batches skipped)."""
    if not cp.batches:
        return [], []
    if retain is not None:
        chosen = cp.batches[-retain:]
    else:
        present: set[int] = set()
        for s in cp.stores:
            present.update(tools.existing_batches(s, s.commit_log()))
        chosen = [cp.batches[-1]]
        for b in reversed(cp.batches[:-1]):
            if b not in present:
                break
            chosen.insert(0, b)
    return chosen, [b for b in cp.batches if b not in set(chosen)]


def verify(
    tools: JvmTools,
    cp: Checkpoint,
    retain: int | None = None,
    progress: Progress = NO_PROGRESS,
    scratch_dir: str = "",
) -> dict:
    chosen, skipped = verify_window(tools, cp, retain)
    results, problems = [], []
    files = bytes_ = 0
    progress.start("verify", len(cp.stores))
    for s in cp.stores:
        r = tools.verify_store(s, s.commit_log(chosen), scratch_dir)
        r["path"] = s.path
        results.append(r)
        files += r["filesVerified"]
        bytes_ += r["bytesVerified"]
        for p in r["problems"]:
            problems.append({"store": s.path, **p})
        progress.step(f"{s.path} ({'ok' if r['ok'] else 'PROBLEMS'})")
    progress.finish()
    if cp.stores and not cp.batches:
        problems.append(
            {"store": "", "file": f"{cp.uri}/commits", "error": "no committed batch", "batches": []}
        )
    unfinished = unfinished_repartition(tools, cp.uri, cp.batches, cp.uncommitted)
    if unfinished:  # Spark refuses to start the query until this is finished or undone
        problems.append(
            {"store": "", "file": f"{cp.uri}/offsets/{cp.uncommitted[0]}", "error": unfinished, "batches": []}
        )
    return {
        "checkpoint": cp.display,
        "ok": not problems,
        "batches": chosen,
        "skippedBatches": skipped,
        "stores": len(cp.stores),
        "filesVerified": files,
        "bytesVerified": bytes_,
        "problems": problems,
        "results": results,
    }


# ---- gc ---------------------------------------------------------------------------------------------------


def gc(
    tools: JvmTools,
    cp: Checkpoint,
    retain: int,
    grace_ms: int,
    apply: bool,
    progress: Progress = NO_PROGRESS,
) -> dict:
    results = []
    latest = cp.batches[-1] if cp.batches else -1
    # each operator's partition count in the newest committed batch: the stores it names
    current: dict[int, int] = {}
    for s in cp.stores:
        if any(b == latest for b, _, _ in s.commits):
            current[s.operator_id] = max(current.get(s.operator_id, 0), s.partition_id + 1)
    progress.start("gc (deleting)" if apply else "gc (planning)", len(cp.stores))
    for s in cp.stores:
        r = tools.gc_store(s, s.commit_log(), retain, grace_ms, apply, current.get(s.operator_id, 0), latest)
        r["path"] = s.path
        results.append(r)
        progress.step(s.path)
    progress.finish()
    return {
        "checkpoint": cp.display,
        "applied": apply,
        "retain": retain,
        "graceMs": grace_ms,
        "deleteFiles": sum(len(r["delete"]) for r in results),
        "deleteBytes": sum(r["deleteBytes"] for r in results),
        "keptFiles": sum(r["keptFiles"] for r in results),
        "keptBytes": sum(r["keptBytes"] for r in results),
        "errors": [e for r in results for e in r["errors"]],
        "stores": results,
    }


# ---- clone ------------------------------------------------------------------------------------------------

# Spark's logs first, state last: a commit copied implies its offsets and state files are copied after it.
_CLONE_ORDER = ("metadata", "commits", "offsets", "sources")


def _clone_rank(rel_dir: str) -> tuple[int, str]:
    top = rel_dir.split("/", 1)[0]
    if rel_dir == "":
        return (0, rel_dir)
    if top in _CLONE_ORDER:
        return (1 + _CLONE_ORDER.index(top), rel_dir)
    if top == "state":
        return (len(_CLONE_ORDER) + 2, rel_dir)
    return (len(_CLONE_ORDER) + 1, rel_dir)


def clone(
    tools: JvmTools,
    src: str,
    dst: str,
    new_query_id: bool = False,
    progress: Progress = NO_PROGRESS,
    chunk: int = 200,
) -> dict:
    cp = load(tools, src)
    dst_uri = to_uri(dst)
    if dst_uri.rstrip("/") == cp.uri.rstrip("/") or dst_uri.startswith(cp.uri.rstrip("/") + "/"):
        raise CheckpointError(f"{dst} is the source checkpoint or inside it")
    existing = tools.list(dst_uri)
    if existing:
        raise CheckpointError(
            f"{dst} exists and is not empty: clone writes only into a new or empty directory"
        )
    tree = tools.list_tree(cp.uri) or []
    by_dir: dict[str, list[dict]] = {}
    for f in tree:
        rel_dir, _, name = f["path"].rpartition("/")
        by_dir.setdefault(rel_dir, []).append({"name": name, "bytes": f["bytes"]})
    total = sum(f["bytes"] for f in tree)
    linked = copied = server_copied = done_bytes = 0
    progress.start("clone (files)", len(tree))
    for rel_dir in sorted(by_dir, key=_clone_rank):
        entries = sorted(by_dir[rel_dir], key=lambda e: e["name"])
        for i in range(0, len(entries), chunk):
            part = entries[i : i + chunk]
            r = tools.clone_files(cp.uri, dst_uri, rel_dir, [e["name"] for e in part])
            linked += r["linked"]
            copied += r["copied"]
            server_copied += r.get("serverCopied", 0)
            done_bytes += r["bytes"]
            progress.step(f"{rel_dir or '.'} ({human_bytes(done_bytes)} of {human_bytes(total)})", len(part))
    progress.finish()
    query_id = cp.query_id
    if new_query_id:
        text = tools.read_text(f"{dst_uri}/metadata")
        if text is None:
            raise CheckpointError(f"{cp.uri}/metadata is missing: no query id to replace")
        meta = json.loads(text.strip().splitlines()[0])
        meta["id"] = query_id = str(uuid.uuid4())
        tools.write_text(f"{dst_uri}/metadata", json.dumps(meta, separators=(",", ":")) + "\n", True)
    return {
        "source": cp.display,
        "destination": dst,
        "files": len(tree),
        "linked": linked,
        "copied": copied,
        "serverCopied": server_copied,
        "bytes": done_bytes,
        "queryId": query_id,
        "newQueryId": new_query_id,
    }


# ---- helpers ----------------------------------------------------------------------------------------------


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")


def parse_duration_ms(text: str) -> int:
    """``90s``, ``30m``, ``6h``, ``2d``, ``500ms``; a bare number is seconds."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"'{text}' is not a duration such as 90s, 30m, 6h or 2d")
    scale = {"ms": 1, "s": 1000, None: 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}[m.group(2)]
    return int(float(m.group(1)) * scale)

"""A checkpoint as the tools see it: its committed batches and, per state store (operator, partition, store
name), the unique ID each batch committed, read from Spark's files (:mod:`.spark_files`) by :func:`load`.
Everything of lineagestore's on-storage format (delta files, snapshot indexes, shared blobs, lineage,
clean-up planning) is read and decided in Scala, called per store through :mod:`lineagestore.jvm`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lineagestore.checkpoint.errors import CheckpointError
from lineagestore.checkpoint.spark_files import (
    DEFAULT_STORE,
    JOIN_STORES,
    batch_ids,
    commit_unique_ids,
    foreign_provider,
    not_lineagestore,
    numbered_dirs,
    operator_metadata_paths,
    operator_path,
    query_id,
    read_log_json,
    store_path,
)
from lineagestore.jvm import JvmTools


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

    def current_partitions(self) -> dict[int, int]:
        """Each operator's partition count in the newest committed batch: one past the highest partition whose
        stores it names. A store at or above it belongs to a partition a repartition removed, which gc
        retires whole once no retained batch names it (CleanupPlanner.shrunkBelow); an operator the newest
        batch names no store of is absent (unknown)."""
        latest = self.batches[-1] if self.batches else -1
        current: dict[int, int] = {}
        for s in self.stores:
            if any(b == latest for b, _, _ in s.commits):
                current[s.operator_id] = max(current.get(s.operator_id, 0), s.partition_id + 1)
        return current


def to_uri(path: str) -> str:
    """A local path becomes an absolute ``file:`` URI; anything with a scheme (``s3a://``, ``hdfs://``,
    ``file:/``) is kept as given."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:/", path):
        return path.rstrip("/") if not path.endswith(":///") else path
    return Path(path).expanduser().resolve().as_uri()


def local_path(location: str) -> Path | None:
    """The local file a checkpoint location names (a path, or a ``file:`` URI), None for other schemes."""
    from urllib.parse import unquote, urlparse

    if not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", location) or re.match(r"^[A-Za-z]:[\\/]", location):
        return Path(location).expanduser()
    parsed = urlparse(location)
    return Path(unquote(parsed.path)) if parsed.scheme.lower() == "file" else None


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
    qid = query_id(tools, uri) if "metadata" in names else None
    batches = batch_ids(tools, f"{uri}/commits")
    offsets = batch_ids(tools, f"{uri}/offsets")
    committed_set = set(batches)
    uncommitted = [b for b in offsets if b not in committed_set and (not batches or b > batches[-1])]
    ids_by_batch = {b: commit_unique_ids(tools, uri, b, listed=True) for b in batches}

    op_ids = numbered_dirs(tools, f"{uri}/state")
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
        op_uri = f"{uri}/{operator_path(op)}"
        listed_parts = numbered_dirs(tools, op_uri)
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
                rel = store_path(op, part, name)
                store = Store(op, part, name, f"{uri}/{rel}", rel)
                for b, ids in zip(batches, per_batch, strict=True):
                    if ids and part < len(ids) and ids[part] is not None and idx < len(ids[part]):
                        store.commits.append((b, b + 1, ids[part][idx]))
                stores.append(store)
    return Checkpoint(
        uri, path, qid, batches, uncommitted, operators, partitions, stores, notes, operator_names
    )


def _store_names(
    tools: JvmTools, op_uri: str, widths: set[int], listed_parts: list[int], notes: list[str]
) -> tuple[list[str], str | None]:
    """Store names of an operator, in the order Spark lists their unique IDs in the commit log, and Spark's
    name of the operator (``operatorInfo.operatorName``, None when not recorded): from the operator's state
    metadata, else the names from what the commit log's shape implies."""
    for meta_uri in operator_metadata_paths(tools, op_uri):
        if tools.read_text(meta_uri) is None:
            continue
        try:
            meta: Any = read_log_json(tools, meta_uri)
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

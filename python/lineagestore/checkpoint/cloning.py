"""``clone``: copy a checkpoint into a new one that shares nothing mutable with it (the JVM hard-links
lineagestore's immutable files, copies the rest, server-side between two ``s3a://`` locations)."""

from __future__ import annotations

import json
import uuid

from lineagestore._units import human_bytes
from lineagestore.checkpoint.errors import CheckpointError
from lineagestore.checkpoint.model import load, to_uri
from lineagestore.checkpoint.progress import NO_PROGRESS, Progress
from lineagestore.jvm import JvmTools

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

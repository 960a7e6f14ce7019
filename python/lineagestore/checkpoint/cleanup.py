"""``gc``: plan (and with ``apply`` run) the clean-up of every store of a checkpoint with the store's own
planners, in the JVM; each file's reason comes back as data (a ``kind`` and its facts), which the command
line words (docs/operations.md#gc)."""

from __future__ import annotations

from lineagestore.checkpoint.model import Checkpoint
from lineagestore.checkpoint.progress import NO_PROGRESS, Progress
from lineagestore.jvm import JvmTools


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
    current = cp.current_partitions()
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

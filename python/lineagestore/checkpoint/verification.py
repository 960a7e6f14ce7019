"""``verify``: prove the committed checkpoints of a checkpoint load, store by store (the JVM resolves each
lineage and reads back every file with its checksums), as the report ``lineagestore verify --json`` prints."""

from __future__ import annotations

from lineagestore.checkpoint.model import Checkpoint
from lineagestore.checkpoint.progress import NO_PROGRESS, Progress
from lineagestore.checkpoint.spark_files import unfinished_repartition
from lineagestore.jvm import JvmTools


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
        "uri": cp.uri,
        "ok": not problems,
        "batches": chosen,
        "skippedBatches": skipped,
        "stores": len(cp.stores),
        "filesVerified": files,
        "bytesVerified": bytes_,
        "problems": problems,
        "results": results,
    }

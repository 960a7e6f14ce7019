"""``verify``: prove the committed checkpoints of a checkpoint load, store by store (the JVM resolves each
lineage and reads back every file with its checksums), as the report ``lineagestore verify --json`` prints."""

from __future__ import annotations

from lineagestore.checkpoint.model import Checkpoint
from lineagestore.checkpoint.progress import NO_PROGRESS, Progress
from lineagestore.checkpoint.spark_files import unfinished_repartition
from lineagestore.jvm import JvmTools


def verify_targets(tools: JvmTools, cp: Checkpoint, retain: int | None) -> dict[str, list[int]]:
    """Which committed batches to verify, per store path: the newest ``retain`` ones, or by default those
    whose checkpoints retention still holds in the store (decided in Scala, as gc's retention decides: a
    batch whose files a clean-up removed is beyond retention, skipped, not damage)."""
    if retain is not None:
        newest = cp.batches[-retain:]
        return {s.path: newest for s in cp.stores}
    current = cp.current_partitions()
    return {
        s.path: tools.retained_batches(s, s.commit_log(), current.get(s.operator_id, 0))["retained"]
        for s in cp.stores
    }


def verify(
    tools: JvmTools,
    cp: Checkpoint,
    retain: int | None = None,
    progress: Progress = NO_PROGRESS,
    scratch_dir: str = "",
) -> dict:
    targets = verify_targets(tools, cp, retain)
    checked = set().union(*targets.values()) if targets else set()
    chosen = [b for b in cp.batches if b in checked]
    skipped = [b for b in cp.batches if b not in checked]  # beyond retention in every store
    results, problems = [], []
    files = bytes_ = 0
    progress.start("verify", len(cp.stores))
    for s in cp.stores:
        r = tools.verify_store(s, s.commit_log(targets[s.path]), scratch_dir)
        r["path"] = s.path
        r["skippedBatches"] = [b for b, _, _ in s.commits if b not in set(targets[s.path])]
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

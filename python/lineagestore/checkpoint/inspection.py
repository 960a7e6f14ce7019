"""``inspect``: what every store of a checkpoint holds (versions, lineage, attempts, snapshots, blobs,
sizes) and the damage seen on the way, as the JSON-able report ``lineagestore inspect --json`` prints."""

from __future__ import annotations

from lineagestore.checkpoint.migration import SPARK_PROVIDERS
from lineagestore.checkpoint.model import Checkpoint
from lineagestore.checkpoint.progress import NO_PROGRESS, Progress
from lineagestore.checkpoint.spark_files import (
    PROVIDER_KEY,
    SHUFFLE_PARTITIONS,
    operator_kind,
    restated_conf,
    rewrite_operation,
)
from lineagestore.jvm import JvmTools

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
    current = cp.current_partitions()
    progress.start("inspect", len(cp.stores))
    for s in cp.stores:
        r = tools.inspect_store(s, s.commit_log(), current.get(s.operator_id, 0))
        r["path"] = s.path
        mark_damage(r)
        reports.append(r)
        progress.step(s.path)
    progress.finish()
    totals = {k: sum(r["totals"][k] for r in reports) for k in TOTAL_KEYS}
    return {
        # damage seen on the way, one entry per finding: the summary and the exit code (1) come from here
        "problems": inspect_problems(reports),
        # damage no retained committed batch needs (verify does not read it either): named, exit code 0
        "damageNotNeeded": [{"store": r["path"], **d} for r in reports for d in r.get("damageNotNeeded", [])],
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
        "rewrites": state_rewrites(tools, cp, reports),
        "totals": totals,
        "notes": cp.notes,
    }


def inspect_problems(reports: list[dict]) -> list[dict]:
    """Unreadable files a retained committed batch needs, commit-log/lineage conflicts and such snapshots
    whose blobs are gone, per store (the JVM judges what is needed as verify does)."""
    out = []
    for r in reports:
        for msg in r["errors"]:
            out.append({"store": r["path"], "kind": "error", "message": msg})
        for msg in r["conflicts"]:
            out.append({"store": r["path"], "kind": "conflict", "message": msg})
        for snap in r["snapshots"]:
            if snap.get("missingBlobs") and snap.get("needed", True):
                zip_name = f"{snap['version']}_{snap['uniqueId']}.zip"
                out.append(
                    {
                        "store": r["path"],
                        "kind": "missing blobs",
                        "message": f"{zip_name} references missing blobs: " + ", ".join(snap["missingBlobs"]),
                    }
                )
    return out


def mark_damage(store: dict) -> None:
    """Give every checkpoint of a store report its ``damaged`` files: ``{"file", "needed"}`` per unreadable
    delta header or snapshot index, and per snapshot whose blobs are gone. ``needed`` is the JVM's judgement
    (a retained committed batch needs it: an error; else a note), read from where the JVM put it: a damaged
    file it lists under ``damageNotNeeded`` is not needed, any other is; a snapshot carries ``needed``."""
    not_needed = {(d["version"], d["uniqueId"], d["file"]) for d in store.get("damageNotNeeded", [])}
    snapshots = {(s["version"], s["uniqueId"]): s for s in store["snapshots"]}
    for c in store["checkpoints"]:
        v, uid = c["version"], c["uniqueId"]
        damaged = []
        if c.get("error"):  # the delta's header (its lineage) cannot be read
            delta = f"{v}_{uid}.delta"
            damaged.append({"file": delta, "needed": (v, uid, delta) not in not_needed})
        snap = snapshots.get((v, uid))
        if snap and (snap.get("error") or snap.get("missingBlobs")):
            zip_name = f"{v}_{uid}.zip"
            needed = (v, uid, zip_name) not in not_needed if snap.get("error") else snap.get("needed", True)
            damaged.append({"file": zip_name, "needed": needed})
        c["damaged"] = damaged


def state_rewrites(tools: JvmTools, cp: Checkpoint, reports: list[dict]) -> list[dict]:
    """The batches that rewrote the whole state (a ``repartition`` or a ``migrate``: docs/repartition.md),
    oldest first. Such a batch restates the previous batch's offsets and commits stores that start afresh
    (``freshStart``: the lineage starts from the empty state there, which a running query never writes); its
    offset entry says what changed: the partition count (``oldPartitions`` -> ``newPartitions``) or, for a
    migrate, the provider (``fromProvider``, the one the previous entry records; Spark's default when it
    records none). A fresh start whose offset entries do not tell is reported with ``kind`` "fresh start"."""
    batches = sorted(
        {
            c["batchId"]
            for r in reports
            for c in r["checkpoints"]
            if c.get("freshStart") and c["status"] == "committed" and c["batchId"] is not None
        }
    )
    out = []
    for b in batches:
        confs = restated_conf(tools, cp.uri, b)
        old, new = confs if confs is not None else ({}, {})
        old_provider = old.get(PROVIDER_KEY, SPARK_PROVIDERS[1])  # Spark's default when none is recorded
        kind = rewrite_operation(tools, cp.uri, b)  # the one decision of what a rewrite batch is
        migrated = kind == "migrate"
        old_n, new_n = old.get(SHUFFLE_PARTITIONS), new.get(SHUFFLE_PARTITIONS)
        out.append(
            {
                "batch": b,
                "version": b + 1,
                "kind": kind or "fresh start",
                "oldPartitions": int(old_n) if old_n is not None else None,
                "newPartitions": int(new_n) if new_n is not None else None,
                "fromProvider": old_provider if migrated else None,
            }
        )
    return out

"""``lineagestore inspect``: what every store of a checkpoint holds, as text or JSON; on an adjunct table's
path, the table's report (:mod:`.adjunct_table`)."""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import Any

from lineagestore._units import human_bytes
from lineagestore.cli import adjunct_table
from lineagestore.cli.common import EXIT_OK, EXIT_PROBLEMS, Verb, emit
from lineagestore.cli.render import RECOVERY_DOC, Page, keep, relative, rewrite_text, short_id, size


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory or URI")
    p.add_argument("--json", action="store_true", help="print the full report as JSON (for scripts)")
    p.add_argument(
        "--plot",
        metavar="OUT.png",
        help="draw the lineage of every store into this image (matplotlib), damaged files and the batches "
        "a repartition or migrate rewrote marked",
    )


def _precheck(args: argparse.Namespace) -> None:
    if args.plot:
        from lineagestore.cli.plot import require_matplotlib

        require_matplotlib()


def run(args: argparse.Namespace, tools: Any, progress: Any) -> int:
    from lineagestore import checkpoint

    uri = checkpoint.to_uri(args.checkpoint)
    top = tools.list(uri) or []  # the listing load starts with: an unreachable store fails as it would there
    if any(e["name"] == "_adjunct" and e["dir"] for e in top):  # an adjunct table (docs/adjunct-tables.md)
        return adjunct_table.run(args, tools, progress)
    cp = checkpoint.load(tools, args.checkpoint)
    report = checkpoint.inspect(tools, cp, progress)
    if args.plot:
        from lineagestore.cli.plot import plot_lineage

        panels = plot_lineage(report, args.plot)
        print(f"wrote {args.plot} ({panels} stores)", file=sys.stderr)
    emit(args, report, render)
    return EXIT_PROBLEMS if report["problems"] else EXIT_OK


def render(r: dict, width: int | None = None) -> str:
    page = Page(width)
    uri = r.get("uri")
    log = r["commitLog"]
    page.field("checkpoint", r["checkpoint"], 13)
    page.field("query id", r["queryId"] or "(none)", 13)
    page.field(
        "commit log",
        (
            f"batches {log['first']}..{log['last']} ({log['batches']} committed)"
            if log["batches"]
            else "no committed batch"
        )
        + (f"; uncommitted batches {log['uncommitted']}" if log["uncommitted"] else ""),
        13,
    )
    for op in r["operators"]:
        kind = op.get("kind") or "(no state metadata: kind unknown)"
        page.field(
            f"operator {op['operatorId']}",
            f"{kind}, {op['partitions']} partitions x {len(op['storeNames'])} store(s): "
            + ", ".join(op["storeNames"]),
            13,
        )
    for rw in r.get("rewrites", []):
        batch = keep(f"batch {rw['batch']}")
        page.field("rewritten", f"{batch} (state version {rw['version']}): {keep(rewrite_text(rw))}", 13)
    page.line()
    header = ["store", "head", "versions", "attempts", "snapshots", "lag", "deltas", "zips", "blobs", "shared",
              "unique", "orphan blobs"]  # fmt: skip
    rows = []
    for s in r["stores"]:
        t = s["totals"]
        versions = sorted({c["version"] for c in s["checkpoints"]})
        n_attempts = len(s["checkpoints"])
        extra = []
        if t["orphanAttempts"]:
            extra.append(f"{t['orphanAttempts']} orphan")
        if t["pendingAttempts"]:
            extra.append(f"{t['pendingAttempts']} pending")
        rows.append(
            [
                s["path"],
                short_id(s["head"]) if s["head"] else "-",
                f"{versions[0]}..{versions[-1]}" if versions else "-",
                f"{n_attempts}" + (f" ({', '.join(extra)})" if extra else ""),
                str(t["snapshots"]),
                "-" if s.get("snapshotLag") is None else str(s["snapshotLag"]),
                size(t["deltaBytes"]),
                size(t["snapshotBytes"]),
                f"{t['blobs']} / {size(t['blobBytes'])}",
                f"{t['sharedBlobs']} / {size(t['sharedBytes'])}",
                f"{t['uniqueBlobs']} / {size(t['uniqueBytes'])}",
                f"{t['orphanBlobs']} / {size(t['orphanBlobBytes'])}",
            ]
        )
    page.table(header, rows)
    t = r["totals"]
    page.line(
        f"total: {t['deltas']} deltas {size(t['deltaBytes'])}, {t['snapshots']} snapshots "
        f"{size(t['snapshotBytes'])}, {t['blobs']} blobs {size(t['blobBytes'])} (shared by several snapshots "
        f"{size(t['sharedBytes'])}, by one {size(t['uniqueBytes'])}, by none {size(t['orphanBlobBytes'])}); "
        f"{t['orphanAttempts']} orphan attempts {size(t['orphanAttemptBytes'])}"
    )
    problems = r.get("problems", [])
    if problems:
        stores = sorted({p["store"] for p in problems})
        kinds = sorted({p["kind"] for p in problems})
        page.line(
            f"PROBLEMS: {len(problems)} ({', '.join(kinds)}) in {len(stores)} store(s): {', '.join(stores)}; "
            f"details below. Run {keep('`lineagestore verify')} {r['checkpoint']}` for the batches they break, "
            f"and see {RECOVERY_DOC} for what to do"
        )
    for s in r["stores"]:
        page.line()
        page.line(
            f"{s['path']}  (operator {s['operatorId']}, partition {s['partitionId']}, store {s['storeName']})"
        )
        chain = [
            short_id(f"{p['version']}_{p['uniqueId']}") + (keep(" [snapshot]") if p["snapshot"] else "")
            for p in s["chosenPath"]
            if p["delta"] or p["snapshot"]
        ]
        page.field("committed path", " <- ".join(chain) if chain else "(no files)", 16, indent="  ")
        by_version: dict[int, list[dict]] = {}
        for c in s["checkpoints"]:
            by_version.setdefault(c["version"], []).append(c)
        for v, attempts in sorted(by_version.items()):
            if len(attempts) < 2 and attempts[0]["status"] == "committed":
                continue
            chosen = [c for c in attempts if c["status"] == "committed"]
            others = [c for c in attempts if c["status"] != "committed"]
            desc = ", ".join(
                keep(
                    f"{short_id(str(v) + '_' + c['uniqueId'])} ({c['status']}: "
                    + "+".join(k for k in ("delta", "snapshot") if c[k])
                    + ")"
                )
                for c in others
            )
            if chosen:
                batch = chosen[0]["batchId"]
                who = f"batch {batch}" if batch is not None else "the lineage"
                page.line(
                    f"{keep(f'version {v}: {who} chose')} {short_id(str(v) + '_' + chosen[0]['uniqueId'])} "
                    f"over {desc}",
                    indent="  ",
                )
            else:
                page.line(f"{keep(f'version {v}:')} {desc}", indent="  ")
        orphans = [b for b in s["blobs"] if b["references"] == 0]
        if orphans:
            items = [
                f"shared/{b['name']} " + keep(f"({human_bytes(b['bytes'])}, {b['ageMs'] // 1000}s old)")
                for b in orphans
            ]
            page.field("orphan blobs", ", ".join(items), 16, indent="  ")
        for snap in s["snapshots"]:
            if snap.get("missingBlobs"):
                page.line(
                    f"MISSING blobs of {snap['version']}_{snap['uniqueId'][:8]}.zip: "
                    + ", ".join(snap["missingBlobs"]),
                    indent="  ",
                )
        for msg in s["conflicts"]:
            page.line(f"CONFLICT: {relative(msg, uri)}", indent="  ")
        for msg in s["errors"]:
            page.line(f"ERROR: {relative(msg, uri)}", indent="  ")
        if s["otherFiles"]:
            page.field("other files", ", ".join(s["otherFiles"]), 16, indent="  ")
    for d in r.get("damageNotNeeded", []):
        page.line(
            f"note: {d['store']}/{d['file']} is damaged, but no retained committed batch needs it "
            f"({_why_not_needed(d)}): {relative(d['error'], uri)}"
        )
    for note in r.get("notes", []):
        page.line(f"note: {relative(note, uri)}")
    return page.text()


def _why_not_needed(d: dict) -> str:
    """Why a damaged file is no problem, and what gc does with it (RetentionPlanner's rules)."""
    v = d["version"]
    if d["status"] == "committed":  # below what retention holds: a clean-up removed its base
        return "below what retention holds; the next gc deletes it"
    if d["status"] == "pending":
        return "an attempt newer than the last committed batch; a rerun of the batch writes its own"
    return f"an attempt no committed batch chose; gc deletes it once version {v} is older than the retention window"


VERB = Verb(
    name="inspect",
    help="operators, partitions, stores, versions, lineage, attempts, snapshots, sizes, orphans",
    description=textwrap.dedent(
        """\
            Describe a checkpoint: for every state store (operator, partition, store name) the versions it
            holds, the chain of checkpoints the commit log chose (the committed lineage) and the other attempts
            of a batch beside it, the snapshots and the shared SST blobs they reference, and sizes: bytes of
            blobs shared by several snapshots versus referenced by one, orphans (blobs no snapshot references,
            attempts outside the committed lineage). Reads delta headers and snapshot indexes only."""
    ),
    epilog=textwrap.dedent(
        """\
            examples:
              lineagestore inspect /data/checkpoints/clicks
              lineagestore inspect /data/checkpoints/clicks --json > clicks.json
              lineagestore inspect /data/checkpoints/clicks --plot clicks-lineage.png

            Statuses: committed (on the lineage the commit log chose), orphan (another attempt of a committed
            version: a retried task or batch), pending (newer than the last committed batch: a batch in
            progress or one that failed before Spark committed it), unknown (below what the commit log and the
            remaining delta headers tell)."""
    ),
    arguments=_arguments,
    run=run,
    short_lived=True,  # reads headers and indexes only: no use for C2-compiled code
    precheck=_precheck,
)

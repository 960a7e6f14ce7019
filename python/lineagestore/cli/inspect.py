"""``lineagestore inspect``: what every store of a checkpoint holds, as text or JSON; on an adjunct table's
path, the table's report (:mod:`.adjunct_table`)."""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import Any

from lineagestore._units import human_bytes as hb
from lineagestore.cli import adjunct_table
from lineagestore.cli.common import EXIT_OK, EXIT_PROBLEMS, Verb, emit
from lineagestore.cli.render import RECOVERY_DOC, short_id, table


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory or URI")
    p.add_argument("--json", action="store_true", help="print the full report as JSON (for scripts)")
    p.add_argument(
        "--plot", metavar="OUT.png", help="draw the lineage of every store into this image (matplotlib)"
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


def render(r: dict) -> str:
    log = r["commitLog"]
    out = [
        f"checkpoint   {r['checkpoint']}",
        f"query id     {r['queryId'] or '(none)'}",
        "commit log   "
        + (
            f"batches {log['first']}..{log['last']} ({log['batches']} committed)"
            if log["batches"]
            else "no committed batch"
        )
        + (f"; uncommitted batches {log['uncommitted']}" if log["uncommitted"] else ""),
    ]
    for op in r["operators"]:
        kind = op.get("kind") or "(no state metadata: kind unknown)"
        out.append(
            f"operator {op['operatorId']}   {kind}, {op['partitions']} partitions x {len(op['storeNames'])} "
            "store(s): " + ", ".join(op["storeNames"])
        )
    out.append("")
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
                hb(t["deltaBytes"]),
                hb(t["snapshotBytes"]),
                f"{t['blobs']} / {hb(t['blobBytes'])}",
                f"{t['sharedBlobs']} / {hb(t['sharedBytes'])}",
                f"{t['uniqueBlobs']} / {hb(t['uniqueBytes'])}",
                f"{t['orphanBlobs']} / {hb(t['orphanBlobBytes'])}",
            ]
        )
    out.append(table(header, rows))
    t = r["totals"]
    out.append(
        f"total: {t['deltas']} deltas {hb(t['deltaBytes'])}, {t['snapshots']} snapshots {hb(t['snapshotBytes'])}, "
        f"{t['blobs']} blobs {hb(t['blobBytes'])} (shared by several snapshots {hb(t['sharedBytes'])}, "
        f"by one {hb(t['uniqueBytes'])}, by none {hb(t['orphanBlobBytes'])}); "
        f"{t['orphanAttempts']} orphan attempts {hb(t['orphanAttemptBytes'])}"
    )
    problems = r.get("problems", [])
    if problems:
        stores = sorted({p["store"] for p in problems})
        kinds = sorted({p["kind"] for p in problems})
        out.append(
            f"PROBLEMS: {len(problems)} ({', '.join(kinds)}) in {len(stores)} store(s): {', '.join(stores)}; "
            f"details below. Run `lineagestore verify {r['checkpoint']}` for the batches they break, and "
            f"see {RECOVERY_DOC} for what to do"
        )
    for s in r["stores"]:
        out.append("")
        out.append(
            f"{s['path']}  (operator {s['operatorId']}, partition {s['partitionId']}, store {s['storeName']})"
        )
        chain = [
            short_id(f"{p['version']}_{p['uniqueId']}") + (" [snapshot]" if p["snapshot"] else "")
            for p in s["chosenPath"]
            if p["delta"] or p["snapshot"]
        ]
        out.append("  committed path  " + (" <- ".join(chain) if chain else "(no files)"))
        by_version: dict[int, list[dict]] = {}
        for c in s["checkpoints"]:
            by_version.setdefault(c["version"], []).append(c)
        for v, attempts in sorted(by_version.items()):
            if len(attempts) < 2 and attempts[0]["status"] == "committed":
                continue
            chosen = [c for c in attempts if c["status"] == "committed"]
            others = [c for c in attempts if c["status"] != "committed"]
            desc = ", ".join(
                f"{short_id(str(v) + '_' + c['uniqueId'])} ({c['status']}: "
                + "+".join(k for k in ("delta", "snapshot") if c[k])
                + ")"
                for c in others
            )
            if chosen:
                batch = chosen[0]["batchId"]
                who = f"batch {batch}" if batch is not None else "the lineage"
                out.append(
                    f"  version {v}: {who} chose {short_id(str(v) + '_' + chosen[0]['uniqueId'])} over {desc}"
                )
            else:
                out.append(f"  version {v}: {desc}")
        orphans = [b for b in s["blobs"] if b["references"] == 0]
        if orphans:
            out.append(
                "  orphan blobs    "
                + ", ".join(
                    f"shared/{b['name']} ({hb(b['bytes'])}, {b['ageMs'] // 1000}s old)" for b in orphans
                )
            )
        for snap in s["snapshots"]:
            if snap.get("missingBlobs"):
                out.append(
                    f"  MISSING blobs of {snap['version']}_{snap['uniqueId'][:8]}.zip: "
                    + ", ".join(snap["missingBlobs"])
                )
        for msg in s["conflicts"]:
            out.append(f"  CONFLICT: {msg}")
        for msg in s["errors"]:
            out.append(f"  ERROR: {msg}")
        if s["otherFiles"]:
            out.append("  other files     " + ", ".join(s["otherFiles"]))
    for note in r.get("notes", []):
        out.append(f"note: {note}")
    return "\n".join(out)


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

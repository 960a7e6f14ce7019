"""Text rendering of the ``lineagestore`` commands' reports (``inspect``, ``verify``, ``gc``, ``clone``,
``repartition``); tables are drawn by ``rich`` on a terminal and stay plain text otherwise.

Each ``render_<command>`` takes the JSON-able report the command computed (what ``--json`` prints) and returns
the human-readable text; ``lineagestore.cli`` parses the arguments and runs the commands.
"""

from __future__ import annotations

import io
import shutil
import sys
import textwrap
from datetime import UTC, datetime

# the documented procedure for a damaged state file (named by inspect, verify and the provider's errors)
RECOVERY_DOC = "docs/operations.md#restarting-from-an-older-checkpoint"


def _short(cid: str) -> str:
    version, _, uid = cid.partition("_")
    return f"{version}_{uid[:8]}"


def render_adjunct_table(t: dict) -> str:
    """``lineagestore inspect`` on an adjunct table: its versions and its store's size."""
    from lineagestore.checkpoint import human_bytes as hb

    st = t["store"]
    vs = t["versions"]
    out = [
        f"adjunct table  {t['table']}"
        + (f" ({t['partitions']} partitions)" if t.get("partitions", 1) > 1 else ""),
        "versions       "
        + (f"{vs[0]['version']}..{vs[-1]['version']} ({len(vs)} kept)" if vs else "none committed yet"),
        f"size           {hb(st['totalBytes'])}: {st['deltas']} deltas ({hb(st['deltaBytes'])}), "
        f"{st['snapshots']} snapshots ({hb(st['snapshotBytes'])}), {st['sharedBlobs']} shared files "
        f"({hb(st['sharedBytes'])})",
    ]
    for v in vs:
        out.append(f"  version {v['version']:>6}  {v['uniqueId']}  maintain batch {v['sourceBatchId']}")
    if t["uncommitted"]:
        out.append(
            "uncommitted    " + ", ".join(t["uncommitted"]) + " (a maintain batch that did not finish)"
        )
    replicas = t.get("replicas") or []
    out.append(
        f"replicas       {len(replicas)}" + ("" if replicas else " (no lookup has loaded the table yet)")
    )
    for r in replicas:
        loaded = datetime.fromtimestamp(r["loadedAtMs"] / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
        behind = "at the latest version" if r["lag"] == 0 else f"{r['lag']} version(s) behind"
        name = r["replica"] + (f" partition {r['partition']}" if "partition" in r else "")
        out.append(
            f"  {name:<24} version {r['version']:>6}  {behind}  (loaded {loaded} UTC; so far "
            f"{r['deltasReplayed']} deltas replayed, {hb(r['bytesDownloaded'])} of snapshots downloaded)"
        )
    return "\n".join(out)


def render_inspect(r: dict) -> str:
    from lineagestore.checkpoint import human_bytes as hb

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
                _short(s["head"]) if s["head"] else "-",
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
    out.append(_table(header, rows))
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
            _short(f"{p['version']}_{p['uniqueId']}") + (" [snapshot]" if p["snapshot"] else "")
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
                f"{_short(str(v) + '_' + c['uniqueId'])} ({c['status']}: "
                + "+".join(k for k in ("delta", "snapshot") if c[k])
                + ")"
                for c in others
            )
            if chosen:
                batch = chosen[0]["batchId"]
                who = f"batch {batch}" if batch is not None else "the lineage"
                out.append(
                    f"  version {v}: {who} chose {_short(str(v) + '_' + chosen[0]['uniqueId'])} over {desc}"
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


def _table(header: list[str], rows: list[list[str]]) -> str:
    """Columns aligned: drawn by ``rich`` to fit the terminal when stdout is one, else plain text (stable for
    scripts that read it: columns separated by two spaces, no box, no colour)."""
    from lineagestore.progress import draws_on

    if draws_on(sys.stdout):
        return _rich_table(header, rows)
    return _plain_table(header, rows)


def _rich_table(header: list[str], rows: list[list[str]]) -> str:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for h in header:
        table.add_column(h, overflow="fold")
    for row in rows:
        table.add_row(*row)
    # rendered to text here (the render_* functions return strings); the width is the terminal's
    console = Console(file=io.StringIO(), width=shutil.get_terminal_size().columns, force_terminal=True)
    console.print(table)
    return console.file.getvalue().rstrip("\n")


def _plain_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(x) for x in col) for col in zip(header, *rows, strict=False)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def _batches(bs: list[int]) -> str:
    if not bs:
        return "none"
    if bs == list(range(bs[0], bs[-1] + 1)):
        return f"{bs[0]}..{bs[-1]}" if len(bs) > 1 else str(bs[0])
    return ", ".join(map(str, bs))


def render_verify(r: dict) -> str:
    from lineagestore.checkpoint import human_bytes as hb

    out = [
        f"verify {r['checkpoint']}: batches {_batches(r['batches'])} in {r['stores']} stores"
        + (
            f" (older batches {_batches(r['skippedBatches'])} skipped: outside retention)"
            if r["skippedBatches"]
            else ""
        )  # fmt: skip
    ]
    for s in r["results"]:
        n = len(s["checked"])
        status = "ok  " if s["ok"] else "FAIL"
        bad = sum(1 for c in s["checked"] if not c["ok"])
        out.append(
            f"  {status} {s['path']}: {n - bad}/{n} checkpoints load" + (f" ({bad} do not)" if bad else "")
        )
        for c in s["checked"]:
            if c.get("detourAround"):
                out.append(
                    f"       batch {c['batchId']} loads only by a detour around {', '.join(c['detourAround'])}"
                )
    out.append(f"{r['filesVerified']} files verified ({hb(r['bytesVerified'])})")
    if r["problems"]:
        out.append("")
        out.append(f"{len(r['problems'])} problem(s):")
        for p in r["problems"]:
            out.append(f"  {p['file']}")
            if p.get("via"):
                out.append(f"      (read for {p['via']})")
            out.append(textwrap.indent(textwrap.fill(p["error"], 104), "      "))
            if p["batches"]:
                out.append(f"      needed by batch(es) {_batches(p['batches'])}")
        out.append("result: PROBLEMS FOUND")
        out.append(
            f"what to do: {RECOVERY_DOC} (restore the files from a backup, or restart from an older batch)"
        )
    else:
        out.append("result: OK")
    return "\n".join(out)


def _duration_text(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def render_gc(r: dict) -> str:
    from lineagestore.checkpoint import human_bytes as hb

    mode = "deleting" if r["applied"] else "dry run, nothing is deleted (add --apply to delete)"
    out = [
        f"gc {r['checkpoint']}: {mode}; keeping the newest {r['retain']} versions, "
        f"unreferenced blobs kept while younger than {_duration_text(r['graceMs'])}"
    ]
    verb = "deleted" if r["applied"] else "delete"
    for s in r["stores"]:
        if s["refused"]:
            out.append(f"{s['path']}: nothing to do: {s['refused']}")
            continue
        base = s["snapshotBase"]
        base = f"snapshot {_short(base)}" if base and not base.startswith("0 ") else "the empty state"
        out.append(
            f"{s['path']}: head {_short(s['head'])}, oldest retained version {s['oldestRetained']}, "
            f"rebuilt from {base}"
        )
        width = max([len(d["file"]) for d in s["delete"] + s["keptYoungOrphans"]] + [10])
        for d in s["delete"]:
            out.append(f"  {verb}  {d['file'].ljust(width)}  {hb(d['bytes']):>10}  {d['reason']}")
        for d in s["keptYoungOrphans"]:
            out.append(f"  keep    {d['file'].ljust(width)}  {hb(d['bytes']):>10}  {d['reason']}")
        if not s["delete"]:
            out.append("  nothing to delete")
        for w in s["warnings"]:
            out.append(f"  warning: {w}")
        for e in s["errors"]:
            out.append(f"  ERROR: {e}")
    total = f"{r['deleteFiles']} files ({hb(r['deleteBytes'])})"
    kept = f"{r['keptFiles']} files ({hb(r['keptBytes'])}) kept"
    out.append(f"total: {'deleted' if r['applied'] else 'would delete'} {total}; {kept}")
    if r["errors"]:
        out.append(f"{len(r['errors'])} file(s) could not be deleted")
    return "\n".join(out)


def render_clone(r: dict) -> str:
    from lineagestore.checkpoint import human_bytes as hb

    qid = (
        f"new query id {r['queryId']}"
        if r["newQueryId"]
        else f"query id {r['queryId']} (the source's: do not run both in one SparkSession at once)"
    )
    return (
        f"cloned {r['source']} -> {r['destination']}: {r['files']} files, {hb(r['bytes'])} "
        f"({r['linked']} hard-linked, {r.get('serverCopied', 0)} copied server-side, {r['copied']} copied); "
        f"{qid}\n"
        f"check it with: lineagestore verify {r['destination']}"
    )


def render_repartition(r: dict) -> str:
    if "removed" in r:
        return f"removed {r['removed']}: the checkpoint is back at its last committed batch"
    head = (
        f"{r['checkpoint']}: batch {r['lastBatch']}'s state, {r['oldPartitions']} -> {r['newPartitions']} "
        f"partitions, recorded as batch {r['newBatch']} (store version {r['storeVersion']})"
        + (" (finishing an interrupted repartition)" if r["resume"] else "")
    )
    lines = [head]
    if r.get("dryRun"):
        lines.append("dry run: would write")
        lines += [f"  {w}" for w in r["writes"]]
    else:
        lines.append(f"moved {r.get('rowsMoved', 0)} rows in {len(r['stores'])} stores; restart the query")
    return "\n".join(lines)

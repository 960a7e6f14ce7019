"""``lineagestore gc``: what clean-up would delete and why (deleting only with ``--apply``), as text or JSON."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from lineagestore._units import age_text, duration_text
from lineagestore.cli.common import EXIT_OK, EXIT_PROBLEMS, Verb, duration, emit, positive_int
from lineagestore.cli.render import Page, keep, short_id, size


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory or URI")
    p.add_argument(
        "--retain",
        type=positive_int,
        default=100,
        metavar="N",
        help="versions to keep loadable, like spark.sql.streaming.minBatchesToRetain (default: 100)",
    )
    p.add_argument(
        "--grace",
        type=duration,
        default="6h",
        metavar="DURATION",
        help="unreferenced blobs younger than this are kept, e.g. 30m, 6h, 2d (default: 6h, like "
        "spark.sql.streaming.stateStore.lineagestore.orphanGracePeriodMs)",
    )
    p.add_argument("--apply", action="store_true", help="delete the files listed (default: only show them)")
    p.add_argument("--json", action="store_true", help="print the plan (and what was deleted) as JSON")


def run(args: argparse.Namespace, tools: Any, progress: Any) -> int:
    from lineagestore import checkpoint

    cp = checkpoint.load(tools, args.checkpoint)
    result = checkpoint.gc(tools, cp, args.retain, args.grace, args.apply, progress)
    emit(args, result, render)
    return EXIT_PROBLEMS if result["errors"] else EXIT_OK


def render(r: dict, width: int | None = None) -> str:
    page = Page(width)
    mode = "deleting" if r["applied"] else keep("dry run,") + " nothing is deleted (add --apply to delete)"
    page.line(
        f"gc {r['checkpoint']}: {mode}; keeping the newest {r['retain']} versions, "
        f"unreferenced blobs kept while younger than {duration_text(r['graceMs'])}"
    )
    verb = "deleted" if r["applied"] else "delete"
    for s in r["stores"]:
        if s["refused"]:
            page.line(f"{s['path']}: nothing to do: {refusal_text(s['refused'], s['path'])}")
            continue
        base = s["snapshotBase"]
        base = f"snapshot {short_id(base)}" if base and not base.startswith("0 ") else "the empty state"
        page.line(
            f"{s['path']}: head {short_id(s['head'])}, oldest retained version {s['oldestRetained']}, "
            f"rebuilt from {base}"
        )
        # each file on a line of its own with its size, the reason under it: a file name is never broken
        files = [(verb, d) for d in s["delete"]] + [("keep", d) for d in s["keptYoungOrphans"]]
        name_width = max([len(d["file"]) for _, d in files] + [10])
        for what, d in files:
            page.line(f"{what:<6}  {d['file'].ljust(name_width)}  {size(d['bytes']):>10}", indent="  ")
            page.line(reason_text(d["reason"]), indent="          ", hanging="")
        if not s["delete"]:
            page.line("nothing to delete", indent="  ")
        for w in s["warnings"]:
            page.line(f"warning: {warning_text(w)}", indent="  ")
        for e in s["errors"]:
            page.line(f"ERROR: {e}", indent="  ")
    total = f"{r['deleteFiles']} files ({size(r['deleteBytes'])})"
    kept = f"{r['keptFiles']} files ({size(r['keptBytes'])}) kept"
    page.line(keep(f"total: {'deleted' if r['applied'] else 'would delete'}") + f" {total}; {kept}")
    if r["errors"]:
        page.line(f"{len(r['errors'])} file(s) could not be deleted")
    return page.text()


def reason_text(reason: dict) -> str:
    """The sentence for a file's reason, from the facts the JVM returns (``kind`` and its fields:
    docs/operations.md#gc); the phrases a reader searches for are kept whole."""
    kind = reason["kind"]
    outside = keep("attempt outside the committed lineage")
    if kind == "retiredStore":
        return (
            f"partition {reason['partitionId']} is retired: operator {reason['operatorId']} has "
            f"{reason['partitions']} partitions in batch {reason['batch']} and no retained batch names this "
            f"store (the last was {reason['lastBatch']})"
        )
    if kind == "beforeFreshStart":
        return (
            f"before the repartition at version {reason['base']}, whose delta holds the whole state after a "
            f"repartition and rebuilds the retained {_window(reason)}"
        )
    if kind == "belowSnapshotBase":
        what = "committed," if reason["committed"] else f"{outside},"
        return f"{what} below version {reason['base']} whose snapshot rebuilds the retained {_window(reason)}"
    if kind == "outsideLineage":
        return f"{reason['status']} {outside}, older than the retained {_window(reason)}"
    if kind == "ofDeletedSnapshots":
        return "referenced only by deleted snapshots: " + ", ".join(reason["snapshots"])
    age, grace = keep(age_text(reason.get("ageMs", 0)) + " old"), age_text(reason.get("graceMs", 0))
    if kind == "unreferenced":
        return f"{keep('referenced by no snapshot')}, {age} (older than the {keep(grace + ' grace period')})"
    if kind == "unreferencedYoung":
        return (
            f"{keep('referenced by no snapshot')} but only {age} ({keep('grace period ' + grace)}): it may "
            "belong to a snapshot upload in progress"
        )
    if kind == "unfinishedWrite":
        of = f" of {reason['target']}" if reason.get("target") else ""
        return (
            f"an unfinished write{of}, {age} (older than the {keep(grace + ' grace period')}): its writer died "
            "or gave it up"
        )
    return _unknown(reason)


def refusal_text(refused: dict, path: str) -> str:
    """Why clean-up of the store at ``path`` deletes nothing, from the JVM's ``kind`` and facts."""
    kind = refused["kind"]
    if kind == "noHead":
        return "Spark's commit log names no checkpoint of this store"
    if kind == "inconsistent":
        return "the committed lineage is inconsistent: " + "; ".join(refused["conflicts"])
    if kind == "headMissing":
        return (
            f"the newest committed checkpoint {refused['head']} has no file here ({path}/{refused['file']}); "
            "run verify"
        )
    return _unknown(refused)


def warning_text(warning: dict) -> str:
    """What clean-up of a store could not read (so it deletes less), from the JVM's ``kind`` and facts; the
    ``error`` is the failure's own message."""
    kind = warning["kind"]
    if kind == "lineageUnreadable":
        return warning["error"]  # the unreadable header's own message, naming it
    if kind == "expiredIndexUnreadable":
        return (
            f"cannot read {warning['snapshot']} before deleting it ({warning['error']}): its blobs are left to "
            "the orphan sweep"
        )
    if kind == "retainedIndexUnreadable":
        return (
            f"no shared blob is deleted: the retained snapshot {warning['snapshot']} is unreadable "
            f"({warning['error']})"
        )
    return _unknown(warning)


def _unknown(data: dict) -> str:
    """A ``kind`` this version does not know (a newer jar): its facts as they came."""
    facts = ", ".join(f"{k} {v}" for k, v in data.items() if k != "kind")
    return f"{data['kind']}: {facts}" if facts else data["kind"]


def _window(reason: dict) -> str:
    """The retained versions, ``version 5`` or ``versions 3..5``."""
    oldest, head = reason["oldestRetained"], reason["head"]
    return keep(f"version {head}" if oldest == head else f"versions {oldest}..{head}")


VERB = Verb(
    name="gc",
    help="what clean-up would delete and why; deletes only with --apply",
    description=textwrap.dedent(
        """\
            Plan the clean-up of every store with the store's own planners: keep the newest N versions and
            what rebuilds the oldest of them (the newest committed snapshot at or below it and the deltas
            after it); delete older files, attempts outside the committed lineage once they left the window,
            the shared blobs only deleted snapshots referenced, and blobs no snapshot references once older
            than the grace period (younger ones may belong to an upload in progress). A dry run unless
            --apply; deletes zips first, then blobs, then deltas. Spark's own commit log and offsets are
            left alone (Spark purges them itself)."""
    ),
    epilog=textwrap.dedent(
        """\
            examples:
              lineagestore gc /data/checkpoints/clicks                  # dry run, keeps the newest 100
              lineagestore gc /data/checkpoints/clicks --retain 20 --grace 1h
              lineagestore gc /data/checkpoints/clicks --retain 20 --apply

            Use the query's spark.sql.streaming.minBatchesToRetain as --retain (Spark's default is 100), so
            every batch Spark may still ask for stays loadable. Stop the query before --apply."""
    ),
    arguments=_arguments,
    run=run,
)

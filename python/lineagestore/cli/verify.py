"""``lineagestore verify``: prove the committed checkpoints load, as text or JSON."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from lineagestore.cli.common import EXIT_OK, EXIT_PROBLEMS, Verb, emit, positive_int
from lineagestore.cli.render import RECOVERY_DOC, Page, batches_text, relative, size


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory or URI")
    p.add_argument(
        "--retain", type=positive_int, metavar="N", help="check only the newest N committed batches"
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace, tools: Any, progress: Any) -> int:
    from lineagestore import checkpoint

    cp = checkpoint.load(tools, args.checkpoint)
    result = checkpoint.verify(tools, cp, args.retain, progress)
    emit(args, result, render)
    return EXIT_OK if result["ok"] else EXIT_PROBLEMS


def render(r: dict, width: int | None = None) -> str:
    page = Page(width)
    uri = r.get("uri")
    page.line(
        f"verify {r['checkpoint']}: batches {batches_text(r['batches'])} in {r['stores']} stores"
        + (
            f" (older batches {batches_text(r['skippedBatches'])} skipped: outside retention)"
            if r["skippedBatches"]
            else ""
        )
    )
    for s in r["results"]:
        n = len(s["checked"])
        status = "ok  " if s["ok"] else "FAIL"
        bad = sum(1 for c in s["checked"] if not c["ok"])
        page.line(
            f"{status} {s['path']}: {n - bad}/{n} checkpoints load" + (f" ({bad} do not)" if bad else ""),
            indent="  ",
            hanging="     ",
        )
        for c in s["checked"]:
            if c.get("detourAround"):
                page.line(
                    f"batch {c['batchId']} loads only by a detour around {', '.join(c['detourAround'])}",
                    indent="       ",
                )
    page.line(f"{r['filesVerified']} files verified ({size(r['bytesVerified'])})")
    if r["problems"]:
        page.line()
        page.line(f"{len(r['problems'])} problem(s):")
        for p in r["problems"]:
            page.line(relative(p["file"], uri), indent="  ")
            if p.get("via"):
                page.line(f"(read for {relative(p['via'], uri)})", indent="      ", hanging="")
            page.line(relative(problem_text(p), uri), indent="      ", hanging="")
            if p["batches"]:
                page.line(f"needed by batch(es) {batches_text(p['batches'])}", indent="      ")
        page.line("result: PROBLEMS FOUND")
        page.line(
            f"what to do: {RECOVERY_DOC} (restore the files from a backup, or restart from an older batch)"
        )
    else:
        page.line("result: OK")
    return page.text()


def problem_text(p: dict) -> str:
    """What is wrong with a problem's file, from the JVM's ``kind`` and facts (docs/operations.md#verify); an
    ``error`` is the failure's own message, naming the file and what to do."""
    kind = p.get("kind", "error")  # a problem found in Python (no committed batch, ...): only its error
    if kind == "error":
        return p["error"]
    if kind == "missing":
        return (
            f"it is missing (and so is {p['snapshot']}), but the commit log says batch {p['batch']} "
            "committed it"
        )
    # a kind this version does not know (a newer jar): its facts as they came
    facts = ", ".join(
        f"{k} {v}" for k, v in p.items() if k not in ("kind", "file", "batches", "via", "store")
    )
    return f"{kind}: {facts}" if facts else kind


VERB = Verb(
    name="verify",
    help="prove the committed checkpoints load: resolve each lineage, read back every file with checksums",
    description=textwrap.dedent(
        """\
            For every committed batch still within retention and every store, resolve the committed
            (version, unique ID) through the lineage from scratch and read back every file that load needs,
            verifying as it reads: delta files (header, records, count, CRC32C), snapshot zips (INDEX checksum,
            store identity, entries) and the CRC32C and identity of every shared blob they reference (an
            SST's RocksDB unique ID, or the SHA-256 of its content; restored into a scratch directory under the
            system temp directory, one store at a time). Each file is read once.
            Prints each problem with the file it concerns and the batches that need it. Damage no retained
            committed batch needs (an orphan attempt) is not read and not a problem."""
    ),
    epilog=textwrap.dedent(
        """\
            examples:
              lineagestore verify /data/checkpoints/clicks
              lineagestore verify /data/checkpoints/clicks --retain 5 --json

            Without --retain: per store, every batch whose checkpoint retention still holds there, as the
            store's own retention decides (what gc removed is skipped, not a problem).
            Exit code 0: all good; 1: problems (listed, with the files named)."""
    ),
    arguments=_arguments,
    run=run,
)

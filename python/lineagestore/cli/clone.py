"""``lineagestore clone``: copy a checkpoint into a new one that shares nothing mutable with it."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from lineagestore.cli.common import EXIT_OK, Verb, emit
from lineagestore.cli.render import Page, keep, size


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", help="checkpoint directory or URI to copy")
    p.add_argument("destination", help="new (or empty) directory or URI")
    p.add_argument(
        "--new-query-id", action="store_true", help="give the copy a new query id in its metadata file"
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace, tools: Any, progress: Any) -> int:
    from lineagestore import checkpoint

    result = checkpoint.clone(tools, args.source, args.destination, args.new_query_id, progress)
    emit(args, result, render)
    return EXIT_OK


def render(r: dict, width: int | None = None) -> str:
    page = Page(width)
    qid = (
        f"new query id {r['queryId']}"
        if r["newQueryId"]
        else f"query id {r['queryId']} (the source's: do not run both in one SparkSession at once)"
    )
    page.line(
        f"cloned {r['source']} -> {r['destination']}: {r['files']} files, {size(r['bytes'])} "
        f"({r['linked']} hard-linked, {r.get('serverCopied', 0)} copied server-side, {r['copied']} copied); "
        f"{qid}"
    )
    page.line(f"check it with: {keep('lineagestore verify')} {r['destination']}")
    return page.text()


VERB = Verb(
    name="clone",
    help="copy a checkpoint into a new one that shares nothing mutable with it",
    description=textwrap.dedent(
        """\
            Copy every file of a checkpoint (metadata, commits, offsets, sources, state) into a new directory,
            so that a query started on the copy continues from the same state without touching the source.
            lineagestore's state files are immutable, so on a local filesystem they are hard-linked (no space,
            no time); everything else is copied. Between two s3a:// locations every file is copied
            server-side (S3 CopyObject): no byte passes through this machine. Across filesystems every file
            is copied through the JVM."""
    ),
    epilog=textwrap.dedent(
        """\
            examples:
              lineagestore clone /data/checkpoints/clicks /data/checkpoints/clicks-copy
              lineagestore clone /data/checkpoints/clicks /data/checkpoints/clicks-copy --new-query-id

            The copy keeps the source's query id, so Spark refuses to run both at once in one SparkSession;
            --new-query-id gives the copy its own. Stop the source query first."""
    ),
    arguments=_arguments,
    run=run,
    locations=("source", "destination"),
    existing=("source",),
)

"""``lineagestore repartition``: change the partition count of a stopped query's state (docs/repartition.md)."""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import Any

from lineagestore.cli import file_sink
from lineagestore.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    SPARK,
    TOOLS,
    Verb,
    add_master_argument,
    emit,
)
from lineagestore.cli.render import Page, job_tasks


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory or URI of a stopped query")
    p.add_argument("--partitions", type=int, metavar="N", help="the new partition count")
    p.add_argument("--dry-run", action="store_true", help="only say what would be written")
    p.add_argument(
        "--undo", action="store_true", help="remove an unfinished repartition's offset entry instead"
    )
    add_master_argument(p, "without it the command's own JVM rewrites the stores on its threads")
    file_sink.add_arguments(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _needs(args: argparse.Namespace) -> str:
    return SPARK if args.master else TOOLS


def run(args: argparse.Namespace, tools: Any, progress: Any) -> int:
    from lineagestore import checkpoint

    if args.undo:
        result = checkpoint.undo(tools, args.checkpoint)
    elif args.partitions is None:
        print("lineagestore repartition: error: give --partitions N (or --undo)", file=sys.stderr)
        return EXIT_USAGE
    else:
        result = checkpoint.repartition(
            tools, args.checkpoint, args.partitions, args.dry_run, progress, **file_sink.options(args)
        )
    emit(args, result, render)
    return EXIT_OK


def render(r: dict, width: int | None = None) -> str:
    page = Page(width)
    if "removed" in r:
        page.line(f"removed {r['removed']}: the checkpoint is back at its last committed batch")
        return page.text()
    if r.get("alreadyDone"):
        page.line(f"{r['checkpoint']} has {r['newPartitions']} partitions already (batch {r['lastBatch']})")
        file_sink.render(page, r, "")
        return page.text()
    page.line(
        f"{r['checkpoint']}: batch {r['lastBatch']}'s state, {r['oldPartitions']} -> {r['newPartitions']} "
        f"partitions, recorded as batch {r['newBatch']} (store version {r['storeVersion']})"
        + (" (finishing an interrupted repartition)" if r["resume"] else "")
    )
    if r.get("dryRun"):
        page.line("dry run: would write")
        for w in r["writes"]:
            page.line(w, indent="  ", hanging="    ")
    else:
        # a store per operator store and partition: 1 operator store into 4 partitions writes 4 stores
        stores = len(r["stores"]) * r["newPartitions"]
        page.line(f"moved {r.get('rowsMoved', 0)} rows into {stores} stores; restart the query")
        tasks = job_tasks(r)
        if tasks:
            page.line(tasks)
        file_sink.render(
            page, r, f"lineagestore repartition {r['checkpoint']} --partitions {r['newPartitions']}"
        )
    return page.text()


VERB = Verb(
    name="repartition",
    help="change the partition count of a stopped query's state (docs/repartition.md)",
    description=textwrap.dedent(
        """\
            Rewrite the state of the last committed batch into N partitions and record it as one more
            batch (offsets/<B+1> with spark.sql.shuffle.partitions=N, then commits/<B+1>), as Spark 4.3's
            own offline repartition does for its provider. Every key lands where Spark's shuffle sends it.
            Nothing already written is changed or deleted; a crash leaves the old checkpoint (plus orphan
            files for gc), and running the command again finishes the job. Stop the query first. A query
            writing through Spark's file sink needs --file-sink: the sink's log gets the new batch's entry
            after the commit (docs/repartition.md, "Spark's file sink")."""
    ),
    epilog=textwrap.dedent(
        """\
            examples:
              lineagestore repartition /data/checkpoints/clicks --partitions 12 --dry-run
              lineagestore repartition /data/checkpoints/clicks --partitions 12
              lineagestore repartition /data/checkpoints/clicks --partitions 12 --file-sink /data/out/clicks
              lineagestore repartition /data/checkpoints/clicks --undo   # drop an unfinished repartition"""
    ),
    arguments=_arguments,
    run=run,
    needs=_needs,
)

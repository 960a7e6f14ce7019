"""``lineagestore migrate``: move a stopped query from Spark's RocksDB or HDFS provider onto lineagestore,
keeping its state. It runs on a SparkSession of its own (local[1], or ``--master``): Spark's providers read the
old state in the tasks of one Spark job."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from lineagestore.cli import file_sink
from lineagestore.cli.common import EXIT_OK, SPARK, Verb, add_master_argument, emit
from lineagestore.cli.render import Page, job_tasks


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory or URI of a stopped query")
    p.add_argument("--partitions", type=int, metavar="N", help="a new partition count (default: keep it)")
    add_master_argument(p, "without it a local[1] session in the command's process")
    file_sink.add_arguments(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _refuse_early(args: argparse.Namespace) -> None:
    """A local checkpoint migrate cannot move (already on lineagestore, nothing committed, another provider)
    is refused from its offset log before Spark starts (seconds); others are checked once Spark runs."""
    from lineagestore.checkpoint.local_files import LocalFiles
    from lineagestore.checkpoint.migration import migratable, migrated_already
    from lineagestore.checkpoint.model import local_path, to_uri

    if local_path(args.checkpoint) is not None:
        uri = to_uri(args.checkpoint)
        if args.file_sink and migrated_already(LocalFiles(), uri) is not None:
            return  # only the file sink's entries are written
        migratable(LocalFiles(), args.checkpoint, uri)


def run(args: argparse.Namespace, spark: Any, progress: Any) -> int:
    from lineagestore import checkpoint

    result = checkpoint.migrate(spark, args.checkpoint, args.partitions, progress, **file_sink.options(args))
    emit(args, result, render)
    return EXIT_OK


def render(r: dict, width: int | None = None) -> str:
    page = Page(width)
    if r.get("alreadyDone"):
        page.line(f"{r['checkpoint']} runs on lineagestore already (batch {r['lastBatch']})")
        file_sink.render(page, r, "")
        return page.text()
    page.line(
        f"{r['checkpoint']}: moved {r['rowsMoved']} rows from {r['from']} to lineagestore "
        f"({r['oldPartitions']} -> {r['newPartitions']} partitions) as batch {r['newBatch']}; "
        "restart the query"
    )
    tasks = job_tasks(r)
    if tasks:
        page.line(tasks)
    file_sink.render(page, r, f"lineagestore migrate {r['checkpoint']}")
    return page.text()


VERB = Verb(
    name="migrate",
    help="move a stopped query from Spark's RocksDB or HDFS provider onto lineagestore, keeping its state",
    description="Rewrite the state of the last committed batch into lineagestore's format (optionally into "
    "N partitions) and record lineagestore as the provider in a new offset log entry, so that the restarted "
    "query runs on lineagestore. Starts a local SparkSession (Spark's providers read their own files). "
    "Stop the query first; see docs/repartition.md. A query writing through Spark's file sink needs "
    "--file-sink (its log gets the new batch's entry after the commit). Spark's output goes to a temporary file (lineagestore-spark-*.log), not the terminal.",
    epilog=textwrap.dedent(
        """\
            examples:
              lineagestore migrate /data/checkpoints/clicks                  # keep the partition count
              lineagestore migrate /data/checkpoints/clicks --partitions 12  # and repartition on the way
              lineagestore migrate /data/checkpoints/clicks --file-sink /data/out/clicks
              lineagestore migrate /data/checkpoints/clicks --json"""
    ),
    arguments=_arguments,
    run=run,
    needs=SPARK,
    precheck=_refuse_early,
)

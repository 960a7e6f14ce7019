"""What ``repartition`` and ``migrate`` share about the query's Spark file sink: the options naming it and the
lines their reports print about it (docs/repartition.md, "Spark's file sink")."""

from __future__ import annotations

import argparse
from typing import Any

from lineagestore.checkpoint.file_sink import COMPACT_INTERVAL_KEY, SPARK_DEFAULT_COMPACT_INTERVAL
from lineagestore.cli.common import positive_int

DOC = "docs/repartition.md#sparks-file-sink"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--file-sink",
        metavar="PATH",
        help="the `path` of the query's Spark file sink (parquet, json, csv, orc, text): its log gets the new "
        "batch's entry after the commit, which its compaction needs; given on a checkpoint rewritten "
        "already, only the missing entries are written",
    )
    p.add_argument(
        "--file-sink-compact-interval",
        type=positive_int,
        metavar="N",
        default=SPARK_DEFAULT_COMPACT_INTERVAL,
        help=f"the query's {COMPACT_INTERVAL_KEY} (default: Spark's, {SPARK_DEFAULT_COMPACT_INTERVAL})",
    )


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of ``checkpoint.repartition`` / ``checkpoint.migrate`` for the options above."""
    return {"file_sink": args.file_sink, "file_sink_compact_interval": args.file_sink_compact_interval}


def render(page: Any, r: dict, command: str) -> None:
    """The report's lines about the file sink: what was written, or how to keep a file sink working.
    ``command``: the command line to run again with ``--file-sink``."""
    sink = r.get("fileSink")
    if sink is None:
        page.line(
            f"if the query writes through Spark's file sink, its log lacks batch {r['newBatch']} and its "
            f"next compaction fails (BATCH_METADATA_NOT_FOUND): run `{command} --file-sink <the sink's path>` "
            f"before restarting it (it writes only that entry; also once the query failed with it) ({DOC})"
        )
        return
    written = ", ".join(sink["written"]) or "nothing (no entry was missing)"
    page.line(
        f"file sink log {sink['sink']}: wrote {written} (compaction interval {sink['compactInterval']}; "
        f"rewrite batches {', '.join(map(str, sink['rewriteBatches'])) or 'none'})"
    )

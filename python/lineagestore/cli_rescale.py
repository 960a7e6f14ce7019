"""The ``repartition`` and ``migrate`` verbs of the command line (their parsers are in ``cli``; exit codes as
there: 0 done, 2 wrong command line, 3 the checkpoint cannot be used as asked)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

# ---- repartition ------------------------------------------------------------------------------------------


def repartition_command(args: argparse.Namespace, tools: Any, progress: Any) -> int:
    from lineagestore import repartition
    from lineagestore.cli_render import render_repartition

    if args.undo:
        result = repartition.undo(tools, args.checkpoint)
    elif args.partitions is None:
        print("lineagestore repartition: error: give --partitions N (or --undo)", file=sys.stderr)
        return 2
    else:
        result = repartition.repartition(tools, args.checkpoint, args.partitions, args.dry_run, progress)
    print(json.dumps(result, indent=2) if args.json else render_repartition(result))
    return 0


def migrate_command(args: argparse.Namespace, hadoop_conf: dict[str, str], progress: Any) -> int:
    """Runs in a SparkSession of its own (local[1]): Spark's providers read the old state."""
    from pyspark.sql import SparkSession

    import lineagestore
    from lineagestore.checkpoint import CheckpointError
    from lineagestore.migrate import migrate

    builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
    for k, v in hadoop_conf.items():
        builder = builder.config(f"spark.hadoop.{k}", v)
    spark = lineagestore.configure(builder).getOrCreate()
    try:
        result = migrate(spark, args.checkpoint, args.partitions, progress)
    except CheckpointError as e:
        progress.finish()
        print(f"lineagestore migrate: error: {e}", file=sys.stderr)
        return 3
    finally:
        progress.finish()
        spark.stop()
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"{result['checkpoint']}: moved {result['rowsMoved']} rows from {result['from']} to lineagestore "
            f"({result['oldPartitions']} -> {result['newPartitions']} partitions) as batch {result['newBatch']}; "
            "restart the query"
        )
    return 0

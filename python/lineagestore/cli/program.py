"""The ``lineagestore`` program: its parser (the global options, then one sub-parser per verb, each declared
by its module in this package) and :func:`main`, the console entry point."""

from __future__ import annotations

import argparse

from lineagestore._version import __version__
from lineagestore.cli import clone, gc, inspect, migrate, repartition, verify
from lineagestore.cli.common import EXIT_CODES, EXIT_OK, Formatter, add_global_options, run
from lineagestore.jvm.jars import AWS_SDK_BUNDLE_VERSION, HADOOP_AWS_VERSION

# the verbs in the order --help lists them
VERBS = (inspect.VERB, verify.VERB, gc.VERB, clone.VERB, repartition.VERB, migrate.VERB)

DESCRIPTION = f"""\
Tools for the checkpoints of Spark Structured Streaming queries that keep their state in lineagestore.

A checkpoint is the directory a query was given as checkpointLocation (a local path, or a URI such as
s3a://bucket/path). Every command reads Spark's commit log (commits/<batch>: which unique ID each state store
partition committed) and lineagestore's files under state/ (<version>_<uniqueId>.delta and .zip, shared/*.sst).
The format is read by the lineagestore jar through a JVM the command starts (a few seconds); no SparkContext
is created. That JVM has Spark's jars and lineagestore's; a filesystem outside Spark needs its jars added
with --jars or --packages, e.g. for s3a:// hadoop-aws and the AWS SDK v2 bundle:
--packages org.apache.hadoop:hadoop-aws:{HADOOP_AWS_VERSION} (fetched from Maven Central by Spark's Ivy the first time).
"""

EXAMPLES = f"""\
examples:
  lineagestore inspect /data/checkpoints/clicks
  lineagestore inspect /data/checkpoints/clicks --json | jq '.totals'
  lineagestore inspect /data/checkpoints/clicks --plot lineage.png
  lineagestore verify /data/checkpoints/clicks            # every batch whose files still exist
  lineagestore verify /data/checkpoints/clicks --retain 10
  lineagestore gc /data/checkpoints/clicks --retain 100   # dry run: what would be deleted, and why
  lineagestore gc /data/checkpoints/clicks --retain 100 --apply
  lineagestore clone /data/checkpoints/clicks /data/checkpoints/clicks-experiment
  lineagestore --packages org.apache.hadoop:hadoop-aws:{HADOOP_AWS_VERSION} inspect s3a://bucket/checkpoints/clicks
  lineagestore --jars /opt/s3a/hadoop-aws-{HADOOP_AWS_VERSION}.jar,/opt/s3a/bundle-{AWS_SDK_BUNDLE_VERSION}.jar \\
      --hadoop-conf fs.s3a.endpoint=http://127.0.0.1:9000 verify s3a://bucket/checkpoints/clicks

Stop the query before gc --apply or clone. See docs/operations.md for each command's output.

environment:
  LINEAGESTORE_JARS          like --jars (both are used when both are given)
  LINEAGESTORE_PACKAGES      like --packages
  LINEAGESTORE_REPOSITORIES  like --repositories
  PYSPARK_SUBMIT_ARGS        more spark-submit arguments for the JVM (end them with pyspark-shell), e.g.
                             "--conf spark.jars.ivy=/tmp/ivy pyspark-shell"
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lineagestore",
        description=DESCRIPTION,
        epilog=EXAMPLES + "\n" + EXIT_CODES,
        formatter_class=Formatter,
    )
    parser.add_argument("--version", action="version", version=f"lineagestore {__version__}")
    add_global_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    for verb in VERBS:
        verb.add_to(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return EXIT_OK
    return run(parser, args)

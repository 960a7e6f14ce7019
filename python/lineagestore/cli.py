"""The ``lineagestore`` command line: inspect, verify, gc and clone checkpoints of lineagestore queries."""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from typing import Any

from lineagestore import __version__, cli_rescale
from lineagestore.cli_render import (
    render_adjunct_table,
    render_clone,
    render_gc,
    render_inspect,
    render_verify,
)
from lineagestore.jvm_jars import AWS_SDK_BUNDLE_VERSION, HADOOP_AWS_VERSION

EXIT_OK = 0

EXIT_PROBLEMS = 1

EXIT_USAGE = 2

EXIT_BAD_CHECKPOINT = 3

EXIT_ENVIRONMENT = 4

EXIT_CODES = f"""\
exit codes:
  {EXIT_OK}  success (verify: every checked checkpoint loads and every file checks out)
  {EXIT_PROBLEMS}  the command ran and found problems or could not finish: inspect or verify found damaged or
     missing files (or a conflict between the commit log and the lineage),
     gc --apply could not delete some files, a step of clone failed
  {EXIT_USAGE}  wrong command line
  {EXIT_BAD_CHECKPOINT}  the checkpoint cannot be used as asked: it does not exist, is not a Spark checkpoint, was not
     written with lineagestore (its offset log names another provider, or format version 1), has an
     unreadable Spark file, or the clone destination is not empty
  {EXIT_ENVIRONMENT}  the tools cannot run here: no Java, the bundled jar is missing, an s3a:// checkpoint without
     hadoop-aws and the AWS SDK bundle (the message names the missing classes and the option to add), a
     --packages coordinate Ivy cannot resolve, a LINEAGESTORE_JARS entry that does not exist, matplotlib
     is missing for --plot
"""

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


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=30, width=110)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lineagestore",
        description=DESCRIPTION,
        epilog=EXAMPLES + "\n" + EXIT_CODES,
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"lineagestore {__version__}")
    parser.add_argument(
        "--hadoop-conf",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="a Hadoop setting for reaching the checkpoint (repeatable), e.g. fs.s3a.endpoint=http://host:9000",
    )
    parser.add_argument(
        "--jars",
        metavar="PATH[,PATH]",
        action="append",
        default=[],
        help="jars to add to the JVM the command starts (repeatable; a jar, a directory of jars or a glob), "
        f"e.g. hadoop-aws-{HADOOP_AWS_VERSION}.jar and bundle-{AWS_SDK_BUNDLE_VERSION}.jar for s3a://",
    )
    parser.add_argument(
        "--packages",
        metavar="G:A:V[,G:A:V]",
        action="append",
        default=[],
        help="Maven coordinates to add to that JVM with their dependencies, resolved by Spark's Ivy from Maven "
        f"Central (kept in ~/.ivy2.5.2); for s3a://: org.apache.hadoop:hadoop-aws:{HADOOP_AWS_VERSION}",
    )
    parser.add_argument(
        "--repositories",
        metavar="URL[,URL]",
        action="append",
        default=[],
        help="more Maven repositories for --packages (a mirror, a private or a file:// repository)",
    )
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar on stderr (it is drawn only when stderr is a terminal anyway)",
    )
    sub = parser.add_subparsers(dest="command", metavar="<command>")

    p = sub.add_parser(
        "inspect",
        help="operators, partitions, stores, versions, lineage, attempts, snapshots, sizes, orphans",
        formatter_class=_Formatter,
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
    )
    p.add_argument("checkpoint", help="checkpoint directory or URI")
    p.add_argument("--json", action="store_true", help="print the full report as JSON (for scripts)")
    p.add_argument(
        "--plot", metavar="OUT.png", help="draw the lineage of every store into this image (matplotlib)"
    )
    p.set_defaults(func=_inspect)

    p = sub.add_parser(
        "verify",
        help="prove the committed checkpoints load: resolve each lineage, read back every file with checksums",
        formatter_class=_Formatter,
        description=textwrap.dedent(
            """\
            For every committed batch still within retention and every store, resolve the committed
            (version, unique ID) through the lineage from scratch and read back every file that load needs,
            verifying as it reads: delta files (header, records, count, CRC32C), snapshot zips (INDEX checksum,
            store identity, entries) and the CRC32C and identity of every shared blob they reference (an
            SST's RocksDB unique ID, or the SHA-256 of its content; restored into a scratch directory under the
            system temp directory, one store at a time). Each file is read once.
            Prints each problem with the file it concerns and the batches that need it."""
        ),
        epilog=textwrap.dedent(
            """\
            examples:
              lineagestore verify /data/checkpoints/clicks
              lineagestore verify /data/checkpoints/clicks --retain 5 --json

            Without --retain: the newest batch and every older one down to the first whose checkpoint files
            are gone from every store (clean-up removed them); older batches are listed as skipped.
            Exit code 0: all good; 1: problems (listed, with the files named)."""
        ),
    )
    p.add_argument("checkpoint", help="checkpoint directory or URI")
    p.add_argument(
        "--retain", type=_positive_int, metavar="N", help="check only the newest N committed batches"
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_verify)

    p = sub.add_parser(
        "gc",
        help="what clean-up would delete and why; deletes only with --apply",
        formatter_class=_Formatter,
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
    )
    p.add_argument("checkpoint", help="checkpoint directory or URI")
    p.add_argument(
        "--retain",
        type=_positive_int,
        default=100,
        metavar="N",
        help="versions to keep loadable, like spark.sql.streaming.minBatchesToRetain (default: 100)",
    )
    p.add_argument(
        "--grace",
        type=_duration,
        default="6h",
        metavar="DURATION",
        help="unreferenced blobs younger than this are kept, e.g. 30m, 6h, 2d (default: 6h, like "
        "spark.sql.streaming.stateStore.lineagestore.orphanGracePeriodMs)",
    )
    p.add_argument("--apply", action="store_true", help="delete the files listed (default: only show them)")
    p.add_argument("--json", action="store_true", help="print the plan (and what was deleted) as JSON")
    p.set_defaults(func=_gc)

    p = sub.add_parser(
        "clone",
        help="copy a checkpoint into a new one that shares nothing mutable with it",
        formatter_class=_Formatter,
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
    )
    p.add_argument("source", help="checkpoint directory or URI to copy")
    p.add_argument("destination", help="new (or empty) directory or URI")
    p.add_argument(
        "--new-query-id", action="store_true", help="give the copy a new query id in its metadata file"
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_clone)

    p = sub.add_parser(
        "repartition",
        help="change the partition count of a stopped query's state (docs/repartition.md)",
        formatter_class=_Formatter,
        description=textwrap.dedent(
            """\
            Rewrite the state of the last committed batch into N partitions and record it as one more
            batch (offsets/<B+1> with spark.sql.shuffle.partitions=N, then commits/<B+1>), as Spark 4.3's
            own offline repartition does for its provider. Every key lands where Spark's shuffle sends it.
            Nothing already written is changed or deleted; a crash leaves the old checkpoint (plus orphan
            files for gc), and running the command again finishes the job. Stop the query first."""
        ),
        epilog=textwrap.dedent(
            """\
            examples:
              lineagestore repartition /data/checkpoints/clicks --partitions 12 --dry-run
              lineagestore repartition /data/checkpoints/clicks --partitions 12
              lineagestore repartition /data/checkpoints/clicks --undo   # drop an unfinished repartition"""
        ),
    )
    p.add_argument("checkpoint", help="checkpoint directory or URI of a stopped query")
    p.add_argument("--partitions", type=int, metavar="N", help="the new partition count")
    p.add_argument("--dry-run", action="store_true", help="only say what would be written")
    p.add_argument(
        "--undo", action="store_true", help="remove an unfinished repartition's offset entry instead"
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cli_rescale.repartition_command)

    p = sub.add_parser(
        "migrate",
        help="move a stopped query from Spark's RocksDB or HDFS provider onto lineagestore, keeping its state",
        formatter_class=_Formatter,
        description="Rewrite the state of the last committed batch into lineagestore's format (optionally into "
        "N partitions) and record lineagestore as the provider in a new offset log entry, so that the restarted "
        "query runs on lineagestore. Starts a local SparkSession (Spark's providers read their own files). "
        "Stop the query first; see docs/repartition.md.",
    )
    p.add_argument("checkpoint", help="checkpoint directory or URI of a stopped query")
    p.add_argument("--partitions", type=int, metavar="N", help="a new partition count (default: keep it)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=None)
    return parser


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def _duration(text: str) -> int:
    from lineagestore.checkpoint import parse_duration_ms

    try:
        return parse_duration_ms(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


# ---- entry point ------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return EXIT_OK
    hadoop_conf = {}
    for item in args.hadoop_conf:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--hadoop-conf wants KEY=VALUE, got '{item}'")
        hadoop_conf[key] = value

    from lineagestore.checkpoint import CheckpointError, Progress, to_uri
    from lineagestore.progress import draws_on

    progress = Progress(not args.no_progress and draws_on(sys.stderr))
    if args.command == "migrate":
        return cli_rescale.migrate_command(args, hadoop_conf, progress)
    from lineagestore.checkpoint_jvm import ToolError, ToolsUnavailable, connect
    from lineagestore.checkpoint_plot import MissingDependency, require_matplotlib
    from lineagestore.jvm_jars import (
        ENV_JARS,
        ENV_PACKAGES,
        ENV_REPOSITORIES,
        check_packages,
        expand_jars,
        split_list,
    )

    prog = f"lineagestore {args.command}"
    # the options are checked as a command line (exit 2), the environment variables as the environment (exit 4)
    extras: dict[str, list[str]] = {}
    for option, env, check in (
        ("--jars", ENV_JARS, expand_jars),
        ("--packages", ENV_PACKAGES, check_packages),
    ):
        try:
            given = check(split_list(*getattr(args, option[2:])))
        except ValueError as e:
            parser.error(f"{option}: {e}")
        try:
            from_env = check(split_list(os.environ.get(env)))
        except ValueError as e:
            print(f"{prog}: error: {env}: {e}", file=sys.stderr)
            return EXIT_ENVIRONMENT
        extras[option] = list(dict.fromkeys(given + from_env))
    repositories = split_list(*args.repositories, os.environ.get(ENV_REPOSITORIES))
    jars, packages = extras["--jars"], extras["--packages"]

    try:
        if getattr(args, "plot", None):
            require_matplotlib()  # fail before starting a JVM
        progress.note(
            "starting the JVM for the lineagestore tools"
            + (" (Ivy resolves --packages: the first time from Maven Central) ..." if packages else " ...")
        )
        # a running SparkSession's JVM is used as it is: only --jars/--packages given here are refused there
        in_session = "refuse" if args.jars or args.packages else "ignore"
        # inspect reads headers and indexes only: no use for C2-compiled code (see lineagestore._jvm_start)
        short = args.command == "inspect"
        with connect(hadoop_conf, jars, packages, repositories, in_session, short) as tools:
            for uri in _uris(args):
                tools.require_filesystem(to_uri(uri))
            return args.func(args, tools, progress)
    except CheckpointError as e:
        progress.finish()
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_BAD_CHECKPOINT
    except (ToolsUnavailable, MissingDependency) as e:
        progress.finish()
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    except ToolError as e:
        progress.finish()
        print(f"{prog}: failed: {e}", file=sys.stderr)
        return EXIT_PROBLEMS
    except KeyboardInterrupt:
        progress.finish()
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130


def _uris(args: argparse.Namespace) -> list[str]:
    return [u for u in (getattr(args, n, None) for n in ("checkpoint", "source", "destination")) if u]


# ---- inspect ----------------------------------------------------------------------------------------------


def _inspect(args: argparse.Namespace, tools: Any, progress: Any) -> int:
    from lineagestore import checkpoint
    from lineagestore.checkpoint_plot import plot_lineage

    uri = checkpoint.to_uri(args.checkpoint)
    top = tools.list(uri) or []  # the listing load starts with: an unreachable store fails as it would there
    if any(e["name"] == "_adjunct" and e["dir"] for e in top):  # an adjunct table (docs/adjunct-tables.md)
        table = tools.inspect_adjunct_table(uri)
        print(json.dumps(table, indent=2) if args.json else render_adjunct_table(table))
        return EXIT_OK
    cp = checkpoint.load(tools, args.checkpoint)
    report = checkpoint.inspect(tools, cp, progress)
    if args.plot:
        panels = plot_lineage(report, args.plot)
        print(f"wrote {args.plot} ({panels} stores)", file=sys.stderr)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render_inspect(report))
    return EXIT_PROBLEMS if report["problems"] else EXIT_OK


# ---- verify -----------------------------------------------------------------------------------------------


def _verify(args: argparse.Namespace, tools: Any, progress: Any) -> int:
    from lineagestore import checkpoint

    cp = checkpoint.load(tools, args.checkpoint)
    result = checkpoint.verify(tools, cp, args.retain, progress)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(render_verify(result))
    return EXIT_OK if result["ok"] else EXIT_PROBLEMS


# ---- gc ---------------------------------------------------------------------------------------------------


def _gc(args: argparse.Namespace, tools: Any, progress: Any) -> int:
    from lineagestore import checkpoint

    cp = checkpoint.load(tools, args.checkpoint)
    result = checkpoint.gc(tools, cp, args.retain, args.grace, args.apply, progress)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(render_gc(result))
    return EXIT_PROBLEMS if result["errors"] else EXIT_OK


# ---- clone ------------------------------------------------------------------------------------------------


def _clone(args: argparse.Namespace, tools: Any, progress: Any) -> int:
    from lineagestore import checkpoint

    result = checkpoint.clone(tools, args.source, args.destination, args.new_query_id, progress)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(render_clone(result))
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())

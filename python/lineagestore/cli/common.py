"""What every verb of the command line shares: the exit codes, the global options, the argument types, how a
verb declares what it needs (the tools' JVM or a SparkSession) and how :func:`run` provides it, turning the
errors of the layers below into an exit code and one line on stderr."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from lineagestore._units import parse_duration_ms
from lineagestore.jvm.jars import AWS_SDK_BUNDLE_VERSION, HADOOP_AWS_VERSION

EXIT_OK = 0

EXIT_PROBLEMS = 1

EXIT_USAGE = 2

EXIT_BAD_CHECKPOINT = 3

EXIT_ENVIRONMENT = 4

EXIT_UNREACHABLE = 5

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
  {EXIT_UNREACHABLE}  the checkpoint's filesystem cannot be reached (an unknown host, a refused or timed-out
     connection): nothing was read, so nothing is known about the checkpoint; try again when it is reachable
"""

# What a verb runs on: the tools' JVM (lineagestore.jvm.JvmTools: a gateway JVM, or this process's
# SparkSession's), or a SparkSession (Spark's own state data source reads the old provider's files).
TOOLS = "tools"
SPARK = "spark"


class Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=30, width=110)


@dataclass(frozen=True)
class Verb:
    """One verb of the command line, declared by its module: its sub-parser (``arguments`` adds its options
    to it), what it runs on (``needs``), and ``run(args, tools_or_spark, progress) -> exit code``."""

    name: str
    help: str
    description: str
    epilog: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, Any, Any], int]
    # TOOLS or SPARK, or a function of the arguments choosing one (repartition runs as a Spark job with --master)
    needs: str | Callable[[argparse.Namespace], str] = TOOLS
    short_lived: bool = False  # reads little: a JVM with the C1 compiler only (lineagestore.jvm.start)
    # the arguments naming checkpoints: their filesystem is checked before the verb runs (s3a:// jars)
    locations: tuple[str, ...] = ("checkpoint",)
    # those of them that must exist already: a local one that does not is refused before any JVM starts
    existing: tuple[str, ...] = ("checkpoint",)
    # a check before any JVM starts (e.g. a missing optional package), raising what run() maps to an exit code
    precheck: Callable[[argparse.Namespace], None] | None = None

    def add_to(self, sub: Any) -> None:
        p = sub.add_parser(
            self.name,
            help=self.help,
            formatter_class=Formatter,
            description=self.description,
            epilog=self.epilog or None,
        )
        self.arguments(p)
        p.set_defaults(verb=self)


def add_global_options(parser: argparse.ArgumentParser) -> None:
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


def add_master_argument(p: argparse.ArgumentParser, without: str) -> None:
    """``--master URL``: the Spark master the verb's job runs on (``without``: what happens when not given)."""
    p.add_argument(
        "--master",
        metavar="URL",
        help="run the rewrite as a Spark job on this master (spark://host:7077, local[4], yarn): every "
        f"executor writes its share; {without}",
    )


def positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def duration(text: str) -> int:
    try:
        return parse_duration_ms(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_json_option(p: argparse.ArgumentParser, what: str = "print the result as JSON") -> None:
    p.add_argument("--json", action="store_true", help=what)


def emit(args: argparse.Namespace, report: dict, render: Callable[[dict], str]) -> None:
    """Print a verb's report: as JSON with ``--json`` (what docs/operations.md documents), else as text."""
    print(json.dumps(report, indent=2) if args.json else render(report))


# ---- running a verb ---------------------------------------------------------------------------------------


class _Environment(Exception):
    """The environment (not the command line) is wrong: exit 4 with this message."""


def run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Give ``args.verb`` what it needs and run it; every error becomes an exit code and one line on stderr."""
    from lineagestore._extras import MissingExtra
    from lineagestore.checkpoint import CheckpointError
    from lineagestore.cli.progress import Progress, draws_on
    from lineagestore.jvm import FilesystemUnreachable, ToolError, ToolsUnavailable

    verb: Verb = args.verb
    prog = f"lineagestore {verb.name}"
    hadoop_conf = _hadoop_conf(parser, args)
    progress = Progress(not args.no_progress and draws_on(sys.stderr))
    try:
        jars, packages, repositories = _extra_jars(parser, args)
        _require_local_paths(verb, args)  # a missing local checkpoint is named before a JVM starts
        if verb.precheck is not None:
            verb.precheck(args)  # fails before a JVM starts
        with _provide(verb, args, hadoop_conf, jars, packages, repositories, progress) as target:
            return verb.run(args, target, progress)
    except CheckpointError as e:
        progress.finish()
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_BAD_CHECKPOINT
    except (ToolsUnavailable, MissingExtra, _Environment) as e:
        progress.finish()
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    except FilesystemUnreachable as e:
        progress.finish()
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except ToolError as e:
        progress.finish()
        print(f"{prog}: failed: {e}", file=sys.stderr)
        return EXIT_PROBLEMS
    except KeyboardInterrupt:
        progress.finish()
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    finally:
        progress.finish()


def _require_local_paths(verb: Verb, args: argparse.Namespace) -> None:
    """``CheckpointError`` (exit 3, the JVM's own wording) for a checkpoint argument that is a local path (or a
    ``file:`` URI) naming nothing: no JVM is needed to know it."""
    from lineagestore.checkpoint import CheckpointError
    from lineagestore.checkpoint.model import local_path

    for name in verb.existing:
        location = getattr(args, name, None)
        path = local_path(location) if location else None
        if path is not None and not path.exists():
            raise CheckpointError(f"{location} does not exist")


def _hadoop_conf(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, str]:
    conf = {}
    for item in args.hadoop_conf:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--hadoop-conf wants KEY=VALUE, got '{item}'")
        conf[key] = value
    return conf


def _extra_jars(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> tuple[list[str], list[str], list[str]]:
    """--jars, --packages and --repositories with their environment variables; the options are checked as a
    command line (exit 2), the environment variables as the environment (exit 4)."""
    from lineagestore.jvm.jars import (
        ENV_JARS,
        ENV_PACKAGES,
        ENV_REPOSITORIES,
        check_packages,
        expand_jars,
        split_list,
    )

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
            raise _Environment(f"{env}: {e}") from None
        extras[option] = list(dict.fromkeys(given + from_env))
    repositories = split_list(*args.repositories, os.environ.get(ENV_REPOSITORIES))
    return extras["--jars"], extras["--packages"], repositories


@contextmanager
def _provide(
    verb: Verb,
    args: argparse.Namespace,
    hadoop_conf: dict[str, str],
    jars: list[str],
    packages: list[str],
    repositories: list[str],
    progress: Any,
) -> Iterator[Any]:
    needs = verb.needs(args) if callable(verb.needs) else verb.needs
    if needs == SPARK:
        master = getattr(args, "master", None) or "local[1]"
        with _spark_session(hadoop_conf, jars, packages, repositories, master) as spark:
            yield spark
        return
    from lineagestore.checkpoint import to_uri
    from lineagestore.jvm import connect

    progress.note(
        "starting the JVM for the lineagestore tools"
        + (" (Ivy resolves --packages: the first time from Maven Central) ..." if packages else " ...")
    )
    # a running SparkSession's JVM is used as it is: only --jars/--packages given here are refused there
    in_session = "refuse" if args.jars or args.packages else "ignore"
    with connect(hadoop_conf, jars, packages, repositories, in_session, verb.short_lived) as tools:
        for name in verb.locations:
            location = getattr(args, name, None)
            if location:
                tools.require_filesystem(to_uri(location))
        yield tools


def _start_quiet_jvm(builder: Any) -> None:
    """Start the session's JVM with its output (Spark's start-up lines, the JVM's own warnings, the stores'
    warnings: outside a query no StateStoreCoordinator answers) in a temporary file, not on the terminal, as
    the tools' JVM does (``lineagestore.jvm.tools``); errors still reach the user as exceptions. Nothing to do
    when this process runs a JVM already."""
    import tempfile

    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    conf = SparkConf(loadDefaults=False)
    for key, value in builder._options.items():  # what getOrCreate gives the context: the JVM's settings too
        conf.set(key, value)
    log_fd, _ = tempfile.mkstemp(prefix="lineagestore-spark-", suffix=".log")
    with os.fdopen(log_fd, "wb") as log:
        gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
    SparkContext._ensure_initialized(gateway=gateway)  # getOrCreate's context then runs on that JVM


@contextmanager
def _spark_session(
    hadoop_conf: dict[str, str],
    jars: list[str],
    packages: list[str],
    repositories: list[str],
    master: str = "local[1]",
) -> Iterator[Any]:
    """A SparkSession on ``master`` configured with lineagestore (and the extra jars), stopped afterwards."""
    from pyspark.sql import SparkSession

    import lineagestore

    builder = SparkSession.builder.master(master).config("spark.ui.enabled", "false")
    for key, value in (
        ("spark.jars", ",".join(jars)),
        ("spark.jars.packages", ",".join(packages)),
        ("spark.jars.repositories", ",".join(repositories)),
    ):
        if value:
            builder = builder.config(key, value)
    for k, v in hadoop_conf.items():
        builder = builder.config(f"spark.hadoop.{k}", v)
    builder = lineagestore.configure(builder)
    _start_quiet_jvm(builder)
    spark = builder.getOrCreate()
    try:
        yield spark
    finally:
        spark.stop()

"""Run the ``lineagestore`` command line in this process and get back what a shell would see.

``run_cli(argv)`` calls ``lineagestore.cli.main`` (the console script's entry point) with ``sys.stdout`` and
``sys.stderr`` captured, so a test reads the exit code, the report and the error messages::

    from lineagestore.testing.cli import run_cli

    result = run_cli(["verify", checkpoint], json=True, hadoop_conf=s3_server.hadoop_conf(bucket))
    assert result.code == 0, result.err
    assert result.report["ok"]

In a process with a SparkSession the command reuses that session's JVM (its jars, its Hadoop configuration
and its cached filesystems); without one it starts a gateway JVM of its own, as the console script does.
What the JVM itself prints (log4j) goes to the process's file descriptors, not into ``out`` / ``err``.
"""

from __future__ import annotations

import contextlib
import io
import json as _json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple


class CliResult(NamedTuple):
    """What one command left: its exit code and everything it wrote to stdout and stderr
    (``code, out, err = run_cli(...)`` unpacks it)."""

    code: int
    out: str
    err: str

    @property
    def report(self) -> Any:
        """``out`` parsed as JSON: the report of a command run with ``--json``."""
        try:
            return _json.loads(self.out)
        except _json.JSONDecodeError as e:
            raise AssertionError(
                f"the command's output is not JSON ({e}); was it run with json=True? exit {self.code}, "
                f"stdout {self.out[:2000]!r}, stderr {self.err[-2000:]!r}"
            ) from None


def hadoop_conf_args(settings: Mapping[str, str]) -> list[str]:
    """``--hadoop-conf KEY=VALUE`` for each setting, e.g. of ``S3Server.hadoop_conf(bucket)``: the command
    line's own options for reaching that storage."""
    return [arg for key, value in settings.items() for arg in ("--hadoop-conf", f"{key}={value}")]


def run_cli(
    argv: Sequence[str], *, hadoop_conf: Mapping[str, str] | None = None, json: bool = False
) -> CliResult:
    """``lineagestore <argv>`` in this process.

    ``hadoop_conf`` goes first as ``--hadoop-conf`` options (``hadoop_conf_args``); ``json=True`` appends
    ``--json`` (read the parsed report from ``CliResult.report``). A usage error (argparse exits) gives its
    exit code, as a shell would see it, instead of raising ``SystemExit``. Output is captured, so the
    progress bar never draws (it draws on a terminal only).
    """
    full = [*hadoop_conf_args(hadoop_conf or {}), *argv, *(["--json"] if json else [])]
    from lineagestore.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(full)
        except SystemExit as e:  # argparse's usage errors and --help; Python's own exit codes for the rest
            if e.code is None or isinstance(e.code, int):
                code = e.code or 0
            else:
                print(e.code, file=err)
                code = 1
    return CliResult(code, out.getvalue(), err.getvalue())

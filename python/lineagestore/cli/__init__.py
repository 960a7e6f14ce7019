"""The ``lineagestore`` command line (console script ``lineagestore.cli:main``): one module per verb
(``inspect``, ``verify``, ``gc``, ``clone``, ``repartition``, ``migrate``, and ``adjunct_table`` for inspect on
an adjunct table), each holding its sub-parser, handler and text rendering; ``common`` (exit codes, global
options, what a verb runs on), ``render`` (the one text layer every report goes through), ``progress`` (the
bar on stderr), ``plot`` (inspect --plot) and ``program`` (the parser and :func:`main`)."""

from __future__ import annotations

from lineagestore.cli.common import (
    EXIT_BAD_CHECKPOINT,
    EXIT_ENVIRONMENT,
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
)
from lineagestore.cli.program import build_parser, main

__all__ = [
    "EXIT_BAD_CHECKPOINT",
    "EXIT_ENVIRONMENT",
    "EXIT_OK",
    "EXIT_PROBLEMS",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "build_parser",
    "main",
]

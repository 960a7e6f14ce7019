"""The ``lineagestore`` command line."""

from __future__ import annotations

import argparse

from lineagestore import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lineagestore", description="Tools for lineagestore checkpoints of Spark Structured Streaming."
    )
    parser.add_argument("--version", action="version", version=f"lineagestore {__version__}")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    parser.parse_args(argv)
    parser.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

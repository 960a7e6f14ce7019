"""The one text layer of the command line's reports: every verb's text goes through these primitives.

(This commit moves the existing rendering here unchanged; the layer that fits 80 columns follows.)
"""

from __future__ import annotations

import io
import shutil
import sys

# the documented procedure for a damaged state file (named by inspect, verify and the provider's errors)
RECOVERY_DOC = "docs/operations.md#restarting-from-an-older-checkpoint"


def short_id(cid: str) -> str:
    """``<version>_<first 8 characters of the unique ID>``."""
    version, _, uid = cid.partition("_")
    return f"{version}_{uid[:8]}"


def batches_text(bs: list[int]) -> str:
    if not bs:
        return "none"
    if bs == list(range(bs[0], bs[-1] + 1)):
        return f"{bs[0]}..{bs[-1]}" if len(bs) > 1 else str(bs[0])
    return ", ".join(map(str, bs))


def table(header: list[str], rows: list[list[str]]) -> str:
    """Columns aligned: drawn by ``rich`` to fit the terminal when stdout is one, else plain text (stable for
    scripts that read it: columns separated by two spaces, no box, no colour)."""
    from lineagestore.cli.progress import draws_on

    if draws_on(sys.stdout):
        return _rich_table(header, rows)
    return _plain_table(header, rows)


def _rich_table(header: list[str], rows: list[list[str]]) -> str:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for h in header:
        table.add_column(h, overflow="fold")
    for row in rows:
        table.add_row(*row)
    # rendered to text here (the render_* functions return strings); the width is the terminal's
    console = Console(file=io.StringIO(), width=shutil.get_terminal_size().columns, force_terminal=True)
    console.print(table)
    return console.file.getvalue().rstrip("\n")


def _plain_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(x) for x in col) for col in zip(header, *rows, strict=False)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)

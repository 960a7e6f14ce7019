"""The one text layer of the command line's reports: every verb renders its report (the dictionary ``--json``
prints) into a :class:`Page` of lines, tables and labelled fields, which lays them out for a width.

What it promises, tty or not:

* **plain text**: no colour, no ANSI escape, no box drawing, ever; a terminal and a pipe get the same
  characters, so what a person reads is what a log keeps (scripts read ``--json``);
* **a width**: ``$COLUMNS`` when set (as Python's ``shutil.get_terminal_size`` prefers it), else the
  terminal's when stdout is one, else 80 (a pipe, a file);
* **nothing broken inside a unit**: text wraps only between words; a size (``13.7 KiB``), a checkpoint id
  and any phrase built with :func:`keep` stay on one line; a table cell is never split, a table too wide
  for the width is cut into column groups, each repeating the key column(s). A single word longer than the
  width (a long path) is the only thing that can pass the width: it is never broken.

Paths under the checkpoint are shown relative to it (:func:`relative`); the report's header names it.
"""

from __future__ import annotations

import os
import sys
import textwrap

from lineagestore._units import human_bytes

# the documented procedure for a damaged state file (named by inspect, verify and the provider's errors)
RECOVERY_DOC = "docs/operations.md#restarting-from-an-older-checkpoint"

DEFAULT_WIDTH = 80
MIN_WIDTH = 40
_KEEP = "\u00a0"  # joins the words of a unit that must not be broken across lines; printed as a space


def terminal_width() -> int:
    """The width reports are laid out for (see the module doc)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return max(MIN_WIDTH, int(columns))
    try:
        if sys.stdout.isatty():
            return max(MIN_WIDTH, os.get_terminal_size(sys.stdout.fileno()).columns)
    except (AttributeError, ValueError, OSError):  # a stream without a file descriptor
        pass
    return DEFAULT_WIDTH


def keep(text: str) -> str:
    """``text`` as one unit: never broken across lines."""
    return text.replace(" ", _KEEP)


def size(n: float) -> str:
    """A byte count for a report (``13.7 KiB``), one unit."""
    return keep(human_bytes(n))


def short_id(cid: str) -> str:
    """``<version>_<first 8 characters of the unique ID>``."""
    version, _, uid = cid.partition("_")
    return f"{version}_{uid[:8]}"


def rewrite_text(rw: dict) -> str:
    """What a batch that rewrote the state did (an entry of inspect's ``rewrites``), as inspect's text and
    its plot name it: ``repartition 2 -> 3 partitions``, ``migrated from RocksDBStateStoreProvider``."""
    old, new = rw["oldPartitions"], rw["newPartitions"]
    partitions = f"{old if old is not None else '?'} -> {new if new is not None else '?'} partitions"
    if rw["kind"] == "migrate":
        text = f"migrated from {rw['fromProvider'].rsplit('.', 1)[-1]}"
        return text + (f", {partitions}" if old != new else "")
    if rw["kind"] == "repartition":
        return f"repartition {partitions}"
    return "state rewritten (its stores start afresh)"


def batches_text(bs: list[int]) -> str:
    if not bs:
        return "none"
    if bs == list(range(bs[0], bs[-1] + 1)):
        return f"{bs[0]}..{bs[-1]}" if len(bs) > 1 else str(bs[0])
    return ", ".join(map(str, bs))


def relative(text: str, uri: str | None) -> str:
    """``text`` with the checkpoint's URI dropped from every path under it (``<uri>/state/0/1/x`` ->
    ``state/0/1/x``): the report names the checkpoint once, its files by their place in it. A local
    checkpoint is written ``file:///path`` by Python and ``file:/path`` by Hadoop: both are dropped."""
    if not uri:
        return text
    base = uri.rstrip("/") + "/"
    for prefix in (base, base.replace("file:///", "file:/", 1)):
        text = text.replace(prefix, "")
    return text


def _plain(text: str) -> str:
    return text.replace(_KEEP, " ")


class Page:
    """The lines of one report, laid out for ``width`` (default: :func:`terminal_width`)."""

    def __init__(self, width: int | None = None) -> None:
        self.width = width or terminal_width()
        self._lines: list[str] = []

    def line(self, text: str = "", indent: str = "", hanging: str = "  ") -> None:
        """A paragraph: ``text`` after ``indent``, wrapped between words; continuation lines are indented by
        ``indent + hanging``."""
        if not text:
            self._lines.append("")
            return
        self._wrap(text, indent, indent + hanging)

    def field(self, label: str, text: str, label_width: int, indent: str = "") -> None:
        """``label`` padded to ``label_width``, then ``text``; continuation lines align with the text."""
        self._wrap(text, indent + label.ljust(label_width), indent + " " * label_width)

    def table(self, header: list[str], rows: list[list[str]], keys: int = 1, indent: str = "") -> None:
        """Aligned columns (two spaces apart), cells never split. Too wide for the page, the columns after
        the first ``keys`` are cut into groups that fit, one table under the other, each repeating the key
        columns, so every cell stays under its own header."""
        widths = [max(len(_plain(x)) for x in col) for col in zip(header, *rows, strict=True)]
        groups: list[list[int]] = []
        key_width = len(indent) + sum(widths[:keys]) + 2 * keys
        for i in range(keys, len(header)):
            if groups and key_width + sum(widths[j] + 2 for j in groups[-1]) + widths[i] <= self.width:
                groups[-1].append(i)
            else:
                groups.append([i])
        for n, group in enumerate(groups or [[]]):
            if n:
                self._lines.append("")
            cols = list(range(keys)) + group
            for row in [header, *rows]:
                cells = [_plain(row[c]).ljust(widths[c]) for c in cols]
                self._lines.append((indent + "  ".join(cells)).rstrip())

    def _wrap(self, text: str, first: str, rest: str) -> None:
        lines = textwrap.wrap(
            text,
            width=self.width,
            initial_indent=first,
            subsequent_indent=rest,
            break_long_words=False,  # a path is never broken: it could not be copied any more
            break_on_hyphens=False,
        )
        for i, line in enumerate(lines or [first.rstrip()]):
            prefix = first if i == 0 else rest
            word = line[len(prefix) :]
            if len(_plain(line)) > self.width and " " not in word:
                # one word too long for its place (a long path): on a line of its own, indented less
                if prefix.strip():
                    self._lines.append(_plain(prefix.rstrip()))
                line = " " * max(0, min(len(rest), self.width - len(word))) + word
            self._lines.append(_plain(line))

    def text(self) -> str:
        return "\n".join(self._lines)


def job_tasks(r: dict) -> str | None:
    """The line ``repartition`` and ``migrate`` print about the Spark job that wrote the stores (the report's
    ``tasks``): how many tasks ran on which executors; None when the command's own JVM wrote them."""
    tasks = r.get("tasks")
    if not tasks:
        return None
    executors = sorted({t["executor"] for t in tasks})
    return f"as a Spark job: {len(tasks)} tasks on executors {', '.join(executors)}"

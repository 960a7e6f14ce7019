"""Progress of the ``lineagestore`` commands on stderr, drawn by ``rich``: a bar with done/total, percentage,
rate, elapsed time and ETA, and the current item; silent when disabled (``--no-progress``, or
stderr not a terminal that draws: ``draws_on``), so that piped and logged output stays plain."""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    ProgressColumn,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as RichProgress
from rich.text import Text


def draws_on(stream: TextIO) -> bool:
    """Whether the commands draw on ``stream`` (rich's bar, tables fitted to the width): a terminal that can
    move its cursor (not ``TERM=dumb``, where rich draws no live display), outside CI (``CI=true``); else they
    write plain text that logs and scripts read."""
    term = os.environ.get("TERM", "")
    return (
        stream.isatty()
        and os.environ.get("CI", "").lower() != "true"
        and term.lower() not in ("dumb", "unknown")
    )


class _RateColumn(ProgressColumn):
    """Items per second (stores, files: whatever the command counts), from rich's own speed estimate."""

    def render(self, task: Any) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:.1f}/s", style="progress.data.speed")


class Progress:
    """The commands' progress: ``start(label, total)``, ``step(detail, n)`` per item done, ``note(text)`` for a
    line printed above the bar, ``finish()`` (removes the bar). ``stream`` defaults to stderr."""

    def __init__(self, enabled: bool, stream: TextIO | None = None):
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self._bar: RichProgress | None = None
        self._task: Any = None

    def _console(self) -> Console:
        # a terminal's width when drawing to one; 100 columns into anything else (tests' buffers)
        return Console(file=self.stream, force_terminal=True, width=None if self.stream.isatty() else 100)

    def start(self, label: str, total: int) -> None:
        if not self.enabled:
            return
        self.finish()
        self._bar = RichProgress(
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            _RateColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[detail]}", style="dim"),
            console=self._console(),
            transient=True,  # the bar goes when the work is done: the report follows on stdout
        )
        self._task = self._bar.add_task(label, total=total or None, detail="")
        self._bar.start()

    def step(self, detail: str = "", n: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(self._task, advance=n, detail=detail)

    def note(self, text: str) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.console.print(text, markup=False, highlight=False)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = self._task = None


NO_PROGRESS = Progress(False)

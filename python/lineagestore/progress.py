"""A one-line progress indicator for the ``lineagestore`` commands (moved out of ``checkpoint``)."""

from __future__ import annotations

import sys
from typing import TextIO


class Progress:
    """A one-line progress indicator on stderr (``label 3/8 detail``), redrawn in place; silent when
    disabled (not a terminal, ``--no-progress``, ``CI=true``)."""

    def __init__(self, enabled: bool, stream: TextIO | None = None):
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self._label = ""
        self._total = 0
        self._done = 0
        self._width = 0

    def start(self, label: str, total: int) -> None:
        self._label, self._total, self._done = label, total, 0
        self._draw("")

    def step(self, detail: str = "", n: int = 1) -> None:
        self._done += n
        self._draw(detail)

    def note(self, text: str) -> None:
        if self.enabled:
            self._clear()
            self.stream.write(text + "\n")
            self.stream.flush()

    def finish(self) -> None:
        if self.enabled and self._width:
            self._clear()

    def _clear(self) -> None:
        self.stream.write("\r" + " " * self._width + "\r")
        self._width = 0

    def _draw(self, detail: str) -> None:
        if not self.enabled:
            return
        pct = f"{100 * self._done // self._total:3d}%" if self._total else ""
        line = f"{self._label} {self._done}/{self._total} {pct} {detail}"[:110]
        pad = max(0, self._width - len(line))
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()
        self._width = len(line)


NO_PROGRESS = Progress(False)

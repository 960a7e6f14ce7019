"""How a long checkpoint operation reports its progress: the protocol the operations call, and the silent
default. The command line draws it (:class:`lineagestore.cli.progress.Progress`, a bar on stderr); a caller
from Python passes nothing, or its own."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def start(self, label: str, total: int) -> None:
        """Begin a phase of ``total`` items (stores, files)."""

    def step(self, detail: str = "", n: int = 1) -> None:
        """``n`` items done; ``detail`` names the last one."""

    def note(self, text: str) -> None:
        """A line for the reader, outside the counted items."""

    def finish(self) -> None:
        """The phase is over (or failed)."""


class _Silent:
    def start(self, label: str, total: int) -> None:
        pass

    def step(self, detail: str = "", n: int = 1) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def finish(self) -> None:
        pass


NO_PROGRESS: Progress = _Silent()

"""Lines for the person at the terminal while the test harness fetches or builds something slow.

``say(line)`` writes one line where a person sees it: in a pytest run with this package's plugin loaded,
through pytest's terminal reporter with output capture suspended for that line (so minutes of fetching in a
fixture never look like a hang, and the line is not held back until the test fails); elsewhere to stderr.
``Ticker`` turns a long step into one line every few seconds with the time so far and, where known, the
bytes so far.

Only the standard library: the pytest plugin is found through ``sys.modules`` (it is imported by pytest
under its module name), so nothing here imports pytest.
"""

from __future__ import annotations

import sys
import time

PREFIX = "lineagestore.testing"
_PLUGIN = "lineagestore.testing.plugin"


def say(line: str) -> None:
    """Write ``line`` to the terminal, past pytest's output capture when under pytest."""
    plugin = sys.modules.get(_PLUGIN)
    if plugin is not None and plugin.write_to_terminal(line):
        return
    print(line, file=sys.stderr, flush=True)


def megabytes(n: int) -> str:
    """``n`` bytes as decimal megabytes, as Maven Central and the docs give sizes: "686 MB", "0.9 MB"."""
    mb = n / 1e6
    return f"{mb:.1f} MB" if mb < 10 else f"{mb:,.0f} MB"


def duration(seconds: float) -> str:
    """ "42 s", "3 min 05 s"."""
    s = int(round(seconds))
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60:02d} s"


class Ticker:
    """Says ``<what>: <elapsed>[, <detail>]`` at most once per ``every`` seconds, from the thread that
    calls ``tick`` (the caller's: pytest's capture is suspended and resumed on that thread)."""

    def __init__(self, what: str, every: float = 10.0):
        self.what = what
        self.every = every
        self.start = time.monotonic()
        self._last = self.start

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def tick(self, detail: str = "") -> None:
        now = time.monotonic()
        if now - self._last >= self.every:
            self._last = now
            say(f"{PREFIX}: {self.what}: {duration(now - self.start)}{', ' + detail if detail else ''}")

"""Byte sizes and durations as people read and write them (``13.7 KiB``, ``6h``): the one definition, for the
command line's reports and arguments and the operations' progress lines. Imports nothing."""

from __future__ import annotations

import re


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")


def parse_duration_ms(text: str) -> int:
    """``90s``, ``30m``, ``6h``, ``2d``, ``500ms``; a bare number is seconds."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"'{text}' is not a duration such as 90s, 30m, 6h or 2d")
    scale = {"ms": 1, "s": 1000, None: 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}[m.group(2)]
    return int(float(m.group(1)) * scale)


def duration_text(ms: int) -> str:
    """``ms`` exactly, in the largest unit that divides it: ``6h``, ``90s``, ``1500ms``."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def age_text(ms: int) -> str:
    """An age or period for a sentence: whole days, hours or minutes when exact, else whole seconds (``35s``,
    ``6h``, ``0s``)."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms // 1000}s"

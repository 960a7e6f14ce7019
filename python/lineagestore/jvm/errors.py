"""JVM exceptions as Python errors: a call into lineagestore's Scala side that fails with one of its own
exception classes raises the Python error that stands for it, carrying the JVM message (which names the key,
file or value and what to do); any other failure is raised as it came."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

T = TypeVar("T")


def translated(body: Callable[[], T], errors: Mapping[str, Callable[[str], Exception]]) -> T:
    """``body()``, with a JVM exception whose class name is a key of ``errors`` raised as ``errors[name](its
    message)``."""
    try:
        return body()
    except Exception as e:  # PySpark's captured JVM exception, or py4j's
        origin = getattr(e, "_origin", None) or getattr(e, "java_exception", None)
        try:
            cls = origin.getClass().getName() if origin is not None else ""
        except Exception:  # noqa: BLE001 - the JVM object may be gone; keep the original error
            cls = ""
        if cls in errors:
            raise errors[cls](origin.getMessage()) from None
        raise

"""The package's version: the installed distribution's, or the repository's VERSION file in a source checkout.

A module of its own, imported by nothing else of the package, so that every part (the JVM bridge names the
bundled jar by it) can read it without importing the package's public API.
"""

from __future__ import annotations

from importlib import metadata as _metadata
from pathlib import Path as _Path


def _version() -> str:
    try:
        return _metadata.version("lineagestore")
    except _metadata.PackageNotFoundError:  # running from a source checkout without installing
        version_file = _Path(__file__).resolve().parents[2] / "VERSION"
        return version_file.read_text().strip() if version_file.is_file() else "0+unknown"


__version__ = _version()

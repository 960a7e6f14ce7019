"""Start-up options for the JVM the ``lineagestore`` command launches: a class-data sharing archive and, for
short commands, the C1 compiler only.

Where the ~6 s of ``lineagestore inspect`` on a tiny checkpoint went (measured on a loaded 2-core machine):
about 1 s Python and spark-submit's scripts and launcher, 3-6 s the gateway JVM loading and verifying
Spark's and Hadoop's classes and compiling them, under 1 s the tools' own work. A dynamic AppCDS archive
(``-XX:ArchiveClassesAtExit`` on the first run, ``-XX:SharedArchiveFile`` afterwards) maps those classes
already parsed and verified; ``-XX:TieredStopAtLevel=1`` skips C2 compilation, which a command of a few
seconds never profits from (kept for ``verify`` and ``clone``, whose checksums of large files do).

The archive lives in ``$LINEAGESTORE_CACHE/cds`` (default ``~/.cache/lineagestore/cds``), named by what it
depends on (the Spark installation, the jars, pyspark's and lineagestore's versions), so a change starts a
new one; the JVM checks it too and ignores a stale or foreign one (``-Xshare:auto``). Each first run writes
its own temporary file and renames it into place when the JVM has exited, so concurrent commands never see a
half-written archive. ``LINEAGESTORE_CDS=0`` turns the archive off.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

ENV_CDS = "LINEAGESTORE_CDS"


def cache_dir() -> Path:
    return Path(os.environ.get("LINEAGESTORE_CACHE") or Path.home() / ".cache" / "lineagestore") / "cds"


def archive_path(jar: str, jars: list[str], packages: list[str]) -> Path:
    """The archive for this JVM's class path: a name that changes whenever what it archives can change."""
    import pyspark

    from lineagestore._version import __version__

    spark_home = os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)
    parts = [pyspark.__version__, __version__, spark_home, *packages]
    for path in [jar, *jars]:
        try:
            st = os.stat(path)
            parts.append(f"{os.path.abspath(path)}:{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            parts.append(path)
    key = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return cache_dir() / f"tools-{key}.jsa"


class StartOptions:
    """The JVM options for one launch, and what to do once that JVM has exited (:meth:`finish`)."""

    def __init__(self, jar: str, jars: list[str], packages: list[str], short_lived: bool):
        self.options: list[str] = ["-XX:TieredStopAtLevel=1"] if short_lived else []
        self._archive: Path | None = None
        self._writing: Path | None = None
        if os.environ.get(ENV_CDS, "1") == "0":
            return
        archive = archive_path(jar, jars, packages)
        if archive.is_file():
            self.options.append(f"-XX:SharedArchiveFile={archive}")
            return
        try:
            archive.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            return  # no cache directory: run without an archive
        self._archive = archive
        self._writing = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
        self.options.append(f"-XX:ArchiveClassesAtExit={self._writing}")

    @property
    def java_options(self) -> str:
        return " ".join(self.options)

    def finish(self, exited_normally: bool) -> None:
        """Publish the archive this run wrote (only if its JVM exited by itself: a killed one leaves a partial
        file), and remove the temporary file in any case."""
        if self._writing is None:
            return
        try:
            if exited_normally and self._writing.is_file() and self._writing.stat().st_size > 0:
                os.replace(self._writing, self._archive)
                _prune(self._archive.parent)
        except OSError:
            pass
        finally:
            self._writing.unlink(missing_ok=True)


KEEP_ARCHIVES = 4  # about 40 MB each; a rebuilt jar or other --jars make a new one, so drop the oldest


def _prune(directory: Path) -> None:
    archives = sorted(directory.glob("tools-*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in archives[KEEP_ARCHIVES:]:
        old.unlink(missing_ok=True)

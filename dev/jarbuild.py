"""Keep the lineagestore-spark jar that the Python package carries up to date.

Used by the in-tree build backend (dev/jar_backend.py) before building a wheel or an editable install,
and by dev/_setup.sh on every run (``python dev/jarbuild.py``), so an editable install always carries
the jar built from the current Scala sources. Standard library only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JARS_DIR = ROOT / "python" / "lineagestore" / "jars"
# Files whose change means the jar must be rebuilt.
_INPUTS = ("VERSION", "build.sbt", "project", "jvm/core/src/main", "jvm/spark/src/main")


def version() -> str:
    return (ROOT / "VERSION").read_text().strip()


def jar_name() -> str:
    return f"lineagestore-spark_2.13-{version()}.jar"


def sbt_jar() -> Path:
    return ROOT / "jvm" / "spark" / "target" / "scala-2.13" / jar_name()


def _newest_input_mtime() -> float:
    newest = 0.0
    for rel in _INPUTS:
        p = ROOT / rel
        if p.is_file():
            newest = max(newest, p.stat().st_mtime)
        elif p.is_dir():
            for dirpath, dirnames, filenames in os.walk(p):
                dirnames[:] = [d for d in dirnames if d not in ("target", "project")]
                for f in filenames:
                    newest = max(newest, os.stat(os.path.join(dirpath, f)).st_mtime)
    return newest


def ensure_jar(log=print) -> Path:
    """Build the jar with dev/sbt if it is missing or older than the sources; copy it into the package."""
    built = sbt_jar()
    if not built.is_file() or built.stat().st_mtime < _newest_input_mtime():
        log(f"lineagestore: building {built.name} with dev/sbt spark/package ...")
        subprocess.run(
            [str(ROOT / "dev" / "sbt"), "spark/package"], cwd=ROOT, check=True, stdout=sys.stderr
        )
        if not built.is_file():
            raise RuntimeError(f"dev/sbt spark/package did not produce {built}")
    JARS_DIR.mkdir(parents=True, exist_ok=True)
    target = JARS_DIR / built.name
    for old in JARS_DIR.glob("*.jar"):
        if old.name != built.name:
            old.unlink()
    if not target.is_file() or target.stat().st_mtime < built.stat().st_mtime:
        shutil.copy2(built, target)
    return target


if __name__ == "__main__":
    print(ensure_jar(log=lambda m: print(m, file=sys.stderr)))

"""Where the lineagestore-spark jar bundled in this package lives."""

from __future__ import annotations

from pathlib import Path


def jar_name(version: str | None = None) -> str:
    if version is None:
        from lineagestore._version import __version__ as version
    return f"lineagestore-spark_2.13-{version}.jar"


def jar_path() -> str:
    """Return the path of the lineagestore-spark jar carried by this package.

    Raises FileNotFoundError naming the missing file and how to get it.
    """
    path = Path(__file__).resolve().parent.parent / "jars" / jar_name()  # lineagestore/jars/
    if not path.is_file():
        raise FileNotFoundError(
            f"the lineagestore-spark jar is missing: {path} does not exist. "
            "Reinstall the package from a wheel (pip install lineagestore) or, in a source checkout, "
            "run `pip install .`, which builds the jar with sbt and bundles it."
        )
    return str(path)

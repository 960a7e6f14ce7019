"""lineagestore: a lineage-based RocksDB state store for Spark Structured Streaming (Python helpers)."""

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

from lineagestore._jar import jar_path  # noqa: E402
from lineagestore._options_generated import SPARK_VERSION, LineageOptions  # noqa: E402
from lineagestore._session import (  # noqa: E402
    PROVIDER_CLASS,
    RemoteSparkSession,
    SparkAlreadyStarted,
    SparkVersionMismatch,
    check_spark_version,
    configure,
    server_conf,
)

__all__ = [
    "PROVIDER_CLASS",
    "SPARK_VERSION",
    "RemoteSparkSession",
    "LineageOptions",
    "SparkAlreadyStarted",
    "SparkVersionMismatch",
    "__version__",
    "check_spark_version",
    "configure",
    "jar_path",
    "server_conf",
]

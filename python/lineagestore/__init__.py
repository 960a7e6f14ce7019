"""lineagestore: a lineage-based RocksDB state store for Spark Structured Streaming (Python helpers).

The package's parts and what may import what: docs/architecture.md, "The Python package".
"""

from __future__ import annotations

from lineagestore._options_generated import SPARK_VERSION, LineageOptions
from lineagestore._session import (
    PROVIDER_CLASS,
    RemoteSparkSession,
    SparkAlreadyStarted,
    SparkVersionMismatch,
    check_checkpoint_location,
    check_spark_version,
    configure,
    server_conf,
)
from lineagestore._version import __version__
from lineagestore.jvm.jar import jar_path

__all__ = [
    "PROVIDER_CLASS",
    "SPARK_VERSION",
    "RemoteSparkSession",
    "LineageOptions",
    "SparkAlreadyStarted",
    "SparkVersionMismatch",
    "__version__",
    "check_checkpoint_location",
    "check_spark_version",
    "configure",
    "jar_path",
    "server_conf",
]

"""The one home of the JVM bridge: where the bundled jar is (``jar``), what jars and settings the tools' JVM
starts with (``jars``) and its start-up options (``start``), and the typed py4j access to lineagestore's
Scala tools, ``io.lineagestore.tools.CheckpointTools`` (``tools``). Imports nothing of lineagestore but its
version, so everything above may use it.

    from lineagestore.jvm import connect

    with connect() as tools:  # this process's SparkSession JVM if one runs, else a gateway JVM of its own
        ...
"""

from __future__ import annotations

from lineagestore.jvm.tools import (
    FilesystemUnreachable,
    JvmTools,
    MissingFilesystem,
    ToolError,
    ToolsUnavailable,
    connect,
)

__all__ = [
    "FilesystemUnreachable",
    "JvmTools",
    "MissingFilesystem",
    "ToolError",
    "ToolsUnavailable",
    "connect",
]

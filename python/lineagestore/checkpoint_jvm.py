"""The name ``lineagestore.checkpoint_jvm`` of earlier releases (docs and scripts import ``connect`` from it):
the JVM bridge now lives in :mod:`lineagestore.jvm`. Kept so that code written against it keeps working."""

from lineagestore.jvm.tools import (  # noqa: F401
    TOOLS_CLASS,
    JvmTools,
    MissingFilesystem,
    ToolError,
    ToolsUnavailable,
    connect,
)

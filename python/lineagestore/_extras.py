"""Optional packages and the extra (``pip install 'lineagestore[<extra>]'``) that brings each.

The core package needs only pyspark. What a feature needs beyond it is imported where the feature runs,
through :func:`require`, so a missing package gives one line naming the extra to install rather than a bare
``No module named ...`` (or, worse, an error about something else that the import failure caused).
"""

from __future__ import annotations

import importlib
from types import ModuleType

# package (import name) -> extra of pyproject.toml that installs it; test_extras checks pyproject agrees.
# python-state is what PySpark's stateful Python APIs import in its workers; the JVM's check of those workers
# (io.lineagestore.spark.PythonStateCheck, docs/transform-with-state.md) names the same extra.
EXTRA_OF = {
    "matplotlib": "plot",
    "boto3": "testing",
    "botocore": "testing",
    "pytest": "testing",
    "pandas": "python-state",
    "pyarrow": "python-state",
    "google": "python-state",  # google.protobuf
}
# import name -> the distribution that brings it, where they differ
DISTRIBUTION_OF = {"botocore": "boto3", "google": "protobuf"}


class MissingExtra(ImportError):
    """An optional package a feature needs is not installed; the message names the extra that brings it."""


def install_hint(extra: str) -> str:
    return f"pip install 'lineagestore[{extra}]' (from a clone: pip install -e '.[{extra}]')"


def require(module: str, purpose: str) -> ModuleType:
    """Import ``module`` or raise ``MissingExtra``: "<purpose> needs <package>, ...: pip install ..."."""
    try:
        return importlib.import_module(module)
    except ImportError:
        package = module.split(".")[0]
        extra = EXTRA_OF[package]
        raise MissingExtra(
            f"{purpose} needs {package}, which is not installed: {install_hint(extra)}"
        ) from None

"""Optional packages and the extra (``pip install 'lineagestore[<extra>]'``) that brings each.

The core package needs only pyspark. What a feature needs beyond it is imported where the feature runs,
through :func:`require`, so a missing package gives one line naming the extra to install rather than a bare
``No module named ...`` (or, worse, an error about something else that the import failure caused).
"""

from __future__ import annotations

import importlib
from types import ModuleType

# package (import name) -> extra of pyproject.toml that installs it; test_extras checks pyproject agrees.
EXTRA_OF = {"matplotlib": "plot", "boto3": "testing", "botocore": "testing", "pytest": "testing"}


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

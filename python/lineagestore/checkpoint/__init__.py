"""Checkpoint-level operations behind ``lineagestore inspect|verify|gc|clone|repartition|migrate``, as
functions returning the JSON-shaped reports the command line prints (docs/operations.md, "From Python").

Spark's own files are read in :mod:`.spark_files` and a checkpoint's stores are found by :func:`load`
(:mod:`.model`); each operation is a module of its own. lineagestore's format is read and decided in Scala,
reached through :mod:`lineagestore.jvm`. Nothing here prints.

    from lineagestore import checkpoint
    from lineagestore.jvm import connect

    with connect() as tools:
        report = checkpoint.inspect(tools, checkpoint.load(tools, "/data/ckpt/clicks"))
"""

from __future__ import annotations

from lineagestore.checkpoint.cleanup import gc
from lineagestore.checkpoint.cloning import clone
from lineagestore.checkpoint.errors import CheckpointError
from lineagestore.checkpoint.inspection import inspect
from lineagestore.checkpoint.migration import migrate
from lineagestore.checkpoint.model import Checkpoint, Store, load, to_uri
from lineagestore.checkpoint.progress import NO_PROGRESS, Progress
from lineagestore.checkpoint.repartitioning import repartition, undo
from lineagestore.checkpoint.verification import verify

__all__ = [
    "NO_PROGRESS",
    "Checkpoint",
    "CheckpointError",
    "Progress",
    "Store",
    "clone",
    "gc",
    "inspect",
    "load",
    "migrate",
    "repartition",
    "to_uri",
    "undo",
    "verify",
]

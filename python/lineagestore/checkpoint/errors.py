"""The one error of the checkpoint operations."""

from __future__ import annotations


class CheckpointError(Exception):
    """The checkpoint cannot be used as asked (missing, not a checkpoint, unreadable Spark file, a clone
    destination that is not empty). The message names the file and what to do."""

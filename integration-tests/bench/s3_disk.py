"""Keeps the bench's S3 server from filling the machine's disk with objects already deleted.

MinIO moves a deleted object's data into its trash (``.minio.sys/tmp/.trash``) and removes it in the
background, minutes later. A cell at 10M keys of 1 KiB deletes about a gigabyte a batch once its retention
applies, and the next cell starts while the last one's emptied bucket (28 GB) still sits there: the 63-batch
S3 run of ``10m-100k-1k`` lost Spark's provider's cell at version 59 to a PutObject that failed; rerun with
the trash freed, its disk came to 11 GB free at its lowest. On S3 a deleted object takes no space on an
executor's host, so the bench frees it at once.
"""

from __future__ import annotations

import threading
from typing import Any


class FreeDeletedObjects:
    """``with FreeDeletedObjects(s3):`` frees the server's deleted objects every ``every`` seconds while the
    block runs (a cell; what is deleted after it, its bucket, ``run.empty_bucket`` frees). ``s3`` is a
    ``lineagestore.testing.s3.S3Server`` or None (the local store: nothing to do)."""

    def __init__(self, s3: Any, every: float = 10.0):
        self.s3 = s3
        self.every = every
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.s3.purge_deleted()
            except OSError as e:  # the trash renamed or removed under us by MinIO: again next time
                print(f"    (could not free deleted objects: {e})", flush=True)

    def __enter__(self) -> FreeDeletedObjects:
        if self.s3 is not None:
            self._thread = threading.Thread(target=self._run, name="free-deleted-objects", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

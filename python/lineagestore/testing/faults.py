"""Fault injection for tests of streaming queries on lineagestore (real Spark, real files, no mocks).

Checkpoint files (the layout of docs/format.md: ``state/<operator>/<partition>[/<store>]/`` holds
``<version>_<uniqueId>.delta``, ``<version>_<uniqueId>.zip`` whose first entry is the snapshot ``INDEX``, and
``shared/<name>.sst``), on a local checkpoint directory:

* ``state_files(checkpoint, kind)``: the delta / zip / sst files, oldest version first;
* ``corrupt(path)``, ``truncate(path)``, ``delete(path)``: damage one file (and drop the ``.crc`` sidecar
  Hadoop's local filesystem keeps, so lineagestore's own checks are what notices);
* ``corrupt_snapshot_index(zip_path)``: change one byte of the ``INDEX`` of a snapshot zip;
* ``flip_in_place(path, offset)``: damage one local file as a disk fault leaves it, its ``.crc`` sidecar kept
  with the checksums as written (so Hadoop's checksummed read is what notices).

On S3 the same helpers take ``state_files("s3a://<bucket>/<prefix>", kind, client=<boto3 client>)``, which
gives ``S3Object`` s (``str()`` is the ``s3a://`` URI the store's errors name; ``read_bytes()`` and
``write_bytes()`` keep the original at hand to repair the damage).

Each restart of a query opens new state store providers (Spark keys them by query run), each with a fresh
local directory, so the next run reads what these helpers damaged.

Batch attempts:

* ``fail_batch_once(stream, batch_id)``: the ``foreachBatch`` sink of a ``StreamHarness`` fails the first
  attempt of that batch, after the state stores committed it; the restart runs the batch again (same
  version, a new unique ID: the speculation-like second attempt);
* ``rewind(checkpoint, batch_id)``: forget the commits from ``batch_id`` on, so the restart runs that batch
  again from its recorded offsets (a second attempt of an already committed batch).

Failures inside the provider (a JVM hook for tests, ``io.lineagestore.store.InjectedFaults``):

* ``fail_once_at(spark, step, marker_dir)``: a context manager; queries started inside it fail the first
  time any store reaches ``step`` (``COMMIT_STEPS``, ``SNAPSHOT_STEPS``, ``CLEANUP_STEPS``, ``RESTORE_STEPS``;
  ``ALL_STEPS``), or an adjunct maintain does (``ADJUNCT_STEPS``), or a standby copy (``STANDBY_STEPS``), once per
  ``marker_dir``;
* ``fail_commit_once(spark, marker_dir)`` and ``fail_snapshot_upload_once(spark, marker_dir)``: the usual
  two.

Faults of the S3 connection itself (an S3 proxy) are not here: see the plugin's ``s3_faults`` place.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FAULT_PREFIX = "spark.sql.streaming.stateStore.lineagestoreTest."
FAIL_ONCE_AT = FAULT_PREFIX + "failOnceAt"
MARKER_DIR = FAULT_PREFIX + "markerDir"
# io.lineagestore.store.CrashPoints.All (jvm/core/.../store/StoreSettings.scala)
COMMIT_STEPS = ("commit.before-delta", "commit.after-delta", "commit.after-local-apply")
SNAPSHOT_STEPS = ("snapshot.after-freeze", "snapshot.after-blobs", "snapshot.after-zip")
CLEANUP_STEPS = ("cleanup.after-zips", "cleanup.after-blobs", "cleanup.after-deltas")
RESTORE_STEPS = ("restore.after-snapshot-files", "restore.after-replay")
CATCH_UP_STEPS = ("catch-up.before-upload",)
CLOSE_STEPS = ("close.before-upload", "close.after-upload")
ALL_STEPS = COMMIT_STEPS + SNAPSHOT_STEPS + CLEANUP_STEPS + RESTORE_STEPS + CATCH_UP_STEPS + CLOSE_STEPS
# io.lineagestore.store.CrashPoints.AdjunctMaintain: an adjunct table's maintain (a task after committing its
# partition's checkpoint; the driver before the table record), kept apart from the steps every store reaches
ADJUNCT_STEPS = ("adjunct.after-partition-commit", "adjunct.before-record")
# io.lineagestore.store.CrashPoints.Standby: a standby copy's refresh (files restored, record not written),
# reached only on an executor that holds standbys (standbyReplicas)
STANDBY_STEPS = ("standby.after-files",)

_V2 = re.compile(r"^(\d+)_([A-Za-z0-9-]{1,64})\.(delta|zip)$")


class InjectedBatchFailure(RuntimeError):
    """Raised by ``fail_batch_once`` in the sink: a deliberate failure of one batch attempt."""


# ------------------------------------------------------------------------------------------ checkpoint files
@dataclass(frozen=True)
class S3Object:
    """A checkpoint file on S3, read and rewritten through a boto3 ``client`` (the S3 server's own API, not
    s3a, so the store's reads are what notices the damage)."""

    client: Any
    bucket: str
    key: str

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    def __str__(self) -> str:
        return f"s3a://{self.bucket}/{self.key}"

    def read_bytes(self) -> bytes:
        return self.client.get_object(Bucket=self.bucket, Key=self.key)["Body"].read()

    def write_bytes(self, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self.key, Body=data)

    def unlink(self) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self.key)


File = Path | S3Object


def state_files(
    checkpoint: str | os.PathLike,
    kind: str = "delta",
    operator: int = 0,
    partition: int | None = None,
    client: Any = None,
) -> list[Any]:
    """Files of one kind (``delta``, ``zip`` or ``sst``) under ``state/<operator>/``, by version then name:
    ``Path`` s, or ``S3Object`` s for an ``s3a://`` / ``s3://`` checkpoint (then ``client`` is a boto3 client
    of that server, e.g. ``s3_server.boto3_client()``)."""
    if kind not in ("delta", "zip", "sst"):
        raise ValueError(f"kind must be delta, zip or sst, not {kind!r}")
    under = f"state/{operator}" + ("" if partition is None else f"/{partition}")
    found: list[tuple[int, str, Any]] = []
    remote = re.match(r"^s3a?://([^/]+)/?(.*)$", str(checkpoint))
    if remote:
        if client is None:
            raise ValueError(f"{checkpoint} is on S3: pass client= (a boto3 client of that server)")
        bucket, prefix = remote.group(1), remote.group(2).strip("/")
        root = f"{prefix}/{under}/".lstrip("/")
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=root):
            for o in page.get("Contents", []):
                obj = S3Object(client, bucket, o["Key"])
                if obj.name.endswith(f".{kind}") and not obj.name.startswith("."):
                    found.append((_version(obj.name), obj.key, obj))
        where = f"s3a://{bucket}/{root}"
    else:
        root_path = Path(checkpoint) / under
        for path in root_path.rglob(f"*.{kind}"):
            if not path.name.startswith("."):
                found.append((_version(path.name), str(path), path))
        where = str(root_path)
    if not found:
        raise FileNotFoundError(f"no .{kind} files under {where}")
    return [p for _, _, p in sorted(found, key=lambda f: f[:2])]


def _version(name: str) -> int:
    m = _V2.match(name)
    return int(m.group(1)) if m else -1


def _file(path: str | os.PathLike | S3Object) -> File:
    return path if isinstance(path, S3Object) else Path(path)


def _drop_crc(path: File) -> None:
    if isinstance(path, Path):
        crc = path.with_name(f".{path.name}.crc")
        with contextlib.suppress(FileNotFoundError):
            crc.unlink()


def _rewrite(p: File, data: bytes) -> None:
    p.write_bytes(data)
    _drop_crc(p)


def corrupt(path: str | os.PathLike | S3Object, offset: int | None = None, nbytes: int = 1) -> File:
    """Flip ``nbytes`` bytes of ``path`` at ``offset`` (default: the middle); returns the path."""
    p = _file(path)
    data = bytearray(p.read_bytes())
    if not data:
        raise ValueError(f"{p} is empty; nothing to corrupt")
    start = len(data) // 2 if offset is None else offset
    for i in range(start, min(start + nbytes, len(data))):
        data[i] ^= 0xFF
    _rewrite(p, bytes(data))
    return p


def truncate(path: str | os.PathLike | S3Object, size: int | None = None) -> File:
    """Cut ``path`` to ``size`` bytes (default: half), as an interrupted write would leave it."""
    p = _file(path)
    data = p.read_bytes()
    _rewrite(p, data[: len(data) // 2 if size is None else size])
    return p


def delete(path: str | os.PathLike | S3Object) -> File:
    """Remove ``path`` (and its ``.crc``), as a lost object or an over-eager clean-up would."""
    p = _file(path)
    p.unlink()
    _drop_crc(p)
    return p


def corrupt_snapshot_index(zip_path: str | os.PathLike | S3Object) -> File:
    """Rewrite the snapshot zip with one byte of its ``INDEX`` entry changed (its checksum no longer holds)."""
    p = _file(zip_path)
    with zipfile.ZipFile(io.BytesIO(p.read_bytes())) as src:
        entries = [(info, src.read(info)) for info in src.infolist()]
    if not entries or entries[0][0].filename != "INDEX":
        raise ValueError(f"{p} is not a lineagestore snapshot (its first entry is not INDEX)")
    index = bytearray(entries[0][1])
    pos = index.index(b"\ncheckpoint ") + len(b"\ncheckpoint ")  # a digit of the version
    index[pos] = ord("9") if index[pos] != ord("9") else ord("8")
    entries[0] = (entries[0][0], bytes(index))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as out:
        for info, data in entries:
            out.writestr(info, data)
    _rewrite(p, buf.getvalue())
    return p


def flip_in_place(path: str | os.PathLike, offset: int) -> Path:
    """Invert the byte at ``offset`` of the local file ``path`` in place, as a disk fault does: Hadoop's
    ``.crc`` sidecar beside it keeps the checksums as written (``corrupt`` drops it). Returns the path."""
    p = Path(path)
    with open(p, "r+b") as out:
        out.seek(offset)
        b = out.read(1)
        if not b:
            raise ValueError(f"{p} has no byte at offset {offset}")
        out.seek(offset)
        out.write(bytes([b[0] ^ 0xFF]))
    return p


# ------------------------------------------------------------------------------------------ batch attempts
def fail_batch_once(stream: Any, batch_id: int) -> None:
    """Make the ``foreachBatch`` sink of ``stream`` (a StreamHarness) fail the first attempt of ``batch_id``.

    The state stores have committed the batch when the sink runs; Spark writes the commit log only after
    the sink. So the run fails, and the next run executes the batch again on the same state version.
    """
    attempts: dict[int, int] = {}

    def hook(df: Any, bid: int) -> None:
        if bid == batch_id:
            attempts[bid] = attempts.get(bid, 0) + 1
            if attempts[bid] == 1:
                raise InjectedBatchFailure(f"injected failure of the first attempt of batch {bid}")

    stream.batch_hooks.append(hook)


def rewind(checkpoint: str | os.PathLike, batch_id: int) -> list[int]:
    """Forget the commits of batches ``>= batch_id`` (and the offsets after ``batch_id``): the next run of
    the query executes ``batch_id`` again, from the offsets recorded for it. Returns the batches forgotten."""
    root = Path(checkpoint)
    commits = sorted(int(p.name) for p in (root / "commits").iterdir() if p.name.isdigit())
    if batch_id not in commits:
        raise ValueError(f"batch {batch_id} is not committed in {root / 'commits'} (committed: {commits})")
    forgotten = [b for b in commits if b >= batch_id]
    for b in forgotten:
        delete(root / "commits" / str(b))
    for p in (root / "offsets").iterdir():
        if p.name.isdigit() and int(p.name) > batch_id:
            delete(p)
    return forgotten


# ------------------------------------------------------------------------------ failures inside the provider
@contextlib.contextmanager
def fail_once_at(spark: Any, step: str | tuple[str, ...], marker_dir: str | os.PathLike) -> Iterator[Path]:
    """Queries started inside the block fail (``InjectedFault`` in the task) the first time any state store
    reaches ``step``, once per ``marker_dir`` (the JVM creates ``<marker_dir>/<step>`` when it fires).

    Local mode runs a failed task once, so the query stops with the error; restart it to recover.
    ``snapshot.after-freeze`` runs inside the commit; the other snapshot steps and the clean-up steps run in
    Spark's maintenance thread, whose failure the query does not see. The restore steps run in the task that
    loads a store when it rebuilds its local directory (e.g. a restart on a fresh one).
    """
    steps = (step,) if isinstance(step, str) else tuple(step)
    known = ALL_STEPS + ADJUNCT_STEPS + STANDBY_STEPS
    unknown = [s for s in steps if s not in known]
    if unknown:
        raise ValueError(f"unknown step(s) {unknown}; steps: {known}")
    marker = Path(marker_dir)
    marker.mkdir(parents=True, exist_ok=True)
    spark.conf.set(FAIL_ONCE_AT, ",".join(steps))
    spark.conf.set(MARKER_DIR, str(marker))
    try:
        yield marker
    finally:
        spark.conf.unset(FAIL_ONCE_AT)
        spark.conf.unset(MARKER_DIR)


def fired(marker_dir: str | os.PathLike, step: str) -> bool:
    """True once the fault at ``step`` has fired for ``marker_dir``."""
    return (Path(marker_dir) / step).exists()


def fail_commit_once(spark: Any, marker_dir: str | os.PathLike, step: str = "commit.after-delta"):
    """The task fails in the state store commit, after the delta was written (default) or at another
    commit step: an orphan attempt file the lineage must never pick up."""
    if step not in COMMIT_STEPS:
        raise ValueError(f"{step!r} is not a commit step: {COMMIT_STEPS}")
    return fail_once_at(spark, step, marker_dir)


def fail_snapshot_upload_once(spark: Any, marker_dir: str | os.PathLike, step: str = "snapshot.after-blobs"):
    """A snapshot upload fails after its shared blobs were uploaded (default) and before its zip exists."""
    if step not in SNAPSHOT_STEPS[1:]:
        raise ValueError(f"{step!r} is not an upload step: {SNAPSHOT_STEPS[1:]}")
    return fail_once_at(spark, step, marker_dir)

"""Fault injection for tests of streaming queries on lineagestore (real Spark, real files, no mocks).

Checkpoint files (the layout of docs/format.md: ``state/<operator>/<partition>[/<store>]/`` holds
``<version>_<uniqueId>.delta``, ``<version>_<uniqueId>.zip`` whose first entry is the snapshot ``INDEX``, and
``shared/<name>.sst``), on a local checkpoint directory:

* ``state_files(checkpoint, kind)``: the delta / zip / sst files, oldest version first;
* ``corrupt(path)``, ``truncate(path)``, ``delete(path)``: damage one file (and drop the ``.crc`` sidecar
  Hadoop's local filesystem keeps, so lineagestore's own checks are what notices);
* ``corrupt_snapshot_index(zip_path)``: change one byte of the ``INDEX`` of a snapshot zip.

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
  time any store reaches ``step`` (``COMMIT_STEPS``, ``SNAPSHOT_STEPS``, ``CLEANUP_STEPS``), once per
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
from pathlib import Path
from typing import Any

FAULT_PREFIX = "spark.sql.streaming.stateStore.lineagestoreTest."
FAIL_ONCE_AT = FAULT_PREFIX + "failOnceAt"
MARKER_DIR = FAULT_PREFIX + "markerDir"
# io.lineagestore.store.CrashPoints.All (jvm/core/.../store/StoreSettings.scala)
COMMIT_STEPS = ("commit.before-delta", "commit.after-delta", "commit.after-local-apply")
SNAPSHOT_STEPS = ("snapshot.after-freeze", "snapshot.after-blobs", "snapshot.after-zip")
CLEANUP_STEPS = ("cleanup.after-zips", "cleanup.after-blobs", "cleanup.after-deltas")

_V2 = re.compile(r"^(\d+)_([A-Za-z0-9-]{1,64})\.(delta|zip)$")


class InjectedBatchFailure(RuntimeError):
    """Raised by ``fail_batch_once`` in the sink: a deliberate failure of one batch attempt."""


# ------------------------------------------------------------------------------------------ checkpoint files
def state_files(
    checkpoint: str | os.PathLike, kind: str = "delta", operator: int = 0, partition: int | None = None
) -> list[Path]:
    """Files of one kind (``delta``, ``zip`` or ``sst``) under ``state/<operator>/``, by version then name."""
    if kind not in ("delta", "zip", "sst"):
        raise ValueError(f"kind must be delta, zip or sst, not {kind!r}")
    root = Path(checkpoint) / "state" / str(operator)
    if partition is not None:
        root = root / str(partition)
    found = []
    for path in root.rglob(f"*.{kind}"):
        if path.name.startswith("."):
            continue
        m = _V2.match(path.name)
        found.append((int(m.group(1)) if m else -1, str(path), path))
    if not found:
        raise FileNotFoundError(f"no .{kind} files under {root}")
    return [p for _, _, p in sorted(found)]


def _drop_crc(path: Path) -> None:
    crc = path.with_name(f".{path.name}.crc")
    with contextlib.suppress(FileNotFoundError):
        crc.unlink()


def corrupt(path: str | os.PathLike, offset: int | None = None, nbytes: int = 1) -> Path:
    """Flip ``nbytes`` bytes of ``path`` at ``offset`` (default: the middle); returns the path."""
    p = Path(path)
    data = bytearray(p.read_bytes())
    if not data:
        raise ValueError(f"{p} is empty; nothing to corrupt")
    start = len(data) // 2 if offset is None else offset
    for i in range(start, min(start + nbytes, len(data))):
        data[i] ^= 0xFF
    p.write_bytes(bytes(data))
    _drop_crc(p)
    return p


def truncate(path: str | os.PathLike, size: int | None = None) -> Path:
    """Cut ``path`` to ``size`` bytes (default: half), as an interrupted write would leave it."""
    p = Path(path)
    length = p.stat().st_size
    with open(p, "r+b") as f:
        f.truncate(length // 2 if size is None else size)
    _drop_crc(p)
    return p


def delete(path: str | os.PathLike) -> Path:
    """Remove ``path`` (and its ``.crc``), as a lost object or an over-eager clean-up would."""
    p = Path(path)
    p.unlink()
    _drop_crc(p)
    return p


def corrupt_snapshot_index(zip_path: str | os.PathLike) -> Path:
    """Rewrite the snapshot zip with one byte of its ``INDEX`` entry changed (its checksum no longer holds)."""
    p = Path(zip_path)
    with zipfile.ZipFile(p) as src:
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
    p.write_bytes(buf.getvalue())
    _drop_crc(p)
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
    Spark's maintenance thread, whose failure the query does not see.
    """
    steps = (step,) if isinstance(step, str) else tuple(step)
    unknown = [s for s in steps if s not in COMMIT_STEPS + SNAPSHOT_STEPS + CLEANUP_STEPS]
    if unknown:
        raise ValueError(f"unknown step(s) {unknown}; steps: {COMMIT_STEPS + SNAPSHOT_STEPS + CLEANUP_STEPS}")
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

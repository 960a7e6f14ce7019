"""Issue 46's corruption suite: a committed checkpoint's state files damaged in every region, each resumed cold.

The matrix (``damage_matrix.py``: provider x filesystem x file kind x region) is generated, not listed. By
default only ``SAMPLE`` runs (lineagestore, each kind of file once, every filesystem, about a minute): that is
what ``dev/test`` runs. The whole matrix, Spark's own RocksDB provider included as the comparison:

    LINEAGESTORE_DAMAGE_MATRIX=full LINEAGESTORE_DAMAGE_REPORT=/tmp/damage.md \\
        pytest integration-tests/test_damage_matrix.py

which writes the table of docs/reliability.md ("The damage matrix") and one line per case to the report.

Per provider one baseline is built once on the local filesystem (a query running 5 batches, waiting for the
snapshots of versions 2 and 4 to be uploaded by maintenance), then every case runs on a copy of it (local: a
directory copy that keeps the ``.crc`` sidecars; s3a: its files but the sidecars put into a new prefix of a
bucket on the real S3 server, read back through s3a), damaged, and resumed cold: every loaded state store
closed first (``StateStore.unloadAll``, as on a new executor), a new query run on a checkpoint path no
provider has seen, and for lineagestore an empty ``localDir``. The resumed run reads one more input file; its
complete-mode output is every key's count, compared whole with the oracle.

lineagestore must give exact results wherever a route around the damage exists and its named error
otherwise; Spark's provider's outcomes are recorded, not asserted (they are the comparison).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from damage_matrix import (
    HEAD,
    LOCAL_CRC_DROPPED,
    NAMED,
    ROUTED,
    S3A,
    SAMPLE,
    SNAPSHOTS,
    all_cases,
    classify,
    has_route,
    store_files,
    write_report,
)
from lineagestore.testing.faults import S3Object
from lineagestore.testing.harness import PROVIDER_CLASSES, close_state_stores, describe_failure

PROVIDER = "spark.sql.streaming.stateStore.providerClass"
LOCAL_DIR = "spark.sql.streaming.stateStore.lineagestore.localDir"
FULL = os.environ.get("LINEAGESTORE_DAMAGE_MATRIX", "sample") == "full"
REPORT = os.environ.get("LINEAGESTORE_DAMAGE_REPORT")
CASES = all_cases() if FULL else list(SAMPLE)
RUN_TIMEOUT_S = 180
_RESULTS: list[dict] = []


def _batch(i: int) -> list[str]:
    """Batch ``i``'s keys: 200 shared by every batch and 200 of its own (enough for an SST per snapshot)."""
    return [f"a{j}" for j in range(200)] + [f"k{i}-{j}" for j in range(200)]


RESUME_KEYS = [f"a{j}" for j in range(0, 200, 3)] + ["new"]


def _expected() -> dict[str, int]:
    return dict(Counter(k for i in range(HEAD) for k in _batch(i)) + Counter(RESUME_KEYS))


def _write(path: Path, keys: list[str]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(json.dumps({"k": k}) + "\n" for k in keys))
    os.replace(tmp, path)


def _query(spark, source: Path, checkpoint: str, latest: dict):
    def sink(df, _batch_id):
        rows = {r["k"]: r["count"] for r in df.collect()}
        latest.clear()
        latest.update(rows)

    counts = spark.readStream.schema("k string").option("maxFilesPerTrigger", 1).json(str(source))
    return counts.groupBy("k").count().writeStream.outputMode("complete").foreachBatch(sink)


class Storage:
    """Where the copies of a baseline live: a local directory, or a prefix per copy in the S3 bucket."""

    def __init__(self, root: Path, s3=None, bucket: str | None = None):
        self.root, self.s3, self.bucket = root, s3, bucket
        self.client = s3.boto3_client() if s3 else None

    def location(self, name: str) -> str:
        return f"s3a://{self.bucket}/{name}" if self.s3 else str(self.root / name)

    def copy(self, baseline: Path, name: str) -> None:
        """A copy of the local checkpoint ``baseline`` as checkpoint ``name``: on the local filesystem with
        its ``.crc`` sidecars; on S3 every file but the sidecars (s3a keeps none), put through the S3 API."""
        if not self.s3:
            shutil.copytree(baseline, self.root / name)
            return
        for path in sorted(p for p in baseline.rglob("*") if p.is_file() and not p.name.startswith(".")):
            key = f"{name}/{path.relative_to(baseline).as_posix()}"
            self.client.put_object(Bucket=self.bucket, Key=key, Body=path.read_bytes())

    def store_listing(self, name: str) -> list:
        """The files under ``state/0/0/`` of checkpoint ``name`` (any depth: SSTs/, shared/)."""
        if not self.s3:
            return [p for p in (self.root / name / "state" / "0" / "0").rglob("*") if p.is_file()]
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=f"{name}/state/0/0/"
        )
        return [
            S3Object(self.client, self.bucket, o["Key"]) for page in pages for o in page.get("Contents", [])
        ]


class Baselines:
    """One committed checkpoint per provider, on the local filesystem, built on first use; each case runs
    on a copy of it, local or on S3 (the same bytes: what a checkpoint written through s3a holds)."""

    def __init__(self, spark, tmp: Path, s3_server):
        self.spark, self.tmp, self.s3_server = spark, tmp, s3_server
        self._built: dict[str, tuple[Path, Path]] = {}
        self._storages: dict[str, Storage] = {}

    def storage(self, filesystem: str) -> Storage:
        kind = "s3a" if filesystem == S3A else "local"
        if kind not in self._storages:
            if kind == "local":
                self._storages[kind] = Storage(self.tmp / "copies")
            else:
                bucket = self.s3_server.bucket(f"ls-damage-{uuid.uuid4().hex[:10]}")
                hadoop_conf = self.spark.sparkContext._jsc.hadoopConfiguration()
                for key, value in self.s3_server.hadoop_conf(bucket).items():
                    hadoop_conf.set(key, value)
                self._storages[kind] = Storage(self.tmp / "s3", self.s3_server, bucket)
        return self._storages[kind]

    def get(self, provider: str) -> tuple[Path, Path]:
        """(the baseline checkpoint, its input directory) of ``provider``."""
        if provider not in self._built:
            source, checkpoint = self.tmp / f"in-{provider}", self.tmp / f"base-{provider}"
            source.mkdir(parents=True)
            self._build(provider, checkpoint, source)
            _write(source / "resume.json", RESUME_KEYS)  # unseen by the baseline: each resumed copy reads it
            self._built[provider] = (checkpoint, source)
        return self._built[provider]

    def _build(self, provider: str, checkpoint: Path, source: Path) -> None:
        spark = self.spark
        spark.conf.set(PROVIDER, PROVIDER_CLASSES[provider])
        spark.conf.set(LOCAL_DIR, str(self.tmp / f"local-{uuid.uuid4().hex[:8]}"))
        latest: dict = {}
        query = (
            _query(spark, source, str(checkpoint), latest)
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="200 milliseconds")
            .start()
        )
        store = checkpoint / "state" / "0" / "0"
        try:
            for i in range(HEAD):
                _write(source / f"{i}.json", _batch(i))
                _await(lambda i=i: (query.lastProgress or {}).get("batchId", -1) >= i, query, f"batch {i}")
                if i + 1 in SNAPSHOTS:  # maintenance uploads the snapshot of version i + 1 (interval 1 s)
                    _await(lambda i=i: any(store.glob(f"{i + 1}_*.zip")), query, f"zip {i + 1}")
        finally:
            query.stop()
        close_state_stores(spark)
        time.sleep(1.5)  # an upload a maintenance thread had started lands now, not in a copy
        files = store_files(provider, [p for p in store.rglob("*") if p.is_file()], keep_crc=True)
        assert sorted(files.deltas) == list(range(1, HEAD + 1)), sorted(files.deltas)
        assert set(SNAPSHOTS) <= set(files.zips) and max(files.zips) < HEAD, sorted(files.zips)


def _await(ready, query, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if query.exception() is not None:
            raise AssertionError(f"the baseline query failed before {what}: {query.exception()}")
        assert time.monotonic() < deadline, f"the baseline query did not reach {what} in {timeout_s}s"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def baselines(spark, s3_server, tmp_path_factory):
    saved = {k: spark.conf.get(k, None) for k in (PROVIDER, LOCAL_DIR)}
    b = Baselines(spark, tmp_path_factory.mktemp("damage"), s3_server)
    yield b
    for k, v in saved.items():
        spark.conf.unset(k) if v is None else spark.conf.set(k, v)
    if REPORT and _RESULTS:
        write_report(_RESULTS, Path(REPORT))


def _resume(spark, provider: str, source: Path, checkpoint: str, local_dir: Path):
    """Runs the query once on ``checkpoint`` (one new input file): (latest output, progress, error text)."""
    close_state_stores(spark)  # nothing of an earlier case stays loaded: a new executor's view
    spark.conf.set(PROVIDER, PROVIDER_CLASSES[provider])
    spark.conf.set(LOCAL_DIR, str(local_dir))
    latest: dict = {}
    query = (
        _query(spark, source, checkpoint, latest)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    try:
        if not query.awaitTermination(RUN_TIMEOUT_S):
            return latest, None, f"the resumed run did not finish within {RUN_TIMEOUT_S}s"
    except Exception as exc:  # StreamingQueryException: the outcome under test
        return latest, None, describe_failure(exc)
    finally:
        if query.isActive:
            query.stop()
    return latest, query.lastProgress, None


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_damage_resumed_cold(case, spark, baselines, s3_server, tmp_path):
    baseline, source = baselines.get(case.provider)
    storage = baselines.storage(case.filesystem)
    name = f"case-{uuid.uuid4().hex[:10]}"
    storage.copy(baseline, name)
    files = store_files(
        case.provider, storage.store_listing(name), keep_crc=case.filesystem != LOCAL_CRC_DROPPED
    )
    damaged = []
    for f, damage in case.damage.plan(files):
        before = f.read()
        after = damage(before)
        assert after != before, f"{case.id}: the damage changed nothing in {f.name}"
        f.write(after)
        damaged.append(f.name)
    route = has_route(files, set(damaged))

    latest, progress, error = _resume(spark, case.provider, source, storage.location(name), tmp_path / "cold")
    exact = error is None and latest == _expected()
    outcome = classify(case.provider, error, exact, damaged)
    detours = (
        sum(
            op.get("customMetrics", {}).get("lineagestoreSnapshotDetours", 0)
            for op in progress["stateOperators"]
        )
        if progress and case.provider == "lineagestore"
        else ""
    )
    _RESULTS.append(
        {
            "id": case.id,
            "provider": case.provider,
            "filesystem": case.filesystem,
            "kind": case.damage.kind,
            "region": case.damage.region,
            "damaged": damaged,
            "route": route,
            "outcome": outcome,
            "detours": detours,
            "error": error,
        }
    )
    if case.provider == "lineagestore":
        if route:
            assert outcome == ROUTED, (
                f"{case.id}: a route exists around {damaged}, but: {outcome}\n{error or ''}"
            )
        else:
            assert outcome == NAMED, (
                f"{case.id}: no route around {damaged}; wanted the named error, got {outcome}\n{error or ''}"
            )
            assert "no other route rebuilds" in error or len(damaged) == 1, error

"""Standby copies on the 3-executor cluster (issue 51): with ``standbyReplicas = -1`` every executor other
than a store's own keeps a copy of the store's newest snapshot, so when an executor is lost the retried tasks
of its stores start from local files wherever they land.

Each scenario runs one long-lived query (stores stay on their executors from batch to batch, as in
production), waits until the copies hold the newest snapshot, then loses executors mid-batch as a lost
machine would (SIGKILL, and its host's lineagestore directory removed). Invariants: every batch's output
equals the plain-Python oracle's; the batch of the loss reports loads from standbys
(``lineagestoreLoadsFromStandby``) for the lost stores and downloads less than those copies held; a copy
that is damaged or half there changes only what is downloaded, never a result; ``verify`` is clean.
"""

from __future__ import annotations

import hashlib
import shutil
import threading
import time
from pathlib import Path

import pytest
from test_cluster import _assert_checkpoint_clean

from lineagestore.testing import oracle
from lineagestore.testing.harness import PROVIDER_CLASSES, StreamHarness

PARTITIONS = 6
STANDBY_KEY = "spark.sql.streaming.stateStore.lineagestore.standbyReplicas"


@pytest.fixture
def harness(spark, cluster, tmp_path):
    cluster.await_executors(spark)  # an earlier test's kill: its replacement must be back
    spark.conf.set("spark.sql.shuffle.partitions", str(PARTITIONS))
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", PROVIDER_CLASSES["lineagestore"])
    spark.conf.set(STANDBY_KEY, "-1")
    # Each batch is one small file; split it across the cores (Spark's split size is the larger of this and
    # the bytes per core) so its map tasks, and then the stores, spread over the executors as a production
    # input's do (one map task would make every reducer prefer its executor). An executor with no store of
    # the query still keeps copies (StandbyPlugin tells it of the operator): the waits below require it.
    spark.conf.set("spark.sql.files.openCostInBytes", "1")
    h = StreamHarness(spark, tmp_path / "stream")
    yield h
    for q in spark.streams.active:
        q.stop()
    spark.conf.unset(STANDBY_KEY)
    spark.conf.unset("spark.sql.files.openCostInBytes")


def _key(location: str) -> str:
    """LocalDirectories.keyOf: the local directory name of the store at ``location``."""
    return hashlib.sha256(location.encode()).digest()[:16].hex()


def _standbys(cluster, checkpoint: Path) -> dict[str, dict[int, tuple[int, str, Path]]]:
    """Per host, per partition of operator 0: (snapshot version, store location, copy directory) of each
    complete standby copy (one with a STANDBY record)."""
    out: dict[str, dict[int, tuple[int, str, Path]]] = {}
    for host in cluster.hosts:
        out[host] = {}
        for record in (cluster.local_dir(host) / "lineagestore" / "standby").glob("*/STANDBY"):
            try:
                fields = dict(line.split(" ", 1) for line in record.read_text().splitlines() if " " in line)
            except OSError:
                continue  # being replaced
            loc = fields.get("location", "").rstrip("/")
            if str(checkpoint) in loc and "/state/0/" in loc:
                out[host][int(loc.rsplit("/", 1)[1])] = (
                    int(fields["snapshot"].split()[0]),
                    loc,
                    record.parent,
                )
    return out


def _newest_snapshots(checkpoint: Path) -> dict[int, int]:
    newest = {p: 0 for p in range(PARTITIONS)}
    for z in (checkpoint / "state" / "0").glob("*/*.zip"):
        newest[int(z.parent.name)] = max(newest[int(z.parent.name)], int(z.name.split("_")[0]))
    return newest


def _await_standbys(cluster, checkpoint: Path, timeout_s: float = 90) -> dict[int, str]:
    """Until every partition's newest snapshot on storage is copied on every host but its owner's; returns
    each partition's store location."""
    deadline = time.monotonic() + timeout_s
    seen, since = None, time.monotonic()
    while True:
        newest = _newest_snapshots(checkpoint)
        if newest != seen:  # maintenance may still be uploading a frozen snapshot: wait until none comes
            seen, since = newest, time.monotonic()
        copies = _standbys(cluster, checkpoint)
        held = {p: sum(1 for h in cluster.hosts if copies[h].get(p, (-1,))[0] >= newest[p]) for p in newest}
        settled = time.monotonic() - since >= 3
        if settled and all(newest.values()) and min(held.values()) >= len(cluster.hosts) - 1:
            return {p: loc for h in cluster.hosts for p, (_, loc, _) in copies[h].items()}
        if time.monotonic() > deadline:
            raise AssertionError(
                f"standby copies at the newest snapshot per partition: {held}, newest {newest}; copies per host "
                f"(partition: version): { {h: {p: v for p, (v, _, _) in c.items()} for h, c in copies.items()} }; "
                f"store directories per host: { {h: _store_dirs(cluster, h) for h in cluster.hosts} }"
            )
        time.sleep(0.5)


def _store_dirs(cluster, host: str) -> list[str]:
    d = cluster.local_dir(host) / "lineagestore" / "stores"
    return sorted(p.name[:8] + ("(closed)" if (p / "CLEAN_CLOSE").exists() else "") for p in d.glob("*"))


def _owners(cluster, locations: dict[int, str]) -> dict[int, list[str]]:
    """Hosts whose disk holds each partition's store directory (its own, not a standby)."""
    return {
        p: [
            h
            for h in cluster.hosts
            if (cluster.local_dir(h) / "lineagestore" / "stores" / _key(loc)).is_dir()
        ]
        for p, loc in locations.items()
    }


class _Query:
    """One long-lived query over the harness's input: a running aggregation whose output goes through a
    UDF that holds each executor's first task a few seconds in an armed batch, so a loss lands mid-batch."""

    def __init__(self, harness: StreamHarness, tmp_path: Path):
        from pyspark.sql import functions as F

        self.armed = tmp_path / "armed"
        self.started = tmp_path / "started"
        armed, started = str(self.armed), str(self.started)

        def slow(total):
            import os

            # once per Python worker in an armed batch: its first row holds the task a few seconds
            if os.path.exists(armed) and os.environ.get("LINEAGESTORE_TEST_HELD") != armed:
                os.environ["LINEAGESTORE_TEST_HELD"] = armed
                open(started, "a").close()
                time.sleep(4)
            return total

        df = oracle.running_aggregate_query(harness).select(
            "k", "cnt", F.udf(slow, "long")("total").alias("total")
        )
        self.q = (
            df.writeStream.outputMode("update")
            .option("checkpointLocation", str(harness.checkpoint))
            .foreachBatch(harness._collect)
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    def batch(self) -> None:
        self.q.processAllAvailable()

    def progress_of(self, batch_id: int) -> dict:
        import json

        found = [json.loads(p.json) for p in self.q.recentProgress if p.batchId == batch_id]
        assert found, f"no progress for batch {batch_id}"
        return found[-1]

    def lose_mid_batch(self, cluster, victims: list[str]) -> None:
        """Runs the next batch with ``victims`` lost while its tasks run: each executor SIGKILLed and its
        host's lineagestore directory removed (a lost machine)."""
        killed: list[int] = []

        def kill_when_started():
            deadline = time.monotonic() + 120
            while not self.started.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            for host in victims:
                killed.append(cluster.kill_executor(host))
            for host in victims:
                shutil.rmtree(cluster.local_dir(host) / "lineagestore", ignore_errors=True)

        self.armed.touch()
        killer = threading.Thread(target=kill_when_started)
        killer.start()
        try:
            self.batch()
        finally:
            killer.join()
            self.armed.unlink()
            self.started.unlink(missing_ok=True)
        assert len(killed) == len(victims), "the executors were not killed during the batch"


def _metric(progress: dict, name: str) -> int:
    return sum(int(op.get("customMetrics", {}).get(name, 0)) for op in progress["stateOperators"])


def _run_until_loss(harness, cluster, tmp_path, victims_of, seed: int, damage=None):
    """Builds state over three batches, waits for the copies, loses the executors ``victims_of(owners)``
    names in the fourth, runs a fifth; checks every batch against the oracle. Returns the lost batch's
    progress and the lost partitions."""
    # stores of ~17k keys each: their SSTs, what a standby saves, outweigh the few small files every load
    # reads from the snapshot's zip (RocksDB's MANIFEST, OPTIONS)
    runs = oracle.keyed_runs(seed=seed, runs=5, rows=100_000, keys=100_000)
    expected, _ = oracle.running_aggregate(runs)
    query = _Query(harness, tmp_path)
    try:
        for rows in runs[:3]:
            harness.add(rows)
            query.batch()
        locations = _await_standbys(cluster, harness.checkpoint)
        owners = _owners(cluster, locations)
        victims = victims_of(owners)
        lost = sorted(p for p, hs in owners.items() if hs and set(hs) <= set(victims))
        assert lost, f"the victims {victims} own no store alone: {owners}"
        if damage is not None:
            damage(cluster, harness.checkpoint, victims, lost)
        harness.add(runs[3])
        query.lose_mid_batch(cluster, victims)
        lost_batch = query.progress_of(3)
        harness.add(runs[4])
        query.batch()
    finally:
        query.q.stop()
    oracle.assert_batches(harness.batch_outputs(lambda r: (r["k"], r["cnt"], r["total"])), expected)
    return lost_batch, lost


def _await_replacements(spark, cluster, victims: list[str]) -> None:
    deadline = time.monotonic() + 90
    while not set(victims) <= set(cluster.executor_pids()) and time.monotonic() < deadline:
        time.sleep(0.5)
    cluster.await_executors(spark)


def _busiest(owners: dict[int, list[str]]) -> str:
    counts: dict[str, int] = {}
    for hs in owners.values():
        for h in hs:
            counts[h] = counts.get(h, 0) + 1
    return max(sorted(counts), key=counts.get)


def test_the_stores_of_a_lost_executor_load_from_standbys(spark, harness, cluster, tmp_path):
    victims: list[str] = []

    def pick(owners):
        victims.append(_busiest(owners))
        return victims

    progress, lost = _run_until_loss(harness, cluster, tmp_path, pick, seed=511)
    loads = _metric(progress, "lineagestoreLoadsFromStandby")
    taken = _metric(progress, "lineagestoreStandbyBytesTaken")
    downloaded = _metric(progress, "lineagestoreBytesDownloaded")
    assert loads >= len(lost), f"{len(lost)} stores lost, {loads} loads from standbys ({progress})"
    assert taken > 0
    assert downloaded <= 0.05 * taken, f"downloaded {downloaded} bytes beside {taken} taken from standbys"
    _await_replacements(spark, cluster, victims)
    _assert_checkpoint_clean(harness.checkpoint, crashed=True)


@pytest.mark.long_run
def test_two_executors_lost_together_leave_one_that_holds_every_store(spark, harness, cluster, tmp_path):
    victims: list[str] = []

    def pick(owners):
        first = _busiest(owners)
        victims.extend(
            [first, next(h for h in cluster.hosts if h != first and any(h in o for o in owners.values()))]
        )
        return victims

    progress, lost = _run_until_loss(harness, cluster, tmp_path, pick, seed=512)
    assert _metric(progress, "lineagestoreLoadsFromStandby") >= len(lost), progress
    _await_replacements(spark, cluster, victims)
    _assert_checkpoint_clean(harness.checkpoint, crashed=True)


def test_a_damaged_half_fetched_standby_changes_only_what_is_downloaded(spark, harness, cluster, tmp_path):
    """The survivors' copies of the lost stores lose half their SSTs and have one damaged in place, their
    records still claiming the snapshot: the load takes them over, keeps only what matches the committed
    index and downloads the rest; the results stay the oracle's."""
    victims: list[str] = []
    damaged: list[Path] = []

    def pick(owners):
        victims.append(_busiest(owners))
        return victims

    def damage(cluster, checkpoint, victims, lost):
        copies = _standbys(cluster, checkpoint)
        for host in cluster.hosts:
            if host in victims:
                continue
            for p in lost:
                ssts = sorted((copies[host][p][2] / "db").glob("*.sst"))
                assert ssts, f"no SST in the standby of partition {p} on {host}"
                for f in ssts[: max(1, len(ssts) // 2)]:
                    f.unlink()
                    damaged.append(f)
                keep = ssts[max(1, len(ssts) // 2) :]
                if keep:  # a flipped byte in place, as a disk would return it
                    data = bytearray(keep[0].read_bytes())
                    data[len(data) // 2] ^= 0xFF
                    keep[0].write_bytes(bytes(data))

    progress, lost = _run_until_loss(harness, cluster, tmp_path, pick, seed=513, damage=damage)
    assert damaged
    assert _metric(progress, "lineagestoreLoadsFromStandby") >= len(lost), progress
    assert _metric(progress, "lineagestoreBytesDownloaded") > 0, "the damaged copies' files were not fetched"
    _await_replacements(spark, cluster, victims)
    _assert_checkpoint_clean(harness.checkpoint, crashed=True)

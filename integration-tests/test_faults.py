"""lineagestore.testing.faults against a real query on lineagestore: every helper, and recovery from it.

A groupBy(k) count/sum aggregation (update mode) runs once per input batch on one checkpoint; after each
injected fault the query is restarted and its per-batch output must equal the plain-Python oracle, i.e. the
fault lost, duplicated or resurrected nothing. Damaged files must be reported by name instead.
"""

from __future__ import annotations

import re
import time

import pytest

from lineagestore.testing import faults, oracle
from lineagestore.testing.harness import BUILTIN_PROVIDER, LINEAGE_PROVIDER, StreamFailed, StreamHarness

PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
MIN_DELTAS_KEY = "spark.sql.streaming.stateStore.minDeltasForSnapshot"
LOCAL_DIR_KEY = "spark.sql.streaming.stateStore.lineagestore.localDir"


@pytest.fixture
def h(spark, tmp_path):
    """A harness on lineagestore (the suite's session defaults to the built-in provider)."""
    spark.conf.set(PROVIDER_KEY, LINEAGE_PROVIDER)
    yield StreamHarness(spark, tmp_path / "q", "lineagestore")
    for q in spark.streams.active:
        q.stop()
    spark.conf.set(PROVIDER_KEY, BUILTIN_PROVIDER)


@pytest.fixture
def no_snapshots(spark):
    """Restores read deltas only (no snapshot is taken), so a damaged delta is always read."""
    before = spark.conf.get(MIN_DELTAS_KEY)
    spark.conf.set(MIN_DELTAS_KEY, "1000")
    yield
    spark.conf.set(MIN_DELTAS_KEY, before)


def _outputs(h):
    return h.batch_outputs(lambda r: (r["k"], r["cnt"], r["total"]))


def _check(h, runs):
    expected, totals = oracle.running_aggregate(runs)
    oracle.assert_batches(_outputs(h), expected)
    assert h.runs[-1].state_rows_total() == len(totals)


def test_task_fails_in_commit_after_the_delta_and_the_restart_recovers(h, spark, tmp_path):
    runs = oracle.keyed_runs(5, 4, rows=8, keys=5, max_v=49)
    h.add(runs[0])
    h.run(oracle.running_aggregate_query, "update")
    h.add(runs[1])
    with faults.fail_commit_once(spark, tmp_path / "markers") as markers:
        with pytest.raises(StreamFailed, match="test fault injected at commit.after-delta"):
            h.run(oracle.running_aggregate_query, "update")
    assert faults.fired(markers, "commit.after-delta")
    assert h.run(oracle.running_aggregate_query, "update").batch_ids == [
        1
    ]  # the restart runs the failed batch again
    h.add(runs[2])
    h.run(oracle.running_aggregate_query, "update")
    _check(h, runs[:3])


def test_first_attempt_of_a_batch_fails_after_the_state_committed(h):
    runs = oracle.keyed_runs(5, 4, rows=8, keys=5, max_v=49)
    h.add(runs[0])
    h.run(oracle.running_aggregate_query, "update")
    faults.fail_batch_once(h, batch_id=1)
    h.add(runs[1])
    with pytest.raises(StreamFailed, match="injected failure of the first attempt of batch 1"):
        h.run(oracle.running_aggregate_query, "update")
    assert h.run(oracle.running_aggregate_query, "update").batch_ids == [1]
    # both attempts of version 2 committed a delta in every partition; the commit log names the second
    for partition in (0, 1):
        deltas = [p.name for p in faults.state_files(h.checkpoint, "delta", partition=partition)]
        assert len([d for d in deltas if d.startswith("2_")]) == 2, deltas
    h.add(runs[2])
    h.run(oracle.running_aggregate_query, "update")
    _check(h, runs[:3])


def test_rewind_runs_a_committed_batch_again(h):
    runs = oracle.keyed_runs(5, 4, rows=8, keys=5, max_v=49)
    for rows in runs[:3]:
        h.add(rows)
        h.run(oracle.running_aggregate_query, "update")
    first = _outputs(h)[2]
    assert faults.rewind(h.checkpoint, 2) == [2]
    assert h.run(oracle.running_aggregate_query, "update").batch_ids == [2]
    assert _outputs(h)[2] == first
    h.add(runs[3])
    h.run(oracle.running_aggregate_query, "update")
    _check(h, runs)


@pytest.mark.parametrize("damage", ["corrupt", "truncate", "delete"])
def test_a_damaged_delta_is_reported_by_name(h, no_snapshots, damage, spark, tmp_path):
    runs = oracle.keyed_runs(5, 4, rows=8, keys=5, max_v=49)
    for rows in runs[:2]:
        h.add(rows)
        h.run(oracle.running_aggregate_query, "update")
    target = faults.state_files(h.checkpoint, "delta", partition=0)[-1]
    getattr(faults, damage)(target)
    h.add(runs[2])
    # An empty local directory, so the restart must read the delta: a provider that resumes from its clean
    # close (the previous run's, once Spark's maintenance unloaded it) rightly needs no remote file at all.
    before = spark.conf.get(LOCAL_DIR_KEY, "")
    spark.conf.set(LOCAL_DIR_KEY, str(tmp_path / "cold"))
    try:
        with pytest.raises(StreamFailed) as err:
            h.run(oracle.running_aggregate_query, "update")
    finally:
        spark.conf.set(LOCAL_DIR_KEY, before)
    assert target.name in str(err.value), str(err.value)[:3000]


def test_a_corrupt_snapshot_index_is_reported_by_name_or_bypassed(h):
    """Every snapshot of partition 0 gets a damaged INDEX. A restore that needs one must fail naming the
    zip; one that can do without (replaying deltas) must still produce the oracle's output."""
    runs = oracle.keyed_runs(5, 4, rows=8, keys=5, max_v=49)
    for rows in runs[:3]:
        h.add(rows)
        h.run(oracle.running_aggregate_query, "update")
    zips = _wait_for(lambda: faults.state_files(h.checkpoint, "zip", partition=0))
    for z in zips:
        faults.corrupt_snapshot_index(z)
    h.add(runs[3])
    try:
        h.run(oracle.running_aggregate_query, "update")
    except StreamFailed as err:
        names = "|".join(re.escape(z.name) for z in zips)
        assert re.search(names, str(err)), str(err)[:3000]
    else:
        _check(h, runs)


def test_a_failed_snapshot_upload_is_retried_and_loses_nothing(h, spark, tmp_path):
    runs = oracle.keyed_runs(5, 6, rows=8, keys=5, max_v=49)
    with faults.fail_snapshot_upload_once(spark, tmp_path / "markers") as markers:
        for rows in runs[:3]:
            h.add(rows)
            h.run(oracle.running_aggregate_query, "update")
        _wait_for(lambda: faults.fired(markers, "snapshot.after-blobs"))
    for rows in runs[3:]:
        h.add(rows)
        h.run(oracle.running_aggregate_query, "update")
    _wait_for(lambda: faults.state_files(h.checkpoint, "zip"))
    _check(h, runs)


def test_a_restore_that_fails_midway_is_redone_by_the_restart(h, spark, tmp_path):
    """A task fails while it rebuilds a store's local directory (a fresh one: the snapshot's files are in, the
    deltas after it replayed, RocksDB not yet marked loaded); the restart redoes the restore in full."""
    runs = oracle.keyed_runs(5, 5, rows=8, keys=5, max_v=49)
    for rows in runs[:3]:
        h.add(rows)
        h.run(oracle.running_aggregate_query, "update")
    _wait_for(lambda: faults.state_files(h.checkpoint, "zip", partition=0))
    # no newer snapshot from here on: every restore below must replay deltas after the one taken, or
    # restore.after-replay is never reached (a snapshot of the newest version leaves nothing to replay)
    snapshot_every = spark.conf.get("spark.sql.streaming.stateStore.minDeltasForSnapshot")
    spark.conf.set("spark.sql.streaming.stateStore.minDeltasForSnapshot", "1000")
    local_dir = spark.conf.get(LOCAL_DIR_KEY, None)
    for step in faults.RESTORE_STEPS:
        batch = 3 + faults.RESTORE_STEPS.index(step)
        h.add(runs[batch])
        spark.conf.set(LOCAL_DIR_KEY, str(tmp_path / f"local-{step}"))  # every store restores from the store
        try:
            with faults.fail_once_at(spark, step, tmp_path / "markers") as markers:
                with pytest.raises(StreamFailed, match=f"test fault injected at {step}"):
                    h.run(oracle.running_aggregate_query, "update")
            assert faults.fired(markers, step)
            assert h.run(oracle.running_aggregate_query, "update").batch_ids == [batch]
        finally:
            spark.conf.unset(LOCAL_DIR_KEY) if local_dir is None else spark.conf.set(LOCAL_DIR_KEY, local_dir)
    spark.conf.set("spark.sql.streaming.stateStore.minDeltasForSnapshot", snapshot_every)
    _check(h, runs)


def _wait_for(probe, timeout: float = 60.0):
    """Maintenance runs in the background every second: poll ``probe`` until it returns something."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = probe()
        except FileNotFoundError:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {probe}")
        time.sleep(0.5)

"""The run sequence both seed-003 appendix tests share (test_random_bucketing.py, test_random_sampling.py).

Two files, one run (batches 0 and 1); batch 1's commit log entry deleted, as if the process died between the
state commit and Spark's commit log, so the next run plans batch 1 again (a second attempt of state version 2,
both attempts' deltas and snapshots side by side); one more file on the same executor; one more from an empty
local directory (everything from the checkpoint). ``run()`` runs the query to its end and checks the test's
invariant; it returns the last batch id.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

LOCAL_DIR_KEY = "spark.sql.streaming.stateStore.lineagestore.localDir"
SNAPSHOT_KEY = "spark.sql.streaming.stateStore.minDeltasForSnapshot"


def two_attempts_then_restarts(
    spark,
    checkpoint: Path,
    fresh: Path,
    add: Callable[[int], None],
    run: Callable[[], int],
    after_rerun: Callable[[], None] = lambda: None,
    before_rerun: Callable[[], None] = lambda: None,
) -> None:
    before = {k: spark.conf.get(k, None) for k in (SNAPSHOT_KEY, LOCAL_DIR_KEY)}
    spark.conf.set(SNAPSHOT_KEY, "1")  # a snapshot per attempt
    try:
        add(20)
        add(20)
        assert run() == 1
        before_rerun()
        (checkpoint / "commits" / "1").unlink()  # died after batch 1's state commit, before its commit log
        for crc in (checkpoint / "commits").glob(".1.crc"):
            crc.unlink()
        assert run() == 1  # batch 1 again: a second attempt of state version 2
        after_rerun()
        attempts = [_deltas(p, version=2) for p in _partitions(checkpoint)]
        assert any(len(a) == 2 for a in attempts), f"no partition has both attempts of version 2: {attempts}"

        add(20)
        assert run() == 2  # on the executor that held the first attempt
        fresh.mkdir()
        spark.conf.set(LOCAL_DIR_KEY, str(fresh))
        add(20)
        assert run() == 3  # from the checkpoint alone
        assert any((fresh / "lineagestore").rglob("*.sst")), f"the restart did not use {fresh}"
    finally:
        for key, value in before.items():
            spark.conf.unset(key) if value is None else spark.conf.set(key, value)


def _partitions(checkpoint: Path) -> list[Path]:
    return sorted(p for p in (checkpoint / "state" / "0").iterdir() if p.name.isdigit())


def _deltas(partition: Path, version: int) -> list[str]:
    return sorted(f.name for f in partition.rglob(f"{version}_*.delta"))

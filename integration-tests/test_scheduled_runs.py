"""Issue 17: a query run as short availableNow runs, each ending before Spark's maintenance thread ever
runs, keeps a bounded snapshot lag (what a cold restore replays) and bounded storage.

Measured on main before the fix: 25 such runs (minDeltasForSnapshot=5, 2 partitions) left 0 snapshots and
50 deltas; every cold restore replayed every delta since version 1. Runs in its own process
(scheduled_runs.py), because the suite's shared session runs maintenance every second.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import lineagestore
from providers import LINEAGE_JAR

HERE = Path(__file__).resolve().parent
RUNS = 12
MAX_LAG = 3  # maxSnapshotLagDeltas
RETAIN = 2


@pytest.mark.skipif(not LINEAGE_JAR, reason="needs the lineagestore jar")
def test_short_scheduled_runs_keep_replay_and_storage_bounded(tmp_path):
    env = dict(os.environ, LINEAGESTORE_JAR=LINEAGE_JAR)
    extra = os.environ.get("SCHEDULED_RUNS_EXTRA_CONF", "").split()  # to check the test fails without the fix
    out = subprocess.run(
        [
            sys.executable,
            str(HERE / "scheduled_runs.py"),
            str(tmp_path),
            str(RUNS),
            lineagestore.PROVIDER_CLASS,
            "spark.sql.streaming.stateStore.minDeltasForSnapshot=2",
            f"spark.sql.streaming.minBatchesToRetain={RETAIN}",
            f"spark.sql.streaming.stateStore.lineagestore.maxSnapshotLagDeltas={MAX_LAG}",
            *extra,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    runs = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("[")]
    told = [json.loads(line)["coordinator"] for line in out.stdout.splitlines() if line.startswith("{")]
    assert len(runs) == len(told) == RUNS
    # every run's loads (2 partitions, a new provider each run) replayed at most the bound per partition
    for i, ops in enumerate(runs):
        for m in ops:
            assert m["lineagestoreDeltasReplayed"] <= 2 * MAX_LAG, f"run {i}: {m}"
            # each store's own lag, by name (an instance metric: Spark reports the worst stores, lag 0 left out)
            per_store = {k: v for k, v in m.items() if k.startswith("lineagestoreSnapshotLag.partition_")}
            assert set(per_store) <= {
                "lineagestoreSnapshotLag.partition_0_default",
                "lineagestoreSnapshotLag.partition_1_default",
            }, m
            assert all(0 < v <= MAX_LAG for v in per_store.values()), f"run {i}: {per_store}"
            assert sum(per_store.values()) == m["lineagestoreSnapshotLag"], f"run {i}: {m}"
    catch_ups = [sum(m["lineagestoreCatchUpSnapshots"] for m in ops) for ops in runs]
    assert sum(catch_ups) > 0
    # maintenance never runs here: a catch-up is the only upload a run makes, and Spark's coordinator (whose
    # lag detection names lagging stores in the driver log) must hear of it
    for i, (n, versions) in enumerate(zip(catch_ups, told, strict=True)):
        if n > 0:
            assert any(v is not None for v in versions), (
                f"run {i}: {n} catch-up(s), coordinator heard {versions}"
            )

    state = tmp_path / "checkpoint" / "state" / "0"
    parts = sorted(p for p in state.iterdir() if p.name.isdigit())
    assert len(parts) == 2
    for part in parts:
        names = [f.name for f in part.iterdir() if f.name.endswith((".delta", ".zip"))]
        version = {
            kind: [int(re.match(r"(\d+)_", n).group(1)) for n in names if n.endswith(kind)]
            for kind in (".delta", ".zip")
        }
        assert version[".zip"], f"partition {part.name}: no snapshot: {sorted(names)}"
        # bounded replay: a cold restore of the newest version replays at most MAX_LAG deltas
        assert max(version[".delta"]) - max(version[".zip"]) <= MAX_LAG, sorted(names)
        # bounded storage: clean-up ran (at exit) and kept only what the retained versions need
        assert len(version[".delta"]) <= MAX_LAG + RETAIN + 2, sorted(names)
        assert len(version[".zip"]) <= 3, sorted(names)

"""A short run of the chaos soak (integration-tests/soak.py) for CI: a few rounds with S3 faults on every
request, at least one SIGKILL of the query process, then the oracle, ``lineagestore verify`` and the leak
check. The long soak and its figures: docs/reliability.md."""

from __future__ import annotations

import json

import pytest

import soak


def test_short_soak(tmp_path):
    pytest.importorskip("lineagestore._jar").jar_path()  # the query process needs the bundled jar
    report = soak.run_soak(
        batches=6,
        seed=2026,
        fault_rate=0.03,
        kill_prob=1.0,  # the round's first run is killed once it committed a batch
        files_per_round=(6, 6),  # one round, then the final clean run (2 more files) with maintenance
        linger=6.0,
        work=tmp_path / "soak",
    )
    print(json.dumps(report, indent=1))
    assert report["final_run"] == "ok", report.get("final_run_error")
    assert report["divergences"] == 0, report["divergent_batches"]
    assert report["verify_exit"] == 0, report.get("verify_output")
    assert report["leaked_blobs"] == 0, report["leaked"]
    assert report["kills"] >= 1
    assert sum(report["faults"].values()) > 0

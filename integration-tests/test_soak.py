"""A short run of the chaos soak (integration-tests/soak.py) for CI: a few rounds with S3 faults on every
request, at least one SIGKILL of the query process, then the oracle, ``lineagestore verify`` and the leak
check. The long soak and its figures: docs/reliability.md."""

from __future__ import annotations

import json

import pytest

import soak
from soak_oracle import batch_files, compare, make_batches, oracle


def test_short_soak(tmp_path):
    pytest.importorskip("lineagestore.jvm.jar").jar_path()  # the query process needs the bundled jar
    report = soak.run_soak(
        batches=6,
        seed=2026,
        fault_rate=0.03,
        # a tenth of the long soak's held connections: each waits out connection.timeout (3 s), and at a third
        # of the fault rate they were a third of this test's time; test_s3_faults.py holds more of them
        timeout_rate=0.003,
        kill_prob=1.0,  # the round's first run is killed once it committed a batch
        files_per_round=(6, 6),  # one round, then the final clean run (2 more files) with maintenance
        linger=6.0,
        work=tmp_path / "soak",
    )
    print(json.dumps(report, indent=1))
    assert report["final_run"] == "ok", report.get("final_run_error")
    assert report["divergences"] == 0, report["divergent_batches"]
    assert report["early_exits"] == 0
    assert report["batches_checked"] >= 6 and not report["batches_unchecked"], report["log_offsets"]
    assert report["verify_exit"] == 0, report.get("verify_output")
    assert report["leaked_blobs"] == 0, report["leaked"]
    assert report["kills"] >= 1
    assert sum(report["faults"].values()) > 0
    # the round's run that completed it ran the availableNow query to its end (it logs how that ended)
    last_round_run = [p for p in sorted((tmp_path / "soak").glob("run-*.log")) if "-linger" not in p.name][-1]
    assert "soak child: query ended" in last_round_run.read_text(errors="replace"), last_round_run


def test_only_the_last_child_run_lingers(monkeypatch, tmp_path):
    """A round's child runs the availableNow query; only the last run lingers (processing time, then stop).

    The child parses the parent's options: with a ``--linger`` default, every round's child took the linger
    branch (a processing-time query stopped after 12 s, mid-batch: the early exits of docs/reliability.md)."""
    seen = []
    monkeypatch.setattr(soak, "child_main", seen.append)
    assert soak.main(soak.child_argv(tmp_path, "s3a://b/checkpoint")) == 0
    assert seen[-1].child and not seen[-1].linger
    assert soak.main(soak.child_argv(tmp_path, "s3a://b/checkpoint", linger_s=2.0, expect_batches=7)) == 0
    assert seen[-1].linger == 2.0 and seen[-1].expect_batches == 7


def test_the_oracle_check_survives_the_purge_of_old_log_entries(s3_server, tmp_path):
    """Spark deletes commits/offsets beyond minBatchesToRetain: the oldest remaining batch has no predecessor
    to say where it started. What was read before (``seen``) keeps it checkable; without that memory it is
    reported unchecked, never compared against a guess (the long soak once reported a false divergence)."""
    bucket = s3_server.bucket("soak-logs")
    client = s3_server.boto3_client()

    def put(key: str, lines: list[str]) -> None:
        client.put_object(Bucket=bucket, Key=f"checkpoint/{key}", Body="\n".join(lines).encode())

    # batch 0 read file 0; batch 1 files 1 and 2 (a restart after the source logged file 1); batch 2 file 3
    own = {0: [0], 1: [1, 2], 2: [3]}
    for batch, log_offset in enumerate([0, 2, 3]):
        put(f"commits/{batch}", ["v1", "{}"])
        put(f"offsets/{batch}", ["v1", "{}", json.dumps({"logOffset": log_offset})])
    for entry in range(4):
        put(f"sources/0/{entry}", ["v1", json.dumps({"path": f"/in/f{entry:05d}.json", "batchId": entry})])
    data = make_batches(seed=3, batches=4)
    out = tmp_path / "out"
    expected = oracle([[row for f in own[b] for row in data[f]] for b in sorted(own)])
    for b, rows in expected.items():
        (out / f"batch_id={b}").mkdir(parents=True)
        lines = [json.dumps({"k": k, "n": n, "s": s}) for k, n, s in rows]
        (out / f"batch_id={b}" / "part-00000.json").write_text("\n".join(lines))

    seen: dict = {"offsets": {}, "sources": {}}
    assert batch_files(client, bucket, seen) == {0: [0], 1: [0, 1, 2], 2: [0, 1, 2, 3]}
    assert compare(client, bucket, data, out, seen) == ([], {}, [])
    for batch in (0, 1):  # Spark's purge
        client.delete_object(Bucket=bucket, Key=f"checkpoint/commits/{batch}")
        client.delete_object(Bucket=bucket, Key=f"checkpoint/offsets/{batch}")
    assert compare(client, bucket, data, out, seen) == ([], {}, [])
    assert compare(client, bucket, data, out, {"offsets": {}, "sources": {}}) == ([], {}, [2])

    # a wrong output is found
    (out / "batch_id=2" / "part-00000.json").write_text(json.dumps({"k": "k0", "n": 1, "s": 1}))
    bad, details, _ = compare(client, bucket, data, out, seen)
    assert bad == [2] and details[2]["files"] == [3]

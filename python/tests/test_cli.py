"""``lineagestore inspect|verify|gc|clone`` on a real checkpoint written by a real query.

One module-scoped SparkSession (local[2], 2 shuffle partitions, maintenance every second, a snapshot every
2 versions: partition 0 at the even ones, partition 1 at the odd ones, each on its phase) runs a streaming
aggregation twice: batches 0..3, then, after Spark's commit of batch 3 is removed (a crash after the state
commit, before the commit log), a re-run of batch 3 (a second attempt of version 4: an orphan) and batch 4. Tests run the command line in this process (it reuses the session's JVM)
on copies of that checkpoint; one runs the installed console script (its own gateway JVM).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cli_80_columns import assert_fits  # the 80-column rule, in one place

from lineagestore.cli import EXIT_BAD_CHECKPOINT, EXIT_ENVIRONMENT, EXIT_OK, EXIT_PROBLEMS
from lineagestore.testing.cli import run_cli
from lineagestore.testing.session import SNAPSHOT_OFTEN, local_session

USERS = 12


def _rows(batch: int) -> list[dict]:
    # every user in every batch, (batch + user) % 3 + 1 clicks each: totals grow differently per user
    return [{"user": f"u{u:02d}", "n": 1} for u in range(USERS) for _ in range((batch + u) % 3 + 1)]


def _oracle(batches: int) -> dict[str, int]:
    totals: dict[str, int] = {}
    for b in range(batches):
        for r in _rows(b):
            totals[r["user"]] = totals.get(r["user"], 0) + r["n"]
    return totals


def _write_input(source: Path, batch: int) -> None:
    tmp = source / f".b{batch}.tmp"
    tmp.write_text("\n".join(json.dumps(r) for r in _rows(batch)) + "\n")
    os.replace(tmp, source / f"b{batch:03d}.json")


def _start(spark, source: Path, checkpoint: Path, totals: dict):
    from pyspark.sql import functions as F

    def sink(df, _batch_id):
        for row in df.collect():
            totals[row["user"]] = row["clicks"]

    return (
        spark.readStream.schema("user string, n int")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .groupBy("user")
        .agg(F.sum("n").alias("clicks"))
        .writeStream.outputMode("update")
        .foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .start()
    )


def _zips(checkpoint: Path, partition: int, version: int) -> int:
    """How many snapshot zips of `version` partition `partition` of operator 0 holds."""
    return len(list((checkpoint / "state" / "0" / str(partition)).glob(f"{version}_*.zip")))


# the versions each partition freezes at with a snapshot every 2 versions (its phase: SnapshotSchedule)
SNAPSHOT_VERSIONS = {0: [2, 4], 1: [1, 3, 5]}


def _wait(cond, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _wait_stable(root: Path, quiet: float = 2.5) -> None:
    """Wait until nothing under root changed for `quiet` seconds (a stopped query's maintenance is done)."""
    before = _tree(root)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = _tree(root)
        if now == before:
            return
        before = now


@pytest.fixture(scope="module")
def spark():
    session = local_session(app_name="lineagestore-cli-tests", conf=SNAPSHOT_OFTEN)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def base(spark, tmp_path_factory):
    """(source dir, checkpoint dir) after the two runs described in the module docstring."""
    work = tmp_path_factory.mktemp("cli")
    source, checkpoint = work / "input", work / "checkpoint"
    source.mkdir()
    totals: dict[str, int] = {}
    query = _start(spark, source, checkpoint, totals)
    try:
        for b in range(4):
            _write_input(source, b)
            query.processAllAvailable()
        _wait(
            lambda: _zips(checkpoint, 0, 4) >= 1 and _zips(checkpoint, 1, 3) >= 1, "the snapshots of 4 and 3"
        )
    finally:
        query.stop()
    # the commit of batch 3 is lost: the next run re-runs batch 3 as a new attempt of version 4
    for name in ("3", ".3.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    _write_input(source, 4)
    query = _start(spark, source, checkpoint, totals)
    try:
        query.processAllAvailable()
        _wait(
            lambda: _zips(checkpoint, 0, 4) >= 2 and _zips(checkpoint, 1, 5) >= 1,
            "partition 0's snapshot of the second attempt of version 4, partition 1's of 5",
        )
    finally:
        query.stop()
    assert totals == _oracle(5)
    _wait_stable(checkpoint)
    return source, checkpoint


@pytest.fixture
def copy(base, tmp_path):
    dst = tmp_path / "checkpoint"
    shutil.copytree(base[1], dst)
    return dst


def inspect_json(checkpoint: Path) -> dict:
    rc, out, err = run_cli(["inspect", str(checkpoint), "--json"])
    assert rc == EXIT_OK, err
    return json.loads(out)


# ---- inspect ----------------------------------------------------------------------------------------------


def test_inspect_reports_lineage_attempts_snapshots_and_sizes(base):
    report = inspect_json(base[1])
    assert report["commitLog"] == {"batches": 5, "first": 0, "last": 4, "uncommitted": []}
    assert report["operators"] == [
        {
            "operatorId": 0,
            "storeNames": ["default"],
            "partitions": 2,
            "operatorName": "stateStoreSave",  # Spark's name, from state/0/_metadata
            "kind": "aggregation",
        }
    ]
    assert report["problems"] == []
    assert [s["path"] for s in report["stores"]] == ["state/0/0", "state/0/1"]
    for partition, s in enumerate(report["stores"]):
        assert [p["version"] for p in s["chosenPath"]] == [5, 4, 3, 2, 1]
        assert [p["batchId"] for p in s["chosenPath"]] == [4, 3, 2, 1, 0]
        orphans = [c for c in s["checkpoints"] if c["status"] == "orphan"]
        assert [c["version"] for c in orphans] == [4]  # the lost attempt of batch 3
        # each partition's snapshots at the versions of its phase, the orphan's in partition 0 as well
        committed = [c for c in s["checkpoints"] if c["status"] == "committed"]
        assert sorted(c["version"] for c in committed if c["snapshot"]) == SNAPSHOT_VERSIONS[partition]
        assert [o["snapshot"] for o in orphans] == [partition == 0]
        t = s["totals"]
        assert t["orphanAttempts"] == 1 and t["orphanAttemptBytes"] > 0
        assert t["deltas"] == 6 and t["snapshots"] == 3
        # a snapshot's SSTs are referenced again by the next one (partition 0: snapshot 2's by both of 4)
        assert t["sharedBlobs"] >= 1 and t["sharedBytes"] > 0
        assert t["sharedBytes"] + t["uniqueBytes"] + t["orphanBlobBytes"] == t["blobBytes"]
        assert not s["errors"] and not s["conflicts"]

    rc, out, _ = run_cli(["inspect", str(base[1])])
    assert rc == EXIT_OK
    assert "batches 0..4 (5 committed)" in out
    assert "operator 0   aggregation, 2 partitions x 1 store(s): default" in out
    assert "PROBLEMS" not in out
    assert "state/0/1" in out and "committed path  5_" in out
    assert "version 4: batch 3 chose 4_" in out and "(orphan: delta+snapshot)" in out


def test_inspect_plot_draws_a_png(base, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "lineage.png"
    rc, _, err = run_cli(["inspect", str(base[1]), "--plot", str(out)])
    assert rc == EXIT_OK, err
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "wrote" in err


def test_inspect_plot_without_matplotlib_says_what_to_install(base, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    rc, _, err = run_cli(["inspect", str(base[1]), "--plot", str(tmp_path / "x.png")])
    assert rc == EXIT_ENVIRONMENT
    assert "pip install 'lineagestore[plot]'" in err


def test_inspect_of_a_damaged_delta_exits_1_and_says_so_in_the_summary(copy):
    # a flipped byte in the header of the newest committed delta of partition 1 (inspect reads headers)
    delta = next(iter((copy / "state" / "0" / "1").glob("5_*.delta")))
    data = bytearray(delta.read_bytes())
    data[12] ^= 0x01
    delta.write_bytes(bytes(data))
    (delta.parent / f".{delta.name}.crc").unlink()  # as on an object store: lineagestore's own CRC catches it
    rc, out, err = run_cli(["inspect", str(copy)])
    assert rc == EXIT_PROBLEMS, out + err
    # the summary: the PROBLEMS: paragraph, up to the blank line before the first store (its continuation lines
    # are indented, except a path too long for an indented line, e.g. under pytest-xdist's longer tmp paths)
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("PROBLEMS:"))
    rest = itertools.takewhile(lambda line: line.strip() != "", lines[start + 1 :])
    summary = " ".join(line.strip() for line in [lines[start], *rest])
    assert "in 1 store(s): state/0/1" in summary and "lineagestore verify" in summary
    assert "docs/operations.md#restarting-from-an-older-checkpoint" in summary
    assert delta.name in out
    rc, out, _ = run_cli(["inspect", str(copy), "--json"])
    problems = json.loads(out)["problems"]
    assert rc == EXIT_PROBLEMS and [p["store"] for p in problems] == ["state/0/1"]
    assert delta.name in problems[0]["message"]


# ---- verify -----------------------------------------------------------------------------------------------


def test_verify_passes_on_a_healthy_checkpoint(base):
    rc, out, err = run_cli(["verify", str(base[1])])
    assert rc == EXIT_OK, out + err
    assert "result: OK" in out
    rc, out, _ = run_cli(["verify", str(base[1]), "--json", "--retain", "2"])
    result = json.loads(out)
    assert (
        rc == EXIT_OK
        and result["ok"]
        and result["batches"] == [3, 4]
        and result["skippedBatches"] == [0, 1, 2]
    )
    assert result["filesVerified"] >= 4 and result["bytesVerified"] > 0


@pytest.mark.parametrize("drop_crc", [False, True], ids=["hadoop-crc", "own-crc"])
def test_verify_names_a_corrupted_delta(copy, drop_crc):
    # the newest committed delta of partition 0: every load of batch 4 replays it
    delta = next(iter((copy / "state" / "0" / "0").glob("5_*.delta")))
    data = bytearray(delta.read_bytes())
    data[len(data) // 2] ^= 0x01
    delta.write_bytes(bytes(data))
    if drop_crc:  # as on an object store: only lineagestore's own CRC32C can catch it
        (delta.parent / f".{delta.name}.crc").unlink()
    rc, out, _ = run_cli(["verify", str(copy)])
    assert rc == EXIT_PROBLEMS
    assert delta.name in out and "PROBLEMS FOUND" in out and "needed by batch(es) 4" in out
    assert "what to do: docs/operations.md#restarting-from-an-older-checkpoint" in out
    assert "checksum" in out


def test_verify_names_a_deleted_shared_blob(copy):
    store = next(s for s in inspect_json(copy)["stores"] if s["path"] == "state/0/1")
    snap = next(z for z in store["snapshots"] if z["version"] == 3 and z["status"] == "committed")
    blob = snap["blobs"][0]  # batch 3 (version 4) loads from snapshot 3
    (copy / "state" / "0" / "1" / "shared" / blob).unlink()
    rc, out, _ = run_cli(["verify", str(copy)])
    assert rc == EXIT_PROBLEMS
    assert f"shared/{blob}" in out and "missing" in out
    rc, out, _ = run_cli(["verify", str(copy), "--json"])
    problems = json.loads(out)["problems"]
    assert any(
        p["store"] == "state/0/1" and 3 in p["batches"] and p["file"].endswith(f"shared/{blob}") and p["via"]
        for p in problems
    )


# ---- gc ---------------------------------------------------------------------------------------------------


def test_gc_dry_run_lists_then_apply_deletes_and_the_rest_verifies(copy):
    stray = copy / "state" / "0" / "0" / "shared" / "stray-upload.sst"
    stray.write_bytes(b"left by a crashed upload")
    before = _tree(copy)

    rc, out, _ = run_cli(["gc", str(copy), "--retain", "1"])
    assert rc == EXIT_OK
    assert "dry run" in out and "would delete" in out
    assert "keep    shared/stray-upload.sst" in out  # younger than the default 6h grace period
    assert "attempt outside the committed lineage" in out
    assert _tree(copy) == before  # nothing deleted

    rc, out, _ = run_cli(["gc", str(copy), "--retain", "1", "--grace", "0s", "--json"])
    plan = json.loads(out)
    assert rc == EXIT_OK and not plan["applied"] and plan["deleteFiles"] > 0
    for partition, s in enumerate(plan["stores"]):
        deleted = {d["file"].split("_")[0] for d in s["delete"] if not d["file"].startswith("shared/")}
        assert deleted == {"1", "2", "3", "4"}  # versions below the snapshot base, and the orphan of 4
        base_version = SNAPSHOT_VERSIONS[partition][-1]  # the newest snapshot at or below version 5
        assert s["oldestRetained"] == 5 and s["snapshotBase"].startswith(f"{base_version}_")
    assert any(d["file"] == "shared/stray-upload.sst" for d in plan["stores"][0]["delete"])
    assert _tree(copy) == before

    rc, out, _ = run_cli(["gc", str(copy), "--retain", "1", "--grace", "0s", "--apply"])
    assert rc == EXIT_OK, out
    assert "total: deleted" in out
    after = _tree(copy)
    gone = set(before) - set(after)
    planned = {f"{s['path']}/{d['file']}" for s in plan["stores"] for d in s["delete"]}
    assert {g for g in gone if not Path(g).name.startswith(".")} == planned
    assert not stray.exists()

    report = inspect_json(copy)
    assert report["totals"]["orphanAttempts"] == 0 and report["totals"]["orphanBlobs"] == 0
    # what gc kept loads: the one batch it retained (partition 1's base, snapshot 5, left no version 4)
    rc, out, _ = run_cli(["verify", str(copy), "--retain", "1", "--json"])
    result = json.loads(out)
    assert rc == EXIT_OK, out
    assert result["batches"] == [4] and result["skippedBatches"] == [0, 1, 2, 3]


def test_after_gc_a_plain_verify_checks_what_retention_holds_and_passes(copy):
    # partition 0 keeps from its snapshot 4 (batches 3, 4), partition 1 from its snapshot 3 (batches 2..4)
    rc, out, _ = run_cli(["gc", str(copy), "--retain", "2", "--grace", "0s", "--apply"])
    assert rc == EXIT_OK, out
    rc, out, err = run_cli(["verify", str(copy)])
    assert rc == EXIT_OK, out + err
    assert "result: OK" in out and "PROBLEMS" not in out and "restore" not in out
    rc, out, _ = run_cli(["verify", str(copy), "--json"])
    result = json.loads(out)
    assert rc == EXIT_OK and result["batches"] == [2, 3, 4] and result["skippedBatches"] == [0, 1]
    by_path = {s["path"]: s["skippedBatches"] for s in result["results"]}
    assert by_path == {"state/0/0": [0, 1, 2], "state/0/1": [0, 1]}


def test_a_damaged_orphan_attempt_is_a_note_for_inspect_and_no_problem_for_verify(copy):
    store = next(s for s in inspect_json(copy)["stores"] if s["path"] == "state/0/0")
    lost = next(c for c in store["checkpoints"] if c["status"] == "orphan")  # the lost attempt of batch 3
    delta = copy / "state" / "0" / "0" / f"{lost['version']}_{lost['uniqueId']}.delta"
    data = bytearray(delta.read_bytes())
    data[12] ^= 0x01  # in its header, which inspect reads; the .crc sidecar stays, as a disk fault leaves it
    delta.write_bytes(bytes(data))
    rc, out, err = run_cli(["inspect", str(copy)])
    assert rc == EXIT_OK, out + err
    assert "PROBLEMS" not in out
    assert f"note: state/0/0/{delta.name} is damaged, but no retained committed batch needs it" in " ".join(
        line.strip() for line in out.splitlines()
    )
    rc, out, _ = run_cli(["inspect", str(copy), "--json"])
    report = json.loads(out)
    assert rc == EXIT_OK and report["problems"] == []
    assert [(d["store"], d["file"], d["status"]) for d in report["damageNotNeeded"]] == [
        ("state/0/0", delta.name, "orphan")
    ]
    rc, out, err = run_cli(["verify", str(copy)])
    assert rc == EXIT_OK and "result: OK" in out, out + err


# ---- clone ------------------------------------------------------------------------------------------------


def test_clone_restarts_the_query_and_leaves_the_source_unchanged(base, spark, tmp_path):
    source, src = base
    dst = tmp_path / "clone"
    src_before = _tree(src)
    rc, out, err = run_cli(["clone", str(src), str(dst)])
    assert rc == EXIT_OK, err
    assert "hard-linked" in out
    assert _tree(dst) == src_before
    delta = next(iter((src / "state" / "0" / "0").glob("5_*.delta")))
    assert delta.stat().st_ino == (dst / delta.relative_to(src)).stat().st_ino  # immutable: shared
    assert (src / "commits" / "4").stat().st_ino != (dst / "commits" / "4").stat().st_ino  # Spark's: copied

    # one more batch on the clone; it restores the state from the cloned files
    _write_input(source, 5)
    totals: dict[str, int] = {}
    query = _start(spark, source, dst, totals)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert totals == _oracle(6)  # every user appears in batch 5, with its running total
    _wait_stable(dst)
    assert (dst / "commits" / "5").is_file()
    assert _tree(src) == src_before
    rc, out, _ = run_cli(["verify", str(dst)])
    assert rc == EXIT_OK, out


def test_clone_with_new_query_id(base, tmp_path):
    dst = tmp_path / "clone"
    rc, out, _ = run_cli(["clone", str(base[1]), str(dst), "--new-query-id", "--json"])
    result = json.loads(out)
    assert rc == EXIT_OK and result["newQueryId"]
    src_id = json.loads((base[1] / "metadata").read_text())["id"]
    dst_id = json.loads((dst / "metadata").read_text())["id"]
    assert dst_id == result["queryId"] != src_id


# ---- bad input and the installed command ------------------------------------------------------------------


def test_bad_input_is_named_with_exit_code_3(base, tmp_path):
    rc, _, err = run_cli(["inspect", str(tmp_path / "nothing")])
    assert rc == EXIT_BAD_CHECKPOINT and "nothing does not exist" in err
    rc, _, err = run_cli(["verify", str(tmp_path)])
    assert rc == EXIT_BAD_CHECKPOINT and "is not a Spark streaming checkpoint" in err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    rc, _, err = run_cli(["clone", str(base[1]), str(tmp_path / "full")])
    assert rc == EXIT_BAD_CHECKPOINT and "exists and is not empty" in err
    bad = tmp_path / "badcommit"
    shutil.copytree(base[1], bad)
    (bad / "commits" / "4").write_text("v2\n{not json")
    (bad / "commits" / ".4.crc").unlink()
    rc, _, err = run_cli(["inspect", str(bad)])
    assert rc == EXIT_BAD_CHECKPOINT and "commits/4 holds unreadable JSON" in err


def test_a_jvm_without_the_jar_is_refused_clearly():
    from lineagestore.jvm import JvmTools, ToolsUnavailable

    class Package:  # what py4j returns for a name it cannot resolve
        def __getattr__(self, name):
            return self

    with pytest.raises(ToolsUnavailable, match="lineagestore.configure"):
        JvmTools(Package())


def test_console_script_runs_its_own_gateway_jvm(base):
    exe = Path(sys.executable).parent / "lineagestore"
    out = subprocess.run(
        [str(exe), "verify", str(base[1]), "--json"], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == EXIT_OK, out.stderr
    assert json.loads(out.stdout)["ok"]


# ---- extra jars and packages (the checks without a JVM: test_cli_jvm_options.py) ------------------------------


def test_in_session_the_jars_options_are_refused_and_s3a_is_checked(base, monkeypatch):
    from lineagestore.jvm import MissingFilesystem, connect

    rc, _, err = run_cli(["--packages", "g:a:1", "inspect", str(base[1])])
    assert rc == EXIT_ENVIRONMENT and "give them to that session instead" in err
    monkeypatch.setenv("LINEAGESTORE_PACKAGES", "g:a:1")  # the environment is for a JVM of its own: ignored
    assert run_cli(["inspect", str(base[1])])[0] == EXIT_OK
    tools = connect()
    tools.require_filesystem("file:///tmp/x")  # only s3a:// is checked
    # this module's session has no s3a jars, unless the pytest run also collected S3 suites: the plugin then
    # puts them on the one driver JVM's class path (testing/plugin.py), and the check must let s3a:// through
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    driver_cp = session.sparkContext.getConf().get("spark.driver.extraClassPath", "") if session else ""
    if "hadoop-aws" in driver_cp:
        tools.require_filesystem("s3a://bucket/ckpt")
        return
    with pytest.raises(MissingFilesystem, match="spark.jars.packages=org.apache.hadoop:hadoop-aws:"):
        tools.require_filesystem("s3a://bucket/ckpt")


# ---- repartition and migrate on this checkpoint (issue 49) ---------------------------------------------------


def test_repartition_counts_the_stores_it_wrote(copy):
    """One operator store into 4 partitions writes 4 stores (the report counted operator stores: "1")."""
    rc, out, err = run_cli(["repartition", str(copy), "--partitions", "4"])
    assert rc == EXIT_OK, err
    assert f"moved {USERS} rows into 4 stores; restart the query" in out, out  # a row per user


def test_migrate_refuses_a_lineagestore_checkpoint_before_spark_starts(base, tmp_path):
    """Read from the offset log in Python: the process has no Java, so a started Spark would exit 4."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_HOME")}
    env |= {"JAVA_HOME": str(tmp_path / "no-java"), "PATH": str(tmp_path / "no-bin")}
    out = subprocess.run(
        [sys.executable, "-m", "lineagestore.cli", "migrate", str(base[1])],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == EXIT_BAD_CHECKPOINT, out.stderr
    assert "already runs on lineagestore; use `lineagestore repartition`" in out.stderr


# ---- inspect --plot: damage and rewrites marked (issue 49) ----------------------------------------------------


def _marks(fig) -> dict[str, list[tuple[str, float]]]:
    """The lineage figure's marks by gid: (panel's store, x) for each damage cross and rewrite line."""
    out: dict[str, list[tuple[str, float]]] = {}
    for ax in fig.axes:
        store = ax.get_title(loc="left").split()[0]
        for line in ax.get_lines():
            if line.get_gid():
                out.setdefault(line.get_gid(), []).append((store, float(line.get_xdata()[0])))
    return out


def _legend(fig) -> list[str]:
    return [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def test_inspect_plot_of_a_healthy_checkpoint_marks_no_damage_and_no_rewrite(base):
    pytest.importorskip("matplotlib")
    from lineagestore.cli.plot import lineage_figure

    report = inspect_json(base[1])
    assert report["rewrites"] == []
    assert all(c["damaged"] == [] for s in report["stores"] for c in s["checkpoints"])
    fig = lineage_figure(report)
    assert _marks(fig) == {}
    assert not any("damaged" in t or "rewritten" in t for t in _legend(fig))


def test_inspect_plot_marks_damaged_files_and_the_repartition_batch(copy, tmp_path):
    pytest.importorskip("matplotlib")
    from lineagestore.cli.plot import REWRITE_LABEL, lineage_figure
    from lineagestore.testing.faults import flip_in_place

    rc, out, err = run_cli(["repartition", str(copy), "--partitions", "3"])  # batch 5: state version 6
    assert rc == EXIT_OK, out + err
    # a disk fault in two delta headers (inspect reads headers), each .crc sidecar kept: the new partition's
    # fresh start, which every later batch needs (an error), and partition 1's last delta before the
    # repartition, which no retained batch needs (below the fresh start: a note)
    needed = flip_in_place(next((copy / "state" / "0" / "2").glob("6_*.delta")), 12)
    not_needed = flip_in_place(next((copy / "state" / "0" / "1").glob("5_*.delta")), 12)

    rc, out, err = run_cli(["inspect", str(copy), "--json"])
    assert rc == EXIT_PROBLEMS, err
    report = json.loads(out)
    assert report["rewrites"] == [
        {
            "batch": 5,
            "version": 6,
            "kind": "repartition",
            "oldPartitions": 2,
            "newPartitions": 3,
            "fromProvider": None,
        }
    ]
    damaged = {
        (s["path"], d["file"], d["needed"])
        for s in report["stores"]
        for c in s["checkpoints"]
        for d in c["damaged"]
    }
    assert damaged == {("state/0/2", needed.name, True), ("state/0/1", not_needed.name, False)}

    fig = lineage_figure(report)
    marks = _marks(fig)
    assert marks["damage-error"] == [("state/0/2", 6.0)]
    assert marks["damage-note"] == [("state/0/1", 5.0)]
    # the rewrite: a line just before version 6 in every panel, named at the top
    assert sorted(marks["rewrite"]) == [("state/0/0", 5.5), ("state/0/1", 5.5), ("state/0/2", 5.5)]
    labels = [t.get_text() for t in fig.axes[0].texts if t.get_gid() == "rewrite-label"]
    assert labels == ["batch 5: repartition 2 -> 3 partitions"]
    legend = _legend(fig)
    assert "damaged, a retained batch needs it (error)" in legend
    assert "damaged, no retained batch needs it (note)" in legend
    assert REWRITE_LABEL in legend
    assert "(1 needed)" in fig.axes[2].get_title(loc="left")

    png = tmp_path / "lineage.png"
    rc, out, err = run_cli(["inspect", str(copy), "--plot", str(png)])
    assert rc == EXIT_PROBLEMS and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", err
    assert "rewritten    batch 5 (state version 6): repartition 2 -> 3 partitions" in out


def test_inspect_plot_marks_the_batch_a_migrate_rewrote(spark, tmp_path, monkeypatch):
    """A query run one batch on Spark's HDFS provider, then migrated onto lineagestore (2 -> 3 partitions):
    its batch 1 is named "migrated from HDFSBackedStateStoreProvider", with the partition counts."""
    pytest.importorskip("matplotlib")
    from lineagestore.checkpoint import migrate
    from lineagestore.checkpoint.migration import SPARK_PROVIDERS
    from lineagestore.cli.plot import lineage_figure

    spark_hdfs = {  # Spark's HDFS provider, which writes checkpoint format version 1 only
        "spark.sql.streaming.stateStore.providerClass": SPARK_PROVIDERS[1],
        "spark.sql.streaming.stateStore.checkpointFormatVersion": "1",
    }
    ours = {k: spark.conf.get(k) for k in spark_hdfs}
    source, checkpoint = tmp_path / "input", tmp_path / "checkpoint"
    source.mkdir()
    _write_input(source, 0)
    for k, v in spark_hdfs.items():
        spark.conf.set(k, v)
    try:
        query = _start(spark, source, checkpoint, {})
        try:
            query.processAllAvailable()
        finally:
            query.stop()
    finally:
        for k, v in ours.items():
            spark.conf.set(k, v)
    assert migrate(spark, str(checkpoint), 3)["rowsMoved"] == USERS

    report = inspect_json(checkpoint)
    assert report["rewrites"] == [
        {
            "batch": 1,
            "version": 2,
            "kind": "migrate",
            "oldPartitions": 2,
            "newPartitions": 3,
            "fromProvider": SPARK_PROVIDERS[1],
        }
    ]
    fig = lineage_figure(report)
    labels = [t.get_text() for t in fig.axes[0].texts if t.get_gid() == "rewrite-label"]
    assert labels == ["batch 1: migrated from HDFSBackedStateStoreProvider, 2 -> 3 partitions"]
    assert sorted(_marks(fig)["rewrite"]) == [(f"state/0/{p}", 1.5) for p in range(3)]
    monkeypatch.setenv("COLUMNS", "80")
    rc, out, _ = run_cli(["inspect", str(checkpoint)])
    assert rc == EXIT_OK
    assert_fits(out)
    text = " ".join(line.strip() for line in out.splitlines())
    assert (
        "rewritten batch 1 (state version 2): migrated from HDFSBackedStateStoreProvider, 2 -> 3 partitions"
        in (" ".join(text.split()))
    )

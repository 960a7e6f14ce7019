"""The pytest plugin's registration and weight, and the file-level fault helpers (on plain files)."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from lineagestore.testing import faults


def test_plugin_is_registered_for_pytest():
    found = {e.name: e.value for e in entry_points(group="pytest11")}
    assert found.get("lineagestore") == "lineagestore.testing.plugin"


def test_plugin_import_is_light():
    """Loaded in every pytest run of an environment with lineagestore: it must not pull in Spark."""
    code = (
        "import sys, lineagestore.testing.plugin\n"
        "heavy = [m for m in ('pyspark', 'py4j', 'boto3', 'pandas') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def _store(tmp_path):
    store = tmp_path / "cp" / "state" / "0" / "1"
    (store / "shared").mkdir(parents=True)
    for name in ["10_b.delta", "2_a.delta", "9_c.delta"]:
        (store / name).write_bytes(bytes(range(32)))
        (store / f".{name}.crc").write_bytes(b"crc")
    (store / "shared" / "x.sst").write_bytes(b"sst")
    with zipfile.ZipFile(store / "9_c.zip", "w") as z:
        z.writestr("INDEX", "lineagestore-snapshot-index 1\nstore 0 1 default\ncheckpoint 9 c\nend 0\n")
        z.writestr("CURRENT", "MANIFEST-1\n")
    return tmp_path / "cp", store


def test_state_files_and_damage(tmp_path):
    cp, store = _store(tmp_path)
    assert [p.name for p in faults.state_files(cp, "delta")] == ["2_a.delta", "9_c.delta", "10_b.delta"]
    assert [p.name for p in faults.state_files(cp, "sst", partition=1)] == ["x.sst"]
    with pytest.raises(FileNotFoundError):
        faults.state_files(cp, "delta", partition=0)
    with pytest.raises(ValueError):
        faults.state_files(cp, "changelog")

    p = faults.corrupt(store / "2_a.delta")
    assert p.read_bytes()[16] == 16 ^ 0xFF and not (store / ".2_a.delta.crc").exists()
    faults.truncate(store / "9_c.delta")
    assert (store / "9_c.delta").stat().st_size == 16
    faults.delete(store / "10_b.delta")
    assert not (store / "10_b.delta").exists() and not (store / ".10_b.delta.crc").exists()

    faults.corrupt_snapshot_index(store / "9_c.zip")
    with zipfile.ZipFile(store / "9_c.zip") as z:
        assert z.namelist() == ["INDEX", "CURRENT"]
        assert "checkpoint 8 c" in z.read("INDEX").decode()


def test_rewind_forgets_commits_and_later_offsets(tmp_path):
    cp = tmp_path / "cp"
    for d in ("commits", "offsets"):
        (cp / d).mkdir(parents=True)
        for b in range(4):
            (cp / d / str(b)).write_text("v1")
    assert faults.rewind(cp, 2) == [2, 3]
    assert sorted(p.name for p in (cp / "commits").iterdir()) == ["0", "1"]
    assert sorted(p.name for p in (cp / "offsets").iterdir()) == ["0", "1", "2"]
    with pytest.raises(ValueError, match="not committed"):
        faults.rewind(cp, 3)


def test_fault_steps_are_the_jvm_crash_points():
    scala = (
        Path(__file__).resolve().parents[2]
        / "jvm/core/src/main/scala/io/lineagestore/store/StoreSettings.scala"
    ).read_text()
    declared = re.findall(r'Step\("([a-z.-]+)"\)', scala)
    assert tuple(declared) == faults.ALL_STEPS + faults.ADJUNCT_STEPS + faults.STANDBY_STEPS
    groups = (
        faults.COMMIT_STEPS
        + faults.SNAPSHOT_STEPS
        + faults.CLEANUP_STEPS
        + faults.RESTORE_STEPS
        + faults.CATCH_UP_STEPS
        + faults.CLOSE_STEPS
    )
    assert faults.ALL_STEPS == groups
    with pytest.raises(ValueError, match="unknown step"):
        with faults.fail_once_at(None, "commit.later", "/tmp/x"):
            pass

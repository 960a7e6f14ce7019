"""The command's JVM start-up options: a class-data sharing archive written once and reused, C1 only for
short commands (lineagestore.jvm.start)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import lineagestore
from lineagestore.jvm.start import StartOptions, archive_path


def test_first_launch_writes_the_archive_later_ones_map_it(tmp_path, monkeypatch):
    monkeypatch.setenv("LINEAGESTORE_CACHE", str(tmp_path))
    jar = lineagestore.jar_path()
    first = StartOptions(jar, [], [], short_lived=True)
    assert "-XX:TieredStopAtLevel=1" in first.options
    writing = Path(
        next(o for o in first.options if o.startswith("-XX:ArchiveClassesAtExit=")).split("=", 1)[1]
    )
    assert writing.parent == tmp_path / "cds" and writing.name.endswith(".tmp")
    writing.write_bytes(b"archive")  # what the JVM writes at exit
    first.finish(exited_normally=True)
    archive = archive_path(jar, [], [])
    assert archive.read_bytes() == b"archive" and not writing.exists()

    second = StartOptions(jar, [], [], short_lived=False)
    assert second.options == [f"-XX:SharedArchiveFile={archive}"]  # verify/clone keep C2
    # other jars make another archive: the class path it was made for differs
    assert archive_path(jar, [str(Path(jar).parent)], []) != archive
    for n in range(6):  # older archives beyond the newest few are pruned when one is published
        stale = tmp_path / "cds" / f"tools-old{n}.jsa"
        stale.write_bytes(b"x")
        os.utime(stale, (1_000_000 + n, 1_000_000 + n))
    third = StartOptions(jar, [str(Path(jar).parent)], [], short_lived=False)
    Path(third.options[0].split("=", 1)[1]).write_bytes(b"other")
    third.finish(exited_normally=True)
    kept = sorted(p.name for p in (tmp_path / "cds").iterdir())
    assert (
        len(kept) == 4 and archive.name in kept and "tools-old5.jsa" in kept and "tools-old0.jsa" not in kept
    )


def test_a_killed_jvms_partial_archive_is_dropped_and_cds_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("LINEAGESTORE_CACHE", str(tmp_path))
    jar = lineagestore.jar_path()
    start = StartOptions(jar, [], [], short_lived=False)
    writing = Path(start.options[0].split("=", 1)[1])
    writing.write_bytes(b"half")
    start.finish(exited_normally=False)
    assert list((tmp_path / "cds").iterdir()) == []
    monkeypatch.setenv("LINEAGESTORE_CDS", "0")
    assert StartOptions(jar, [], [], short_lived=False).options == []


def test_the_command_writes_then_uses_its_archive(tmp_path):
    checkpoint = tmp_path / "checkpoint"
    (checkpoint / "commits").mkdir(parents=True)  # an empty Spark checkpoint: the JVM starts, reads, exits
    cache = tmp_path / "cache"
    exe = Path(sys.executable).parent / "lineagestore"
    env = {"LINEAGESTORE_CACHE": str(cache), "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"}
    env.update({k: v for k, v in os.environ.items() if k in ("JAVA_HOME", "HOME", "LANG")})
    for _ in range(2):
        out = subprocess.run(
            [str(exe), "inspect", str(checkpoint)], capture_output=True, text=True, timeout=300, env=env
        )
        assert out.returncode == 0, out.stderr
        assert "no committed batch" in out.stdout
        files = sorted(p.name for p in (cache / "cds").iterdir())
        assert len(files) == 1 and files[0].endswith(".jsa"), files  # published; no temporary file left

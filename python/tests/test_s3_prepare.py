"""``lineagestore-testing prepare-s3`` on the real cache and on an empty one, and the progress lines of a
fetch or build reaching the terminal through pytest's output capture."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lineagestore.testing import s3_setup
from lineagestore.testing.progress import megabytes

pytest.importorskip("boto3")  # the testing extra: prepare-s3 reports it missing otherwise


def _prepare(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("LINEAGESTORE_MINIO", "LINEAGESTORE_S3_BACKEND")}
    return subprocess.run(
        [sys.executable, "-m", "lineagestore.testing", "prepare-s3", *args],
        env={**base, "LINEAGESTORE_S3_BACKEND": "process", **env},
        capture_output=True,
        text=True,
        timeout=1800,  # on a machine without the cache this is the fetch and build the S3 suites would do
    )


def _line(out: str, path: Path) -> str:
    lines = [line for line in out.splitlines() if str(path) in line]
    assert len(lines) == 1, f"{path} not reported once:\n{out}"
    return lines[0]


def test_prepare_reports_every_item_of_the_cache_with_path_size_and_version():
    proc = _prepare()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    minio = _line(proc.stdout, s3_setup.minio_cache_path()).split()
    assert minio[:4] == ["ok", "MinIO", "server", s3_setup.MINIO_RELEASE] and minio[5] == "MB", minio
    for _, artifact, version in s3_setup.S3A_ARTIFACTS:
        path = s3_setup.s3a_jar_path(artifact, version)
        line = _line(proc.stdout, path)
        assert line.split()[0] == "ok" and f" {version} " in line, line
        assert f" {megabytes(path.stat().st_size)}  " in line, line
    assert "ready: all 5 present" in proc.stdout


def test_check_on_an_empty_cache_says_what_is_missing_and_fetches_nothing(tmp_path):
    proc = _prepare("--check", LINEAGESTORE_CACHE=str(tmp_path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert _line(proc.stdout, tmp_path / "minio" / s3_setup.MINIO_RELEASE / "minio").startswith("  missing")
    for _, artifact, version in s3_setup.S3A_ARTIFACTS:
        assert _line(
            proc.stdout, tmp_path / "s3a" / "hadoop-aws-3.5.0" / f"{artifact}-{version}.jar"
        ).startswith("  missing")
    assert "not ready: 4 of 5 missing" in proc.stderr and "`lineagestore-testing prepare-s3`" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_without_go_prepare_says_what_to_install_before_fetching_anything(tmp_path):
    # PATH with this Python's directory only: no go, no docker, no mvn
    proc = _prepare(LINEAGESTORE_CACHE=str(tmp_path), PATH=str(Path(sys.executable).parent))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "nothing was fetched" in proc.stderr
    assert "needs Go, which is not on PATH. Install Go >= 1.21" in proc.stderr
    assert "LINEAGESTORE_MINIO" in proc.stderr and "testcontainers[minio]" in proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(shutil.which("go") is None, reason="needs go on PATH")
def test_a_failed_build_quotes_go_and_leaves_nothing_in_the_cache(tmp_path):
    # the real go, with the module proxy off and an empty module cache: it fails at once, as offline
    proc = _prepare(
        LINEAGESTORE_CACHE=str(tmp_path / "cache"), GOMODCACHE=str(tmp_path / "mod"), GOPROXY="off"
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"building MinIO {s3_setup.MINIO_RELEASE} with `go install" in proc.stderr
    assert "failed (exit 1)" in proc.stderr and "module lookup disabled by GOPROXY=off" in proc.stderr
    assert "the Go module proxy (off) reachable" in proc.stderr
    left = [p for p in (tmp_path / "cache").rglob("*") if not p.is_dir()]
    assert left == [] and not list((tmp_path / "cache" / "minio" / s3_setup.MINIO_RELEASE).iterdir())


PROGRESS_TEST = """
import pytest

from lineagestore.testing.progress import Ticker, say


@pytest.fixture
def fetched():  # as the s3 fixtures fetch and build in their set-up
    say("lineagestore.testing: fetching bundle-2.35.4.jar (686 MB)")
    yield


def test_it(fetched):
    print("a print the capture keeps")
    Ticker("building MinIO", every=0.0).tick("12 packages compiled")
"""


@pytest.mark.parametrize("capture", ["fd", "sys"])
def test_progress_reaches_the_terminal_through_pytests_capture(tmp_path, capture):
    (tmp_path / "test_progress.py").write_text(textwrap.dedent(PROGRESS_TEST))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--capture={capture}",
            str(tmp_path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "lineagestore.testing: fetching bundle-2.35.4.jar (686 MB)\n" in proc.stdout
    assert "lineagestore.testing: building MinIO: 0 s, 12 packages compiled\n" in proc.stdout
    assert "a print the capture keeps" not in proc.stdout + proc.stderr  # capture was on

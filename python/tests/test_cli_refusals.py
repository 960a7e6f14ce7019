"""What the command line refuses or reports before (or without) reading a checkpoint: the examples in every
verb's help, a missing local path named before any JVM starts, and an unreachable filesystem's own exit code.
The before-any-JVM checks run the command with no Java: had it started a JVM, it would exit 4."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lineagestore.cli import EXIT_BAD_CHECKPOINT, EXIT_OK, EXIT_UNREACHABLE
from lineagestore.cli.common import EXIT_CODES
from lineagestore.cli.program import VERBS
from lineagestore.testing.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]


def run_without_java(argv: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    """``lineagestore <argv>`` in a new process that cannot start a JVM (no java on PATH, JAVA_HOME bogus)."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_HOME")}
    env |= {"JAVA_HOME": str(tmp_path / "no-java"), "PATH": str(tmp_path / "no-bin"), "LINEAGESTORE_CDS": "0"}
    return subprocess.run(
        [sys.executable, "-m", "lineagestore.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("verb", [v.name for v in VERBS])
def test_every_verb_help_has_examples(verb):
    rc, out, _ = run_cli([verb, "--help"])
    assert rc == EXIT_OK
    examples = out[out.index("examples:") :]
    assert f"lineagestore {verb} " in examples, out


def test_exit_codes_are_documented_in_help_and_operations_md():
    rc, out, _ = run_cli(["--help"])
    assert rc == EXIT_OK and EXIT_CODES in out
    table = (ROOT / "docs" / "operations.md").read_text()
    for line in EXIT_CODES.splitlines()[1:]:
        code = line.strip().split(" ")[0]
        if code.isdigit():
            assert f"\n| {code} | " in table, f"exit code {code} is not in docs/operations.md's table"
    assert f"\n| {EXIT_UNREACHABLE} | the checkpoint's filesystem cannot be reached" in table


@pytest.mark.parametrize(
    "argv",
    [
        ["inspect", "{missing}"],
        ["verify", "{missing}"],
        ["gc", "{missing}"],
        ["repartition", "{missing}", "--partitions", "4"],
        ["migrate", "{missing}"],
        ["clone", "{missing}", "{tmp}/copy"],
        ["inspect", "file://{missing}"],
    ],
)
def test_a_missing_local_checkpoint_is_named_before_any_jvm_starts(argv, tmp_path):
    missing = tmp_path / "no-such-checkpoint"
    args = [a.format(missing=missing, tmp=tmp_path) for a in argv]
    out = run_without_java(args, tmp_path)
    assert out.returncode == EXIT_BAD_CHECKPOINT, out.stderr
    assert f"{args[1]} does not exist" in out.stderr
    assert not (tmp_path / "copy").exists()


def test_an_unreachable_filesystem_has_its_own_exit_code():
    rc, out, err = run_cli(["inspect", "hdfs://nn.invalid:8020/ck"])
    assert rc == EXIT_UNREACHABLE, err
    assert "cannot reach the checkpoint's filesystem" in err and "java.net.UnknownHostException" in err, err
    assert "nn.invalid" in err and out == ""

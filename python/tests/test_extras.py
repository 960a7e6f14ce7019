"""Optional packages: the extras users install them with, and one clear line naming the extra when missing."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from lineagestore import cli
from lineagestore._extras import DISTRIBUTION_OF, EXTRA_OF

ROOT = Path(__file__).resolve().parents[2]


def _blocked(modules: list[str], body: str) -> subprocess.CompletedProcess:
    """Run ``body`` in a fresh interpreter where importing ``modules`` fails as if they were not installed
    (``sys.modules[name] = None`` makes ``import name`` raise ImportError)."""
    prelude = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in modules)
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(body)], capture_output=True, text=True, timeout=60
    )


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0] for r in requirements}


def test_every_optional_package_is_in_the_extra_the_message_names():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for package, extra in EXTRA_OF.items():
        wanted = DISTRIBUTION_OF.get(package, package)  # botocore comes with boto3
        assert wanted in _names(extras[extra]), (package, extra)
        assert wanted in _names(extras["test"]), package  # the project's own suites have it all


def _bounds(requirements: list[str]) -> dict[str, str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0]: r for r in requirements}


def test_python_state_is_what_the_stateful_python_apis_import_with_the_test_extras_bounds():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    state = _bounds(extras["python-state"])
    assert set(state) == {"pandas", "pyarrow", "protobuf"}, state
    assert "<3" in state["pandas"] and "<7" in state["protobuf"], state  # no pandas 3 FutureWarning
    test = _bounds(extras["test"])
    assert {name: test[name] for name in state} == state  # the suites run what users install
    # the JVM's check of the workers' Python names the same extra
    scala = (ROOT / "jvm/spark/src/main/scala/io/lineagestore/spark/PythonStateCheck.scala").read_text()
    assert 'val Extra = "python-state"' in scala


def test_plot_without_matplotlib_names_the_plot_extra(tmp_path):
    result = _blocked(
        ["matplotlib"],
        f"""
        from lineagestore.cli import main
        sys.exit(main(["inspect", {str(tmp_path)!r}, "--plot", {str(tmp_path / "x.png")!r}]))
        """,
    )
    assert result.returncode == cli.EXIT_ENVIRONMENT, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "--plot needs matplotlib, which is not installed: pip install 'lineagestore[plot]'" in lines[0]


def test_s3_server_without_boto3_names_the_testing_extra():
    result = _blocked(
        ["boto3", "botocore", "botocore.config"],
        """
        from lineagestore.testing.s3 import S3Server
        try:
            S3Server().start()
        except ImportError as e:
            print(e)
        """,
    )
    assert "needs boto3, which is not installed: pip install 'lineagestore[testing]'" in result.stdout, (
        result.stdout + result.stderr
    )
    assert "root credentials" not in result.stdout


@pytest.mark.parametrize("doc", ["README.md", "docs/testing.md", "docs/operations.md"])
def test_install_instructions_work_without_an_index(doc):
    text = (ROOT / doc).read_text()
    # the package is on no index yet: every doc that says pip install lineagestore says how from a clone
    if "pip install lineagestore" in text or "pip install 'lineagestore" in text:
        assert "pip install -e ." in text or "README.md#installing" in text, doc

"""The examples of docs/testing.md, "Testing your own query", run as the pytest file they say they are, and
the complete Python example of docs/transform-with-state.md.

The ``python`` blocks of that section are joined into one test module and run by pytest in a child process
(its own SparkSession through the installed plugin), so the documentation cannot drift from what works. The
transformWithState example runs in this suite's session, and what it prints must be what the page shows.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from lineagestore.testing.session import sql_conf_restored

DOC = Path(__file__).resolve().parent.parent / "docs" / "testing.md"
SECTION = "## Testing your own query"


def example_source() -> str:
    text = DOC.read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    blocks = re.findall(r"^```python\n(.*?)^```$", text[start : end if end >= 0 else None], re.S | re.M)
    assert len(blocks) >= 4, f"expected the examples in {DOC} under {SECTION!r}"
    return "\n\n".join(blocks)


def test_docs_examples_run(tmp_path):
    module = tmp_path / "test_docs_example.py"
    module.write_text(example_source())
    compile(module.read_text(), str(module), "exec")
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            str(module),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, f"{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
    assert re.search(r"\b7 passed\b", proc.stdout), proc.stdout[-2000:]


TWS_DOC = DOC.parent / "transform-with-state.md"
TWS_SECTION = "## A complete Python example"


def test_transform_with_state_example_runs_as_written(spark, capsys):
    """docs/transform-with-state.md's complete Python example runs as written in this session's JVM, on
    lineagestore, and prints what the page shows under it."""
    text = TWS_DOC.read_text()
    start = text.index(TWS_SECTION)
    end = text.find("\n## ", start + len(TWS_SECTION))
    section = text[start : end if end >= 0 else None]
    (code,) = re.findall(r"^```python\n(.*?)^```$", section, re.S | re.M)
    shown = re.search(r"^It prints:\n\n```\n(.*?)^```$", section, re.S | re.M).group(1)
    namespace = {"__name__": "tws_example"}
    with sql_conf_restored(spark):
        capsys.readouterr()
        exec(compile(code, str(TWS_DOC), "exec"), namespace)
        printed = capsys.readouterr().out
    assert printed == shown, printed
    offsets = Path(namespace["checkpoint"]) / "offsets" / "0"
    assert "io.lineagestore.spark.LineageStateStoreProvider" in offsets.read_text()

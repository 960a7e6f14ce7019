"""Which state store providers the suite runs against, and where the lineagestore jar comes from.

The jar is looked up, in this order: ``lineagestore.jvm.jar.jar_path()`` (the Python package, importable
installed or from ``<repo>/python``), the ``LINEAGESTORE_JAR`` environment variable, the newest
``jvm/spark/target/scala-2.13/lineagestore-spark_2.13-*.jar`` of this repository. Without a jar the
"lineagestore" parameter is skipped with the reason, so the suite still runs against the built-in provider.
"""

from __future__ import annotations

import glob
import importlib
import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
JAR_GLOB = "jvm/spark/target/scala-2.13/lineagestore-spark_2.13-*.jar"


def find_lineagestore_jar() -> tuple[str | None, str]:
    """Return (jar path, how it was found) or (None, why not)."""
    notes = []
    # 1. the Python package ships / locates the jar
    try:
        try:
            mod = importlib.import_module("lineagestore.jvm.jar")
        except ModuleNotFoundError:
            if (REPO_ROOT / "python" / "lineagestore").is_dir() and str(REPO_ROOT / "python") not in sys.path:
                sys.path.append(str(REPO_ROOT / "python"))
            mod = importlib.import_module("lineagestore.jvm.jar")
        path = str(mod.jar_path())
        if os.path.isfile(path):
            return path, "lineagestore.jvm.jar.jar_path()"
        notes.append(f"lineagestore.jvm.jar.jar_path() returned missing file {path}")
    except Exception as exc:  # the module is being written concurrently; any failure means "not usable"
        notes.append(f"lineagestore.jvm.jar unusable ({type(exc).__name__}: {exc})")
    # 2. explicit environment variable
    env = os.environ.get("LINEAGESTORE_JAR")
    if env:
        if os.path.isfile(env):
            return env, "LINEAGESTORE_JAR"
        notes.append(f"LINEAGESTORE_JAR={env} does not exist")
    else:
        notes.append("LINEAGESTORE_JAR not set")
    # 3. the newest sbt build output in this repository
    jars = [
        j
        for j in glob.glob(str(REPO_ROOT / JAR_GLOB))
        if not j.endswith(("-sources.jar", "-javadoc.jar", "-tests.jar"))
    ]
    if jars:
        return max(jars, key=os.path.getmtime), JAR_GLOB
    notes.append(f"no {JAR_GLOB}")
    return None, "; ".join(notes)


LINEAGE_JAR, LINEAGE_JAR_SOURCE = find_lineagestore_jar()
if LINEAGE_JAR and LINEAGE_JAR_SOURCE != "lineagestore.jvm.jar.jar_path()":
    os.environ["LINEAGESTORE_JAR"] = LINEAGE_JAR  # the plugin's `spark` fixture then uses this jar

PROVIDER_PARAMS = [
    pytest.param("builtin", id="builtin"),
    pytest.param(
        "lineagestore",
        id="lineagestore",
        marks=pytest.mark.skipif(
            LINEAGE_JAR is None, reason=f"lineagestore jar not found: {LINEAGE_JAR_SOURCE}"
        ),
    ),
]

# For tests whose Spark-provider half is a reference for what the test expects of Spark's own code (the
# offset log's errors at query start, its restart), not an oracle for lineagestore's outputs: that half runs in
# the long run only (conftest.py, LINEAGESTORE_LONG_RUN; docs/testing.md), lineagestore's in every run.
PROVIDER_PARAMS_SPARK_IN_LONG_RUN = [
    pytest.param(*PROVIDER_PARAMS[0].values, id="builtin", marks=pytest.mark.long_run),
    PROVIDER_PARAMS[1],
]

"""transformWithStateInPandas in a Python that cannot import protobuf: the user's call fails at once, naming
the module and the extra (io.lineagestore.spark.PythonStateCheck), instead of the first batch's "driver worker
exited unexpectedly (crashed)" with the cause only in the log.

The workers' Python is a real one whose ``google.protobuf`` cannot be imported (a ``sitecustomize`` on its
``PYTHONPATH`` refuses it, as a Python without protobuf would); the test points the session's ``pythonExec``
(what PySpark gives every Python function, ``PYSPARK_PYTHON``) at it while it builds the query.
"""

from __future__ import annotations

import stat
import sys

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql.streaming import StatefulProcessor

from lineagestore._extras import EXTRA_OF, install_hint
from lineagestore.testing.harness import PROVIDER_CLASSES

PROVIDER = "spark.sql.streaming.stateStore.providerClass"
HIDE_PROTOBUF = """\
import sys


class _NoProtobuf:
    def find_spec(self, name, path=None, target=None):
        if name == "google.protobuf" or name.startswith("google.protobuf."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoProtobuf())
"""


class Count(StatefulProcessor):
    def init(self, handle):
        self.n = handle.getValueState("n", "n long")

    def handleInputRows(self, key, rows, timerValues):
        import pandas as pd

        n = (self.n.get()[0] if self.n.exists() else 0) + sum(len(r) for r in rows)
        self.n.update((n,))
        yield pd.DataFrame({"k": [key[0]], "n": [n]})

    def close(self):
        pass


@pytest.fixture
def python_without_protobuf(tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(HIDE_PROTOBUF)
    python = tmp_path / "python-without-protobuf"
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{shim}:$PYTHONPATH" exec "{sys.executable}" "$@"\n')
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    return str(python)


@pytest.fixture
def on_lineagestore(spark):
    saved = spark.conf.get(PROVIDER)
    spark.conf.set(PROVIDER, PROVIDER_CLASSES["lineagestore"])
    yield spark
    spark.conf.set(PROVIDER, saved)


def tws(spark, source):
    return (
        spark.readStream.schema("k string")
        .json(str(source))
        .groupBy("k")
        .transformWithStateInPandas(Count(), "k string, n long", "update", "None")
    )


def test_a_python_without_protobuf_is_named_with_the_extra_at_the_call(
    on_lineagestore, python_without_protobuf, tmp_path
):
    spark = on_lineagestore
    sc = spark.sparkContext
    normal = sc.pythonExec
    sc.pythonExec = python_without_protobuf
    try:
        with pytest.raises(AnalysisException) as raised:
            tws(spark, tmp_path)
    finally:
        sc.pythonExec = normal
    message = str(raised.value)
    assert f"their Python ({python_without_protobuf}) cannot import google.protobuf" in message, message
    assert "No module named 'google.protobuf'" in message, message
    extra = install_hint(EXTRA_OF["google"]).split(" (")[0]  # pip install 'lineagestore[python-state]'
    assert extra in message, message
    assert "exited unexpectedly" not in message


def test_the_python_of_the_suites_passes_the_check(on_lineagestore, tmp_path):
    tws(on_lineagestore, tmp_path)  # the suites' own Python has python-state: the call is not refused

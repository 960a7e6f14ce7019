"""Fixtures for the PySpark end-to-end suite.

One SparkSession serves the whole pytest process (Spark allows one SparkContext per JVM). The lineagestore
jar, when found, is put on that session's classpath at start (``spark.jars``). Each test is parametrised by
provider ("builtin", "lineagestore"); the ``provider`` fixture sets
``spark.sql.streaming.stateStore.providerClass`` in the session before the test starts its queries on a
fresh checkpoint. Spark reads that SQL conf when a query starts and records it in the offset log, and the
harness checks after every run that the checkpoint really carries that provider's files.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # make `import harness` work under any pytest import mode
    sys.path.insert(0, str(HERE))

from harness import BUILTIN_PROVIDER, PROVIDER_CLASSES, StreamHarness  # noqa: E402
from providers import LINEAGE_JAR, LINEAGE_JAR_SOURCE, PROVIDER_PARAMS  # noqa: E402


def pytest_report_header(config):
    if LINEAGE_JAR:
        return f"lineagestore jar: {LINEAGE_JAR} (via {LINEAGE_JAR_SOURCE})"
    return f"lineagestore jar: none ({LINEAGE_JAR_SOURCE}); lineagestore params will be skipped"


@pytest.fixture(scope="session")
def spark(request):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Python workers unpickle the tests' UDFs / StatefulProcessors by module name (test_operators, ...):
    # they must be able to import this directory whatever the current directory of pytest is.
    paths = [str(HERE), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("lineagestore-integration-tests")
        .config("spark.driver.memory", "2g")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.streaming.stateStore.providerClass", BUILTIN_PROVIDER)
        .config("spark.sql.streaming.stateStore.checkpointFormatVersion", "2")
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
        .config("spark.sql.streaming.stateStore.maintenanceInterval", "1s")
        .config("spark.sql.streaming.stateStore.minDeltasForSnapshot", "2")
    )
    if LINEAGE_JAR:
        builder = builder.config("spark.jars", LINEAGE_JAR)
    s3a_classpath = s3_session_classpath(request.session)  # only when a collected test uses S3 (s3.py)
    if s3a_classpath:
        builder = builder.config("spark.driver.extraClassPath", s3a_classpath)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(params=PROVIDER_PARAMS)
def provider(request, spark):
    """The provider name for this test; the session conf is switched before the test's queries start."""
    name = request.param
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", PROVIDER_CLASSES[name])
    yield name
    for q in spark.streams.active:  # a failed test must not leave a query running into the next one
        q.stop()
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", BUILTIN_PROVIDER)


@pytest.fixture
def make_harness(spark, provider, tmp_path):
    """Factory: ``make_harness(name)`` gives a StreamHarness with its own input dirs and checkpoint."""

    def factory(name: str = "q") -> StreamHarness:
        return StreamHarness(spark, tmp_path / name, provider)

    return factory


# Known gaps of lineagestore that Spark itself imposes or that are not built yet. Each is a strict xfail: the
# test still runs, must fail, and turns red the day the gap closes so the mark gets removed.
KNOWN_GAPS = {
    "tws": "Spark 4.3 runs transformWithState only when providerClass is exactly Spark's "
    "RocksDBStateStoreProvider (TransformWithStateExecBase.validateStateStoreProvider)",
}


@pytest.fixture
def known_gap(request, provider):
    """``known_gap("tws")`` marks the running test as an expected failure on lineagestore only."""

    def mark(name: str) -> None:
        if provider == "lineagestore":
            request.applymarker(pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[name]))

    return mark


# ------------------------------------------------------------- a real S3 server (s3.py, docs/testing.md)
from s3 import s3_bucket, s3_server  # noqa: E402, F401  (fixtures)
from s3 import session_classpath as s3_session_classpath  # noqa: E402

"""pytest plugin for testing streaming queries on lineagestore; registered as ``lineagestore`` (pytest11).

Installing lineagestore makes these fixtures available in every pytest run (docs/testing.md, "Testing your
own query"). Nothing heavy happens unless a test asks for them: this module imports only pytest and the
standard library, and Spark, MinIO and the s3a jars start or load on first use.

* ``spark`` (session): a SparkSession on lineagestore: ``local[2]``, 2 shuffle partitions, UI off, UTC,
  a temporary warehouse, ``lineagestore.configure`` (bundled jar, or ``$LINEAGESTORE_JAR``; the pyspark
  version check). Add or override settings with a session fixture ``lineagestore_spark_conf`` returning a
  dict, and set lineagestore options with ``lineagestore_options`` returning a ``LineageOptions``.
* ``stream``: a ``lineagestore.testing.harness.StreamHarness`` under ``tmp_path``: ``stream.add(rows)`` adds
  a batch, ``stream.run(build, mode)`` runs one availableNow trigger (or ``trigger="once"``) on the same
  checkpoint each time (stop and restart), ``stream.batch_outputs(...)``/``stream.rows()`` read the sink.
* ``oracle``: ``lineagestore.testing.oracle`` (plain-Python models and ``assert_batches``).
* ``s3_server`` (session): a started ``lineagestore.testing.s3.S3Server`` (real MinIO on 127.0.0.1):
  ``spark_conf(bucket)``, ``hadoop_conf(bucket)``, ``endpoint``, ``access_key``, ``secret_key``,
  ``boto3_client()``, ``bucket(name)``. The s3a jars go on the session's class path only when a collected
  test uses it. Their first use fetches the jars (690 MB) and, without Docker, builds MinIO (minutes), with
  progress on the terminal past the output capture (``write_to_terminal``); ``lineagestore-testing
  prepare-s3`` does both ahead of time.
* ``s3_bucket``: a fresh bucket, reachable as ``s3a://<name>/`` from ``spark`` during the test.
* ``s3_stream``: a ``StreamHarness`` whose checkpoint is in ``s3_bucket``.
* ``cluster`` (session): with ``--lineagestore-cluster=N``, a real multi-executor Spark
  (``lineagestore.testing.cluster.StandaloneCluster``: a standalone Master and N Workers on 127.0.0.2, .3,
  ..., one executor each with its own local directory), and ``spark`` runs on it instead of ``local[2]``.
  Without the option a test that asks for ``cluster`` is skipped (it fails instead when
  ``LINEAGESTORE_REQUIRE_CLUSTER=1``, as in ``dev/test``).
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any, NamedTuple

import pytest

S3_FIXTURES = ("s3_server", "s3_bucket", "s3_stream", "s3_faults")
_s3a_error: str | None = None
_config: pytest.Config | None = None  # the running session's, for write_to_terminal


def pytest_configure(config):
    global _config
    _config = config


def pytest_unconfigure(config):
    global _config
    _config = None


def write_to_terminal(line: str) -> bool:
    """Write ``line`` on pytest's terminal with output capture suspended for it; False when no terminal
    reporter runs (e.g. an xdist worker), for the caller to fall back to stderr.

    ``lineagestore.testing.progress.say`` calls this: a fixture that fetches the s3a jars or builds MinIO
    for minutes then says so as it happens instead of looking hung, and the line is not kept in the test's
    captured output (which pytest shows only for a failed test)."""
    config = _config
    if config is None:
        return False
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return False
    capman = config.pluginmanager.get_plugin("capturemanager")
    if capman is None:
        reporter.write_line(line)
    else:
        with capman.global_and_fixture_disabled():
            reporter.write_line(line)
    return True


def _uses(session: pytest.Session, names: tuple[str, ...]) -> bool:
    return any(set(names) & set(getattr(item, "fixturenames", ())) for item in session.items)


def _s3a_classpath(session: pytest.Session) -> str:
    """The s3a jars as a class path if a collected test uses S3, else "" (a fetch error is kept for later).

    On the driver's class path rather than in ``spark.jars``: local mode runs executors in the driver JVM,
    and Spark copies every ``spark.jars`` entry into each session's work directory (650 MB for the SDK).
    """
    global _s3a_error
    if not _uses(session, S3_FIXTURES):
        return ""
    try:
        from lineagestore.testing.s3 import s3a_jars

        return os.pathsep.join(s3a_jars())
    except Exception as exc:  # reported by s3_server, so only the S3 tests fail
        _s3a_error = f"{type(exc).__name__}: {exc}"
        return ""


def _worker_pythonpath(session: pytest.Session) -> None:
    """Spark's Python workers unpickle functions by module name: let them import the tests' directories."""
    dirs = {str(Path(str(item.path)).parent) for item in session.items if getattr(item, "path", None)}
    paths = [*sorted(dirs), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))


def pytest_addoption(parser):
    parser.addoption(
        "--lineagestore-cluster",
        type=int,
        default=0,
        metavar="N",
        help="run the spark fixture on a standalone Spark cluster of N Workers on 127.0.0.2.. (0: local[2])",
    )


@pytest.fixture(scope="session")
def lineagestore_cluster(request, tmp_path_factory):
    """The standalone cluster the session runs on with ``--lineagestore-cluster=N``, else None."""
    workers = request.config.getoption("--lineagestore-cluster")
    if not workers:
        yield None
        return
    from lineagestore.testing.cluster import StandaloneCluster

    with StandaloneCluster(workers=workers, base_dir=tmp_path_factory.mktemp("cluster")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def cluster(lineagestore_cluster):
    """The session's ``StandaloneCluster`` (``spark`` runs on it); skipped without ``--lineagestore-cluster``."""
    if lineagestore_cluster is None:
        why = "needs a multi-executor Spark: run pytest with --lineagestore-cluster=3"
        if os.environ.get("LINEAGESTORE_REQUIRE_CLUSTER") == "1":
            pytest.fail(why)
        pytest.skip(why)
    return lineagestore_cluster


@pytest.fixture(scope="session")
def lineagestore_spark_conf() -> dict[str, str]:
    """Extra SparkSession settings for the ``spark`` fixture (applied last); override in your conftest."""
    return {}


@pytest.fixture(scope="session")
def lineagestore_options():
    """A ``lineagestore.LineageOptions`` for the ``spark`` fixture, or None; override in your conftest."""
    return None


@pytest.fixture(scope="session")
def spark(request, tmp_path_factory, lineagestore_spark_conf, lineagestore_options, lineagestore_cluster):
    """A SparkSession on lineagestore for the whole test session (one SparkContext per JVM): ``local[2]``, or
    the session's standalone cluster with ``--lineagestore-cluster=N``."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    _worker_pythonpath(request.session)
    from lineagestore.testing.session import local_builder

    conf = {
        "spark.sql.session.timeZone": "UTC",
        "spark.default.parallelism": "2",
        "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("spark-warehouse")),
    }
    if lineagestore_cluster is None:
        # the stores' local directories under pytest's temporary directory, not java.io.tmpdir's
        # lineagestore/ (kept there for warm restarts, so every test session added to it); the cluster's
        # executors keep their own java.io.tmpdir each, as on separate hosts. Options or settings may override.
        conf["spark.sql.streaming.stateStore.lineagestore.localDir"] = str(
            tmp_path_factory.mktemp("lineagestore-local")
        )
    jar = os.environ.get("LINEAGESTORE_JAR")
    if jar:  # a jar of your own build instead of the one this package carries
        conf["spark.jars"] = jar
    builder = local_builder(
        app_name="lineagestore-pytest", conf=conf, options=lineagestore_options, use_bundled_jar=not jar
    )
    classpath = _s3a_classpath(request.session)
    if classpath:
        builder = builder.config("spark.driver.extraClassPath", classpath)
    if lineagestore_cluster is not None:
        builder = lineagestore_cluster.configure(builder)
        # the executors are other JVMs on this machine: the same s3a jars and test modules reach them by path
        if classpath:
            builder = builder.config("spark.executor.extraClassPath", classpath)
        builder = builder.config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    for key, value in lineagestore_spark_conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    if lineagestore_cluster is not None:
        lineagestore_cluster.await_executors(session)
    yield session
    session.stop()


@pytest.fixture
def stream(spark, tmp_path):
    """A restartable harness for one query: its own input directories and checkpoint under ``tmp_path``."""
    from lineagestore.testing.harness import StreamHarness

    harness = StreamHarness(spark, tmp_path / "stream")
    yield harness
    for q in spark.streams.active:  # a failed test must not leave a query running into the next one
        q.stop()


@pytest.fixture
def oracle():
    """Plain-Python models of stateful operators, and ``assert_batches`` (lineagestore.testing.oracle)."""
    from lineagestore.testing import oracle as module

    return module


# ------------------------------------------------------------------------------------------------- S3
@pytest.fixture(scope="session")
def s3_server(spark):  # after the session: its class path was chosen when it started
    """A real S3 server (MinIO on 127.0.0.1) for the session; stopped and deleted at the end."""
    if _s3a_error:
        pytest.fail(f"the s3a jars could not be fetched, so Spark cannot reach S3: {_s3a_error}")
    from lineagestore.testing.s3 import S3Server

    with S3Server() as server:
        yield server


@pytest.fixture
def s3_bucket(spark, s3_server):
    """A fresh bucket, reachable as ``s3a://<name>/`` from ``spark`` for the duration of the test."""
    name = f"ls-{uuid.uuid4().hex[:16]}"
    s3_server.bucket(name)
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    settings = s3_server.hadoop_conf(name)
    for key, value in settings.items():
        hadoop_conf.set(key, value)
    yield name
    for key in settings:
        hadoop_conf.unset(key)


@pytest.fixture
def s3_stream(spark, s3_server, s3_bucket, tmp_path):
    """Like ``stream``, with the checkpoint at ``s3a://<s3_bucket>/checkpoint`` (inputs stay local)."""
    from lineagestore.testing.harness import S3StreamHarness

    harness = S3StreamHarness(spark, tmp_path / "stream", None, s3_server, s3_bucket, "checkpoint")
    yield harness
    for q in spark.streams.active:
        q.stop()


# ------------------------------------------------------------------------------------------- s3_faults
class S3Faults(NamedTuple):
    """What ``s3_faults`` yields: a fresh bucket whose s3a traffic goes through ``proxy``."""

    bucket: str
    proxy: Any  # lineagestore.testing.s3_proxy.FaultyS3Proxy
    hadoop_conf: dict[str, str]  # the per-bucket s3a settings in force (endpoint = the proxy)


@pytest.fixture
def s3_faults(spark, s3_server):
    """A fresh bucket reached by s3a through a fault-injecting proxy in front of ``s3_server`` (loopback only).

    Faults are off until the test asks: ``s3_faults.proxy.set_faults(error_5xx=0.05, throttle=0.05)``; s3a
    uses short timeouts and few retries on this bucket (``S3A_FAULT_TEST_SETTINGS``), so a fault either is
    retried or fails the batch quickly. ``s3_faults.proxy.counts`` says what was injected.
    """
    from lineagestore.testing.s3_proxy import FaultyS3Proxy, s3a_conf_via_proxy

    name = f"ls-f-{uuid.uuid4().hex[:12]}"
    s3_server.bucket(name)
    with FaultyS3Proxy(s3_server.endpoint, seed=5) as proxy:
        settings = s3a_conf_via_proxy(s3_server.hadoop_conf(name), proxy.endpoint, name)
        hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
        for key, value in settings.items():
            hadoop_conf.set(key, value)
        try:
            yield S3Faults(name, proxy, settings)
        finally:
            proxy.clear()
            for key in settings:
                hadoop_conf.unset(key)

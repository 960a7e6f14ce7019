"""Fixtures for the PySpark end-to-end suite, on top of the lineagestore pytest plugin.

The plugin (``lineagestore.testing.plugin``, installed with the package) gives the session-wide ``spark``
(one SparkContext per JVM), ``s3_server`` and ``s3_bucket``; this file sets the suite's extra session
settings through ``lineagestore_spark_conf``. Each test is parametrised by provider ("builtin",
"lineagestore"); the ``provider`` fixture sets ``spark.sql.streaming.stateStore.providerClass`` in the
session before the test starts its queries on a fresh checkpoint. Spark reads that SQL conf when a query
starts and records it in the offset log, and the harness checks after every run that the checkpoint really
carries that provider's files.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # make `import providers` work under any pytest import mode
    sys.path.insert(0, str(HERE))

from lineagestore.testing.harness import BUILTIN_PROVIDER, PROVIDER_CLASSES, StreamHarness  # noqa: E402
from lineagestore.testing.session import SNAPSHOT_OFTEN  # noqa: E402
from providers import LINEAGE_JAR, LINEAGE_JAR_SOURCE, PROVIDER_PARAMS  # noqa: E402

# The long run: tests marked ``long_run`` (the whole of a matrix whose sample runs anyway, a second run of a
# scenario another test already covers) run only with LINEAGESTORE_LONG_RUN=1, which keeps dev/test inside CI's
# 40 minutes. docs/testing.md, "The long run", lists them and why each is there.
LONG_RUN = os.environ.get("LINEAGESTORE_LONG_RUN") == "1"


def pytest_collection_modifyitems(config, items):
    if LONG_RUN:
        return
    skip = pytest.mark.skip(reason="long run only: LINEAGESTORE_LONG_RUN=1 dev/test (docs/testing.md)")
    for item in items:
        if item.get_closest_marker("long_run"):
            item.add_marker(skip)


def pytest_report_header(config):
    if LINEAGE_JAR:
        return f"lineagestore jar: {LINEAGE_JAR} (via {LINEAGE_JAR_SOURCE})"
    return f"lineagestore jar: none ({LINEAGE_JAR_SOURCE}); lineagestore params will be skipped"


@pytest.fixture(scope="session")
def lineagestore_spark_conf():
    """The suite's settings on top of the plugin's session: both providers snapshot and maintain often."""
    return {
        "spark.app.name": "lineagestore-integration-tests",
        "spark.driver.memory": "2g",
        "spark.sql.streaming.stateStore.providerClass": BUILTIN_PROVIDER,  # switched per test by `provider`
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        **SNAPSHOT_OFTEN,
    }


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
# test still runs, must fail, and turns red the day the gap closes so the mark gets removed. (transformWithState
# was one until LineageSessionExtensions lifted Spark's provider check: docs/transform-with-state.md.)
# The last one (a ListState's change feed) closed with the delta format's merge records (docs/format.md).
KNOWN_GAPS: dict[str, str] = {}


@pytest.fixture
def known_gap(request, provider):
    """``known_gap("tws")`` marks the running test as an expected failure on lineagestore only."""

    def mark(name: str) -> None:
        if provider == "lineagestore":
            request.applymarker(pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[name]))

    return mark


# Outputs of each test's scenario on Spark's own provider, by test name: the reference lineagestore must match.
_BUILTIN_OUTPUTS: dict[str, object] = {}


@pytest.fixture
def same_as_builtin(request, spark, provider, tmp_path):
    """``same_as_builtin(scenario)`` runs ``scenario(harness)`` (it returns the outputs to compare, batch by
    batch) on this test's provider. On "builtin" the outputs are kept; on "lineagestore" they must equal the
    builtin run's of the same test, which runs here, in the same session, when it has not run before."""
    name = request.node.originalname

    def run(scenario):
        outputs = scenario(StreamHarness(spark, tmp_path / provider, provider))
        if provider == "builtin":
            _BUILTIN_OUTPUTS[name] = outputs
            return outputs
        if name not in _BUILTIN_OUTPUTS:
            spark.conf.set("spark.sql.streaming.stateStore.providerClass", BUILTIN_PROVIDER)
            try:
                _BUILTIN_OUTPUTS[name] = scenario(StreamHarness(spark, tmp_path / "builtin", "builtin"))
            finally:
                spark.conf.set("spark.sql.streaming.stateStore.providerClass", PROVIDER_CLASSES[provider])
        reference = _BUILTIN_OUTPUTS[name]
        assert outputs == reference, f"{provider} and Spark's RocksDB provider differ:\n" + "\n".join(
            _differences(outputs, reference)
        )
        return outputs

    return run


def _differences(ours, theirs, path: str = "") -> list[str]:
    """Where two outputs differ, down through tuples and dicts, each difference in full (a long batch-by-batch
    structure would otherwise be cut short by pytest's assertion rewriting)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        keys = sorted(set(ours) | set(theirs), key=repr)
        return [d for k in keys for d in _differences(ours.get(k), theirs.get(k), f"{path}[{k!r}]")]
    if isinstance(ours, tuple) and isinstance(theirs, tuple) and len(ours) == len(theirs):
        return [
            d
            for i, (a, b) in enumerate(zip(ours, theirs, strict=True))
            for d in _differences(a, b, f"{path}[{i}]")
        ]
    return [] if ours == theirs else [f"{path or 'outputs'}: lineagestore {ours!r}\n  builtin {theirs!r}"]

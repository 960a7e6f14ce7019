"""Cluster settings on top of the suite's: speculation on (the multi-executor case lineagestore exists for),
quick enough to launch a copy of a task that is slow on purpose."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def lineagestore_spark_conf(lineagestore_spark_conf):
    return {
        **lineagestore_spark_conf,
        "spark.speculation": "true",
        "spark.speculation.interval": "200ms",
        "spark.speculation.quantile": "0.5",
        "spark.speculation.multiplier": "2",
        "spark.speculation.minTaskRuntime": "2s",
        "spark.executor.memory": "768m",
    }


@pytest.fixture(params=["lineagestore"])
def provider(request, spark):
    """On the cluster the operator suites run on lineagestore only (Spark's provider is their oracle in
    local mode): the session conf is switched for the test and back after it."""
    from lineagestore.testing.harness import BUILTIN_PROVIDER, PROVIDER_CLASSES

    spark.conf.set("spark.sql.streaming.stateStore.providerClass", PROVIDER_CLASSES[request.param])
    spark.conf.set("spark.sql.shuffle.partitions", "4")  # more partitions than the cluster's 3 cores
    yield request.param
    for q in spark.streams.active:
        q.stop()
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", BUILTIN_PROVIDER)

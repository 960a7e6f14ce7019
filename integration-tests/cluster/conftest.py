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

"""A SparkSession on lineagestore for a test on this machine, built one way for every suite.

``local_builder()`` is ``SparkSession.builder`` in local mode with what tests want of it (a few shuffle
partitions, no UI, no console progress bar), then ``lineagestore.configure``; ``local_session()`` also starts
it and keeps Spark's log to errors::

    from lineagestore.testing.session import SNAPSHOT_OFTEN, local_session

    spark = local_session(conf=SNAPSHOT_OFTEN)

The pytest plugin's ``spark`` fixture is built on ``local_builder`` too (plus a warehouse and the stores'
local directory under pytest's temporary directory, UTC, and a cluster when asked for).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

# Snapshot and maintain often, so that a test of a few batches sees snapshots, uploads and clean-ups.
SNAPSHOT_OFTEN = {
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
    "spark.sql.streaming.stateStore.maintenanceInterval": "1s",
}


def local_builder(
    master: str = "local[2]",
    *,
    app_name: str | None = None,
    partitions: int | None = 2,
    conf: Mapping[str, str] | None = None,
    options: Any = None,
    use_bundled_jar: bool | None = None,
    **settings: Any,
) -> Any:
    """``SparkSession.builder`` on ``master`` with ``partitions`` shuffle partitions (None: Spark's default),
    the UI and the console progress bar off, ``app_name`` if given and ``conf`` (Spark settings), then
    ``lineagestore.configure(builder, options, use_bundled_jar=..., **settings)`` (``options`` a
    ``LineageOptions``, ``settings`` lineagestore keywords such as ``orphanGracePeriodMs``)."""
    from pyspark.sql import SparkSession

    import lineagestore

    builder = (
        SparkSession.builder.master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if app_name is not None:
        builder = builder.appName(app_name)
    if partitions is not None:
        builder = builder.config("spark.sql.shuffle.partitions", str(partitions))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return lineagestore.configure(builder, options, use_bundled_jar=use_bundled_jar, **settings)


def local_session(master: str = "local[2]", **kwargs: Any) -> Any:
    """``local_builder(master, **kwargs).getOrCreate()`` with Spark's log kept to errors."""
    session = local_builder(master, **kwargs).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


@contextmanager
def sql_conf_restored(spark: Any) -> Iterator[None]:
    """Runs its block, then puts the session's SQL confs back as they were: a docs example runs
    ``configure(builder).getOrCreate()`` as a user would, which returns the suite's shared session with the
    example's settings on it, and the suite's next test must not inherit them."""
    before = dict(spark.conf.getAll)
    try:
        yield
    finally:
        for key, value in dict(spark.conf.getAll).items():
            if key not in before:
                spark.conf.unset(key)
            elif before[key] != value:
                spark.conf.set(key, before[key])

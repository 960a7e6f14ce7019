"""Real-time mode on lineagestore from Python: ``lineagestore.realtime.start`` (docs/operations.md, "Real-time
mode"). The source is Spark's real-time test source, ``LowLatencyMemoryStream``, made through py4j (the only
other real-time source is Kafka). One source partition and one shuffle partition: a real-time batch runs its source
tasks and every shuffle partition at once, and the session's ``local[2]`` has two cores.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from pyspark.sql.classic.dataframe import DataFrame

from lineagestore import PROVIDER_CLASS
from lineagestore.realtime import RealTimeRouteError, start


class _Lines:
    """A ``foreach`` writer appending ``k n`` lines to a file (local mode: the workers share the disk)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def open(self, partition_id, epoch_id):
        return True

    def process(self, row):
        with open(self.path, "a") as f:
            f.write(f"{row['value']} {row['n']}\n")

    def close(self, error):
        pass


def _latest(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            k, n = line.split()
            out[k] = int(n)
    return out


def _await(query, path: Path, expected: dict[str, int], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while _latest(path) != expected and time.monotonic() < deadline and query.exception() is None:
        time.sleep(0.2)
    assert query.exception() is None, query.exception()
    assert _latest(path) == expected


def test_realtime_start_runs_on_lineagestore_and_restarts(spark, provider, tmp_path):
    if provider != "lineagestore":
        pytest.skip("the helper is for lineagestore; Spark's provider runs real-time mode without it")
    jvm = spark._jvm
    stream = jvm.org.apache.spark.sql.execution.streaming.sources.LowLatencyMemoryStream.apply(
        spark._jsparkSession, 1, jvm.org.apache.spark.sql.Encoders.STRING()
    )

    def add(*values: str) -> None:
        java = jvm.java.util.ArrayList()
        for v in values:
            java.add(v)
        stream.addData(jvm.scala.jdk.javaapi.CollectionConverters.asScala(java))

    add("a", "b", "a")
    counts = DataFrame(stream.toDF(), spark).groupBy("value").agg(F.count("*").alias("n"))
    checkpoint, out = str(tmp_path / "ck"), tmp_path / "rows.txt"
    writer = _Lines(str(out))
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    spark.conf.set(
        "spark.sql.streaming.realTimeMode.minBatchDuration", "1000"
    )  # Spark's default minimum: 5 s
    try:
        for expected in ({"a": 2, "b": 1}, {"a": 3, "b": 1, "c": 1}):
            query = start(counts, checkpoint, "2 seconds", lambda w: w.outputMode("update").foreach(writer))
            try:
                _await(query, out, expected)
                deadline = time.monotonic() + 60
                while not (query.lastProgress or {}).get("stateOperators") and time.monotonic() < deadline:
                    time.sleep(0.2)  # a real-time batch reports when it commits, at its end
                assert query.lastProgress, "no real-time batch committed within 60 s"
                metrics = [m for op in query.lastProgress["stateOperators"] for m in op["customMetrics"]]
                assert any(m.startswith("lineagestore") for m in metrics), metrics
            finally:
                query.stop()
            add("a", "c")
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
        spark.conf.unset("spark.sql.streaming.realTimeMode.minBatchDuration")


def test_realtime_start_refuses_a_checkpoint_of_another_provider(spark, provider, tmp_path):
    if provider != "lineagestore":
        pytest.skip("the helper's refusal")
    from lineagestore.testing.harness import BUILTIN_PROVIDER

    checkpoint = str(tmp_path / "ck")
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", BUILTIN_PROVIDER)
    try:
        df = spark.readStream.format("rate").option("rowsPerSecond", 5).load().groupBy("value").count()
        q = (
            df.writeStream.outputMode("update")
            .format("noop")
            .option("checkpointLocation", checkpoint)
            .start()
        )
        try:
            q.processAllAvailable()
        finally:
            q.stop()
    finally:
        spark.conf.set("spark.sql.streaming.stateStore.providerClass", PROVIDER_CLASS)
    with pytest.raises(
        RealTimeRouteError, match=f"records spark.sql.streaming.stateStore.providerClass={BUILTIN_PROVIDER}"
    ):
        start(df, checkpoint, "2 seconds", lambda w: w.outputMode("update").format("noop"))

"""Spark's own checkpoint readers on a checkpoint written by each provider.

A streaming aggregation (groupBy(k) count + sum, update mode) runs three times, restarting in between;
then the batch readers ``statestore`` (latest state, every older batch, change feed) and
``state-metadata`` must return what the oracle says the state is.
"""

from __future__ import annotations

import random

import pytest
from pyspark.sql import functions as F

from lineagestore.testing.harness import PROVIDER_CLASSES, StreamHarness
from lineagestore.testing.oracle import running_aggregate
from providers import PROVIDER_PARAMS

RUNS = 3


def _runs() -> list[list[dict]]:
    rnd = random.Random(11)
    return [
        [{"k": f"k{rnd.randrange(7)}", "v": rnd.randrange(1, 50)} for _ in range(10)] for _ in range(RUNS)
    ]


def _build(h: StreamHarness):
    return h.source("in", "k string, v long").groupBy("k").agg(F.count(F.lit(1)).alias("cnt"), F.sum("v"))


@pytest.fixture(scope="module", params=PROVIDER_PARAMS)
def agg_checkpoint(request, spark, tmp_path_factory):
    """One aggregation checkpoint per provider, shared by the reader tests of this module."""
    provider = request.param
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", PROVIDER_CLASSES[provider])
    try:
        h = StreamHarness(spark, tmp_path_factory.mktemp(f"state-reader-{provider}"), provider)
        runs = _runs()
        for rows in runs:
            h.write("in", rows)
            h.run(_build, "update")
    finally:
        spark.conf.set("spark.sql.streaming.stateStore.providerClass", PROVIDER_CLASSES["builtin"])
    return h, runs


def _state(df) -> dict[str, tuple[int, int]]:
    rows = df.select("key.k", "value.*").collect()
    result = {r[0]: (r[1], r[2]) for r in rows}
    assert len(result) == len(rows), "a key appears more than once in the state"
    return result


def test_statestore_reader_latest(spark, agg_checkpoint):
    h, runs = agg_checkpoint
    _, totals = running_aggregate(runs)
    df = spark.read.format("statestore").load(str(h.checkpoint))
    assert [f.name for f in df.schema.fields][:2] == ["key", "value"]
    assert _state(df) == totals


def test_statestore_reader_every_batch(spark, agg_checkpoint):
    """Older versions must resolve through the lineage too (snapshots + deltas of each batch)."""
    h, runs = agg_checkpoint
    for batch_id in range(RUNS):
        _, totals = running_aggregate(runs[: batch_id + 1])
        df = spark.read.format("statestore").option("batchId", batch_id).load(str(h.checkpoint))
        assert _state(df) == totals, f"state at batchId={batch_id}"


def test_statestore_change_feed(spark, agg_checkpoint):
    h, runs = agg_checkpoint
    per_batch, _ = running_aggregate(runs)
    expected = sorted((bid, "update", k, c, s) for bid, rows in per_batch.items() for k, c, s in rows)
    df = (
        spark.read.format("statestore")
        .option("readChangeFeed", True)
        .option("changeStartBatchId", 0)
        .load(str(h.checkpoint))
    )
    actual = sorted(tuple(r) for r in df.select("batch_id", "change_type", "key.k", "value.*").collect())
    assert actual == expected


def test_state_metadata_reader(spark, agg_checkpoint):
    h, _ = agg_checkpoint
    rows = spark.read.format("state-metadata").load(str(h.checkpoint)).collect()
    assert [(r.operatorId, r.operatorName, r.stateStoreName, r.numPartitions) for r in rows] == [
        (0, "stateStoreSave", "default", 2)
    ]
    assert (rows[0].minBatchId, rows[0].maxBatchId) == (0, RUNS - 1)

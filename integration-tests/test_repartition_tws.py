"""``lineagestore repartition`` of a transformWithState query (transformWithStateInPandas, EventTime): value,
list and map state with and without TTL, and event-time timers, each kept by Spark in column families that
key their rows differently (the grouping key; (grouping key, user key); (grouping key, expiry) and (expiry,
grouping key); TTL indexes (expiry, ...)). Every row must move with its grouping key, or a key's state, timer
or TTL entry silently vanishes: the outputs must equal the plain-Python oracle of test_transform_with_state.py,
batch for batch, timers registered before a repartition must fire for their keys after it, expired TTL state
must be evicted from the partition it moved to, and the state data source must find every key where Spark's
shuffle puts it.
"""

from __future__ import annotations

import json
import time

import pandas as pd
import pytest
from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from lineagestore import repartition as rp
from lineagestore.testing import oracle
from lineagestore.testing.cli import hadoop_conf_args
from test_repartition import Query, _placement_matches_spark, _verify_clean, tools  # noqa: F401 (fixture)
from test_transform_with_state import GAP_S, TWS_OUTPUT, CountListMapTimerProcessor

LONG_TTL_MS = 3_600_000  # never expires during the test
FLASH_TTL_MS = 2000  # expires across the sleep before the batch that checks eviction
TIMER_DELAY_MS = 1000
DELAY_S = 10


class TtlAndTimerProcessor(StatefulProcessor):
    """ProcessingTime mode (TTL needs it). Per key: a count (ValueState), value, list and map state under a
    2 s TTL (``flash*``, written with every input and never read: they are there to be evicted by Spark's
    TTL clean-up, which scans the TTL index families), a list under a 1 h TTL, and a processing-time timer
    1 s after the key's first row, which reports the count."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.count = handle.getValueState("count", "n long")
        self.flash = handle.getValueState("flash", "n long", FLASH_TTL_MS)
        self.flash_list = handle.getListState("flash_list", "n long", FLASH_TTL_MS)
        self.flash_map = handle.getMapState("flash_map", "p string", "n long", FLASH_TTL_MS)
        self.kept = handle.getListState("kept", "v long", LONG_TTL_MS)

    def handleInputRows(self, key, rows, timerValues):
        n = sum(len(pdf) for pdf in rows)
        count = self.count.get()[0] if self.count.exists() else 0
        if count == 0:
            self.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + TIMER_DELAY_MS)
        self.count.update((count + n,))
        self.flash.update((n,))
        self.flash_list.appendValue((n,))
        self.flash_map.updateValue(("n",), (n,))
        self.kept.appendValue((n,))
        yield pd.DataFrame({"k": [key[0]], "kind": ["data"], "n": [count + n]})

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        yield pd.DataFrame({"k": [key[0]], "kind": ["timer"], "n": [self.count.get()[0]]})

    def close(self) -> None:
        pass


def _state_keys(spark, checkpoint, **options) -> set[str]:
    reader = spark.read.format("statestore").option("operatorId", 0)
    for k, v in options.items():
        reader = reader.option(k, v)
    return {r[0] for r in reader.load(str(checkpoint)).select("key.k").collect()}


def _build(processor, time_mode: str, output: str, watermark: bool):
    def build(q):
        df = q.source("in", "k string, t long, v long")
        if watermark:
            df = df.withColumn("ts", F.timestamp_seconds("t")).withWatermark("ts", f"{DELAY_S} seconds")
        return df.groupBy("k").transformWithStateInPandas(
            statefulProcessor=processor, outputStructType=output, outputMode="Update", timeMode=time_mode
        )

    return build


def _repartition(
    spark, jvm_tools, q: Query, n: int, state_vars: tuple[str, ...], live: set[str], as_job: bool = False
) -> int:
    """Repartitions to ``n`` (``as_job``: as a Spark job on the session, else in the tools' JVM); checks that the state data source reads every ``live`` key of each state
    variable back, each where Spark's shuffle puts it (the timers too), and that verify is clean; returns
    the batch the repartition took."""
    out = rp.repartition(spark if as_job else jvm_tools, str(q.checkpoint), n)
    assert out["rowsMoved"] > 0 and out["newPartitions"] == n
    assert out["ranAs"] == ("spark job" if as_job else "tools JVM")
    for var in state_vars:
        assert _state_keys(spark, q.checkpoint, stateVarName=var) == live, var
        _placement_matches_spark(spark, q.checkpoint, n, ["k"], operatorId=0, stateVarName=var)
    _placement_matches_spark(spark, q.checkpoint, n, ["k"], operatorId=0, readRegisteredTimers=True)
    _verify_clean(jvm_tools, q.checkpoint)
    return out["newBatch"]


def test_event_time_value_list_map_and_timers_up_and_down(spark, tools, tmp_path):  # noqa: F811
    """EventTime: 2 -> 4 (a multiple: each old partition grows alone, its keys placed among four; in the
    tools' JVM) -> 3 (neither: every row placed among all; as a Spark job). Timers registered before each repartition fire after it, for
    their keys, in the batch the oracle says."""
    keys = [f"k{i}" for i in range(12)]
    runs = [
        [{"k": k, "t": 1000 + i, "v": i} for i, k in enumerate(keys)],  # a timer per key at t + 20 s
        [{"k": k, "t": 1015 + i, "v": 10 + i} for i, k in enumerate(keys[:6])],  # k0..k5 move their timers
        [{"k": "k12", "t": 1022, "v": 3}],  # watermark 1012: no timer due yet
        [{"k": "k13", "t": 1051, "v": 5}],  # watermark 1041: the timers of k0..k11 fire
    ]
    expected, _ = oracle.tws_event_time(runs, delay=DELAY_S, gap=GAP_S)
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    q = Query(spark, tmp_path, _build(CountListMapTimerProcessor(), "EventTime", TWS_OUTPUT, watermark=True))
    skipped = []
    for i, rows in enumerate(runs):
        if i in (1, 2):
            n = 4 if i == 1 else 3
            vars_ = ("count", "max_t", "values", "parity")
            skipped.append(_repartition(spark, tools, q, n, vars_, set(keys), as_job=i == 2))
        q.write("in", rows)
        q.run()
    # the repartition batches have no output; every other batch is the oracle's, in order
    assert not set(q.outputs) & set(skipped)
    got = [sorted(tuple(r) for r in q.outputs[b]) for b in sorted(q.outputs)]
    assert got == [sorted(expected[b]) for b in sorted(expected)]
    fired = {r[0] for rows in got for r in rows if r[1] == "timer"}
    assert set(keys) <= fired, "a timer registered before a repartition did not fire for its key"
    _verify_clean(tools, q.checkpoint)


ENCODING = "spark.sql.streaming.stateStore.encodingFormat"


@pytest.mark.parametrize("encoding", ["unsaferow", "avro"])
def test_processing_time_ttl_and_timers_up_and_down(spark, tools, tmp_path, encoding):  # noqa: F811
    """ProcessingTime: value, list and map state under TTL, and processing-time timers, 2 -> 3 -> 2, in both
    state encodings (Avro keys are decoded through the operator's schema history). After each repartition
    and a sleep past the TTL and the timers: every timer fires for its key, and Spark's TTL clean-up evicts
    every expired entry, which it finds through the TTL index families: each index row must have moved to
    the partition of the state it indexes. Avro's rewrite runs as a Spark job (its placement built in the
    task, from the schema files), unsaferow's in the tools' JVM."""
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    spark.conf.set(ENCODING, encoding)  # recorded in the offset log at the first batch; kept on restarts
    try:
        _ttl_and_timers(spark, tools, tmp_path, encoding)
    finally:
        spark.conf.set(ENCODING, "unsaferow")


def _ttl_and_timers(spark, tools, tmp_path, encoding: str) -> None:  # noqa: F811
    q = Query(  # ProcessingTime mode always wants another batch: an availableNow run would never end
        spark,
        tmp_path,
        _build(TtlAndTimerProcessor(), "ProcessingTime", "k string, kind string, n long", False),
        trigger="once",
    )
    keys = [f"k{i}" for i in range(10)]
    q.write("in", [{"k": k, "t": 0, "v": 1} for k in keys + keys[:4]])
    q.run()
    assert sorted(q.outputs[0]) == sorted((k, "data", 2 if k in keys[:4] else 1) for k in keys)
    assert rp.offset_conf(tools, (q.checkpoint / "offsets" / "0").as_uri())[ENCODING] == encoding
    counts = {k: 2 if k in keys[:4] else 1 for k in keys}
    for n, new_key in ((3, "k10"), (2, "k11")):
        live = set(keys) | ({"k10"} if new_key == "k11" else set())
        as_job = encoding == "avro"
        batch = _repartition(spark, tools, q, n, ("count", "kept"), live, as_job) + 1
        time.sleep(max(FLASH_TTL_MS, TIMER_DELAY_MS) / 1000 + 0.5)
        q.write("in", [{"k": new_key, "t": 0, "v": 1}])
        q.run()
        due = [k for k in counts if k != new_key]  # every timer registered before the sleep
        assert sorted(q.outputs[batch]) == sorted(
            [(k, "timer", counts[k]) for k in due] + [(new_key, "data", 1)]
        )
        counts = {new_key: 1}
        for var in ("flash", "flash_list", "flash_map"):
            assert _state_keys(spark, q.checkpoint, stateVarName=var) == {new_key}, var
        assert _state_keys(spark, q.checkpoint, stateVarName="kept") == live | {new_key}
    _verify_clean(tools, q.checkpoint)


def test_migrate_from_spark_rocksdb(spark, tools, tmp_path):  # noqa: F811
    """The EventTime query started on Spark's RocksDB provider (where Spark runs transformWithState
    natively), migrated onto lineagestore with 2 -> 3 partitions, resumed: every batch the oracle's (the
    lists Spark kept as merge operands come back whole, the timers fire for their keys), the state data
    source reads each variable and the timers where Spark's shuffle puts them, verify is clean."""
    from lineagestore.migrate import migrate
    from lineagestore.testing.harness import PROVIDER_CLASSES

    keys = [f"k{i}" for i in range(10)]
    runs = [
        [{"k": k, "t": 1000 + i, "v": i} for i, k in enumerate(keys)]
        + [{"k": k, "t": 1001 + i, "v": 2 * i} for i, k in enumerate(keys[:5])],
        [{"k": "k10", "t": 1012, "v": 3}],  # watermark 1002: no timer due
        [{"k": "k11", "t": 1045, "v": 5}],  # watermark 1035: every timer of k0..k9 fires
    ]
    expected, _ = oracle.tws_event_time(runs, delay=DELAY_S, gap=GAP_S)
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", PROVIDER_CLASSES["builtin"])
    q = Query(spark, tmp_path, _build(CountListMapTimerProcessor(), "EventTime", TWS_OUTPUT, watermark=True))
    try:
        q.write("in", runs[0])
        q.run()
    finally:
        spark.conf.set("spark.sql.streaming.stateStore.providerClass", PROVIDER_CLASSES["lineagestore"])
    assert not list(q.checkpoint.rglob("*_*.delta")), "the query did not run on Spark's provider"
    moved = migrate(spark, str(q.checkpoint), 3)
    assert moved["rowsMoved"] > 0 and moved["newPartitions"] == 3
    for var in ("count", "max_t", "values", "parity"):
        _placement_matches_spark(spark, q.checkpoint, 3, ["k"], operatorId=0, stateVarName=var)
    _placement_matches_spark(spark, q.checkpoint, 3, ["k"], operatorId=0, readRegisteredTimers=True)
    _verify_clean(tools, q.checkpoint)
    for rows in runs[1:]:
        q.write("in", rows)
        q.run()
    assert not set(q.outputs) & {moved["newBatch"]}
    got = [sorted(tuple(r) for r in q.outputs[b]) for b in sorted(q.outputs)]
    assert got == [sorted(expected[b]) for b in sorted(expected)]
    assert set(keys) <= {r[0] for rows in got for r in rows if r[1] == "timer"}
    assert any(p.name.endswith(".delta") for p in (q.checkpoint / "state" / "0" / "2").iterdir())
    _verify_clean(tools, q.checkpoint)


def test_s3a_checkpoint_through_the_command_line(spark, tools, s3_server, s3_bucket, tmp_path, capsys):  # noqa: F811
    """The command line (a JVM of its own, reading the operator's state schema file from S3) on an s3a://
    EventTime checkpoint: 2 -> 3, verify clean, then the timers registered before fire for their keys."""
    from lineagestore import cli

    keys = [f"k{i}" for i in range(8)]
    runs = [
        [{"k": k, "t": 1000 + i, "v": i} for i, k in enumerate(keys)],
        [{"k": "k8", "t": 1045, "v": 1}],  # watermark 1035: every timer of k0..k7 fires
    ]
    expected, _ = oracle.tws_event_time(runs, delay=DELAY_S, gap=GAP_S)
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    q = Query(spark, tmp_path, _build(CountListMapTimerProcessor(), "EventTime", TWS_OUTPUT, watermark=True))
    q.checkpoint = f"s3a://{s3_bucket}/tws"  # type: ignore[assignment]
    q.write("in", runs[0])
    q.run()
    hadoop_args = hadoop_conf_args(s3_server.hadoop_conf(s3_bucket))
    rc = cli.main([*hadoop_args, "repartition", q.checkpoint, "--partitions", "3", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    moved = json.loads(out)
    assert moved["newPartitions"] == 3 and moved["rowsMoved"] > 0
    for var in ("count", "values", "parity"):
        _placement_matches_spark(spark, q.checkpoint, 3, ["k"], operatorId=0, stateVarName=var)
    _placement_matches_spark(spark, q.checkpoint, 3, ["k"], operatorId=0, readRegisteredTimers=True)
    assert cli.main([*hadoop_args, "verify", q.checkpoint]) == 0, capsys.readouterr()
    q.write("in", runs[1])
    q.run()
    got = [sorted(tuple(r) for r in q.outputs[b]) for b in sorted(q.outputs)]
    assert got == [sorted(expected[b]) for b in sorted(expected)]
    assert set(keys) <= {r[0] for rows in got for r in rows if r[1] == "timer"}

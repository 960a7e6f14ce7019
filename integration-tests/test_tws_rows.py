"""Row-based ``transformWithState`` (Python): value, list and map state with event-time timers; the state
data source on its checkpoint; the Avro encoding with a value schema that grows across a restart.

Each scenario runs on the test's provider and, through ``same_as_builtin``, on Spark's own RocksDB provider in
the same session: the outputs (and what the state data source reads back) must be identical batch by batch.
"""

from __future__ import annotations

import json

from pyspark.sql import Row
from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from lineagestore.testing import oracle

GAP_S = 20
OUTPUT = "k string, kind string, count long, n_values long, sum_values long, parity string"
COLS = ("k", "kind", "count", "n_values", "sum_values", "parity")
RUNS = [
    [{"k": "a", "t": 1000, "v": 1}, {"k": "b", "t": 1002, "v": 2}, {"k": "a", "t": 1005, "v": 4}],
    [{"k": "c", "t": 1010, "v": 3}, {"k": "a", "t": 1012, "v": 7}],
    [{"k": "b", "t": 1030, "v": 6}, {"k": "c", "t": 1040, "v": 9}],
    [{"k": "d", "t": 1061, "v": 8}, {"k": "c", "t": 1063, "v": 5}],
]
ENCODING_KEY = "spark.sql.streaming.stateStore.encodingFormat"


class RowProcessor(StatefulProcessor):
    """The EventTime processor of test_transform_with_state.py on the Row API (oracle.tws_event_time)."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.count = handle.getValueState("count", "count long")
        self.max_t = handle.getValueState("max_t", "t long")
        self.values = handle.getListState("values", "v long")
        self.parity = handle.getMapState("parity", "p string", "n long")

    def _snapshot(self, key, kind: str) -> Row:
        values = [v[0] for v in self.values.get()]
        parity = {k[0]: v[0] for k, v in self.parity.iterator()}
        return Row(
            k=key[0],
            kind=kind,
            count=self.count.get()[0],
            n_values=len(values),
            sum_values=sum(values),
            parity=json.dumps(parity, sort_keys=True),
        )

    def handleInputRows(self, key, rows, timerValues):
        count = self.count.get()[0] if self.count.exists() else 0
        max_t = self.max_t.get()[0] if self.max_t.exists() else None
        for row in rows:
            count += 1
            self.values.appendValue((row.v,))
            p = ("even" if row.v % 2 == 0 else "odd",)
            prev = self.parity.getValue(p) if self.parity.containsKey(p) else (0,)
            self.parity.updateValue(p, (prev[0] + 1,))
            max_t = row.t if max_t is None else max(max_t, row.t)
        self.count.update((count,))
        self.max_t.update((max_t,))
        for ts in list(self.handle.listTimers()):
            self.handle.deleteTimer(ts)
        self.handle.registerTimer((max_t + GAP_S) * 1000)
        yield self._snapshot(key, "data")

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        out = self._snapshot(key, "timer")
        for state in (self.count, self.max_t, self.values, self.parity):
            state.clear()
        yield out

    def close(self) -> None:
        pass


def _build(processor):
    def build(h):
        return (
            h.source("in", "k string, t long, v long")
            .withColumn("ts", F.timestamp_seconds("t"))
            .withWatermark("ts", "10 seconds")
            .groupBy("k")
            .transformWithState(
                statefulProcessor=processor,
                outputStructType=OUTPUT,
                outputMode="Update",
                timeMode="EventTime",
            )
        )

    return build


def _read(spark, h, **options) -> list[tuple]:
    reader = spark.read.format("statestore")
    for key, value in options.items():
        reader = reader.option(key, value)
    df = reader.load(str(h.checkpoint))
    return sorted(
        tuple(json.dumps(v, sort_keys=True, default=str) for v in r.asDict(True).values())
        for r in df.collect()
    )


def test_tws_rows_event_time_and_state_reader(spark, same_as_builtin):
    expected, remaining = oracle.tws_event_time(RUNS, delay=10, gap=GAP_S)

    def scenario(h):
        for rows in RUNS:
            h.write("in", rows)
            h.run(_build(RowProcessor()), "update")
        last = max(h.outputs)
        read = {
            "count": _read(spark, h, stateVarName="count"),
            "values": _read(spark, h, stateVarName="values"),
            "parity": _read(spark, h, stateVarName="parity"),
            "timers": _read(spark, h, readRegisteredTimers=True),
            "count@1": _read(spark, h, stateVarName="count", batchId=1),
            "changes": _read(spark, h, stateVarName="count", readChangeFeed=True, changeStartBatchId=1),
            "map changes": _read(spark, h, stateVarName="parity", readChangeFeed=True, changeStartBatchId=1),
            # (the list state's change feed differs from Spark's: test_tws_list_state_change_feed)
        }
        if h.provider == "lineagestore":  # Spark's provider needs a snapshot file at that very batch
            replayed = [
                row
                for pid in (0, 1)
                for row in _read(
                    spark,
                    h,
                    stateVarName="count",
                    snapshotStartBatchId=1,
                    snapshotPartitionId=pid,
                    batchId=last,
                )
            ]
            assert sorted(replayed) == read["count"], "replaying from batch 1's snapshot gives another state"
        return h.batch_outputs(lambda r: tuple(r[c] for c in COLS)), read

    outputs, read = same_as_builtin(scenario)
    assert outputs == expected
    # what the reader sees is the oracle's remaining state: keys c and d, their values and timers
    assert {json.loads(r[0])["k"] for r in read["count"]} == set(remaining) == {"c", "d"}
    assert len(read["values"]) == sum(s["count"] for s in remaining.values())
    assert len(read["timers"]) == 2
    assert read["changes"], "the change feed of 'count' is empty"


class EvolvingProcessor(StatefulProcessor):
    """ValueState "count" whose schema gains a nullable field ``total`` between two query runs."""

    def __init__(self, with_total: bool):
        self.with_total = with_total

    def init(self, handle: StatefulProcessorHandle) -> None:
        schema = "count long, total long" if self.with_total else "count long"
        self.count = handle.getValueState("count", schema)

    def handleInputRows(self, key, rows, timerValues):
        old = self.count.get() if self.count.exists() else None
        vs = [row.v for row in rows]
        count = (old[0] if old else 0) + len(vs)
        if self.with_total:
            old_total = old[1] if old and len(old) > 1 and old[1] is not None else None
            total = (old_total or 0) + sum(vs)
            self.count.update((count, total))
            yield Row(k=key[0], count=count, total=total, old_total=old_total)
        else:
            self.count.update((count,))
            yield Row(k=key[0], count=count, total=None, old_total=None)

    def close(self) -> None:
        pass


def test_tws_avro_value_schema_evolution_across_restart(spark, same_as_builtin):
    out = "k string, count long, total long, old_total long"

    def build(with_total):
        def b(h):
            return (
                h.source("in", "k string, v long")
                .groupBy("k")
                .transformWithState(
                    statefulProcessor=EvolvingProcessor(with_total),
                    outputStructType=out,
                    outputMode="Update",
                    timeMode="None",
                )
            )

        return b

    def scenario(h):
        spark.conf.set(ENCODING_KEY, "avro")
        try:
            h.write("in", [{"k": "a", "v": 1}, {"k": "b", "v": 2}])
            h.run(build(False), "update")
            h.write("in", [{"k": "a", "v": 3}])
            h.run(build(True), "update")  # a restart with the wider schema: a's old value has no total
            h.write("in", [{"k": "a", "v": 5}, {"k": "b", "v": 7}])
            h.run(build(True), "update")
        finally:
            spark.conf.unset(ENCODING_KEY)
        assert h.offset_log_conf().get(ENCODING_KEY) == "avro"
        read = _read(spark, h, stateVarName="count")
        return h.batch_outputs(lambda r: (r["k"], r["count"], r["total"], r["old_total"])), read

    outputs, read = same_as_builtin(scenario)
    assert [json.loads(r[1]) for r in read] == [{"count": 3, "total": 8}, {"count": 2, "total": 7}]
    assert list(outputs.values()) == [
        [("a", 1, None, None), ("b", 1, None, None)],
        [("a", 2, 3, None)],
        [("a", 3, 8, 3), ("b", 2, 7, None)],
    ]


class ListOpsProcessor(StatefulProcessor):
    """ListState only: each input row is one operation on its key's list, applied in ``seq`` order:
    ``append`` (appendValue), ``extend`` (appendList of v and v+1), ``put`` (put [v, v+1]) or ``clear``."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.values = handle.getListState("values", "v long")

    def handleInputRows(self, key, rows, timerValues):
        ops = sorted(rows, key=lambda r: r.seq)
        for row in ops:
            if row.op == "append":
                self.values.appendValue((row.v,))
            elif row.op == "extend":
                self.values.appendList([(row.v,), (row.v + 1,)])
            elif row.op == "put":
                self.values.put([(row.v,), (row.v + 1,)])
            else:
                self.values.clear()
        yield Row(k=key[0], ops=len(ops))

    def close(self) -> None:
        pass


# (key, op, v) per batch; seq keeps each key's operations in this order
LIST_OPS = [
    [("a", "append", 1), ("a", "append", 2), ("b", "put", 10), ("c", "clear", 0)],
    [("a", "append", 3), ("b", "extend", 20), ("c", "append", 5), ("c", "clear", 0), ("c", "append", 6)],
    [("a", "clear", 0), ("b", "put", 30), ("b", "append", 40), ("a", "append", 7)],
]


def test_tws_list_state_change_feed(spark, same_as_builtin):
    """Spark's provider reports a ListState's changes as its changelog holds them: an ``append`` per appended
    value, a put as an ``update`` of the first value and an ``append`` of each further one, a clear as a
    ``delete`` (even of an empty list). lineagestore's merge records (docs/format.md) must give the same."""

    def build(h):
        return (
            h.source("in", "k string, op string, v long, seq long")
            .groupBy("k")
            .transformWithState(
                statefulProcessor=ListOpsProcessor(),
                outputStructType="k string, ops long",
                outputMode="Update",
                timeMode="None",
            )
        )

    def scenario(h):
        for ops in LIST_OPS:
            h.write("in", [{"k": k, "op": op, "v": v, "seq": i} for i, (k, op, v) in enumerate(ops)])
            h.run(build, "update")
        feed = spark.read.format("statestore").option("stateVarName", "values")
        feed = feed.option("readChangeFeed", True).option("changeStartBatchId", 0).load(str(h.checkpoint))
        # the feed gives a key's changes in the order they happened: keep it (Python's sort is stable)
        rows = [
            (r.batch_id, r.key[0], r.change_type, r.list_element[0] if r.list_element else None)
            for r in feed.collect()
        ]
        state = spark.read.format("statestore").option("stateVarName", "values").load(str(h.checkpoint))
        return sorted(rows, key=lambda r: r[:2]), sorted(tuple(map(str, r)) for r in state.collect())

    changes, state = same_as_builtin(scenario)
    by_key: dict[tuple, list] = {}
    for batch, k, kind, v in changes:
        by_key.setdefault((batch, k), []).append((kind, v))
    assert by_key == {
        (0, "a"): [("append", 1), ("append", 2)],
        (0, "b"): [("update", 10), ("append", 11)],
        (0, "c"): [("delete", None)],
        (1, "a"): [("append", 3)],
        (1, "b"): [("append", 20), ("append", 21)],
        (1, "c"): [("append", 5), ("delete", None), ("append", 6)],
        (2, "a"): [("delete", None), ("append", 7)],
        (2, "b"): [("update", 30), ("append", 31), ("append", 40)],
    }
    # the state at the end, one row per list element, agrees with the feed
    assert [(r[0], r[1]) for r in state] == [
        ("Row(k='a')", "Row(v=7)"),
        ("Row(k='b')", "Row(v=30)"),
        ("Row(k='b')", "Row(v=31)"),
        ("Row(k='b')", "Row(v=40)"),
        ("Row(k='c')", "Row(v=6)"),
    ]

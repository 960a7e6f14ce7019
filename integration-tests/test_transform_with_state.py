"""transformWithStateInPandas: ValueState, ListState, MapState, TTL and timers, across restarts.

Spark 4.3.0 runs transformWithState only on a provider whose class name is in a fixed set
(``TransformWithStateExecBase.validateStateStoreProvider``); on lineagestore it runs through
``io.lineagestore.spark.LineageSessionExtensions``, which ``lineagestore.configure`` adds to the session
(docs/transform-with-state.md). Each test checks a plain-Python oracle and, through ``same_as_builtin``, that
lineagestore's output equals Spark's own RocksDB provider's on the same input, batch by batch.

The ProcessingTime test runs with ``trigger(once=True)``: in ProcessingTime mode
``shouldRunAnotherBatch`` is always true, so an availableNow run keeps adding no-data batches and never stops.
"""

from __future__ import annotations

import json
import time

import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from lineagestore.testing import oracle

try:  # transformWithStateInPandas' Python side talks to the JVM in protobuf messages
    import google.protobuf  # noqa: F401
except ImportError as exc:
    raise ImportError(
        "transformWithStateInPandas needs the 'protobuf' package in the test environment (pip install protobuf)"
    ) from exc

GAP_S = 20
TWS_OUTPUT = "k string, kind string, count long, n_values long, sum_values long, parity string"


class CountListMapTimerProcessor(StatefulProcessor):
    """EventTime mode. Per key: ValueState count, ListState values, MapState parity -> n, and one
    event-time timer at (max event time + GAP_S); when it fires the key's state is reported and cleared."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.count = handle.getValueState("count", "count long")
        self.max_t = handle.getValueState("max_t", "t long")
        self.values = handle.getListState("values", "v long")
        self.parity = handle.getMapState("parity", "p string", "n long")

    def _snapshot(self, key, kind: str) -> pd.DataFrame:
        values = [v[0] for v in self.values.get()]
        parity = {k[0]: v[0] for k, v in self.parity.iterator()}
        return pd.DataFrame(
            {
                "k": [key[0]],
                "kind": [kind],
                "count": [self.count.get()[0]],
                "n_values": [len(values)],
                "sum_values": [sum(values)],
                "parity": [json.dumps(parity, sort_keys=True)],
            }
        )

    def handleInputRows(self, key, rows, timerValues):
        count = self.count.get()[0] if self.count.exists() else 0
        max_t = self.max_t.get()[0] if self.max_t.exists() else None
        for pdf in rows:
            count += len(pdf)
            for v in pdf["v"]:
                self.values.appendValue((int(v),))
                p = ("even" if int(v) % 2 == 0 else "odd",)
                prev = self.parity.getValue(p) if self.parity.containsKey(p) else (0,)
                self.parity.updateValue(p, (prev[0] + 1,))
            batch_max = int(pdf["t"].max())
            max_t = batch_max if max_t is None else max(max_t, batch_max)
        self.count.update((count,))
        self.max_t.update((max_t,))
        for ts in list(self.handle.listTimers()):
            self.handle.deleteTimer(ts)
        self.handle.registerTimer((max_t + GAP_S) * 1000)
        yield self._snapshot(key, "data")

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        out = self._snapshot(key, "timer")
        self.count.clear()
        self.max_t.clear()
        self.values.clear()
        self.parity.clear()
        yield out

    def close(self) -> None:
        pass


def test_tws_event_time_value_list_map_timers(same_as_builtin):
    runs = [
        [{"k": "a", "t": 1000, "v": 1}, {"k": "b", "t": 1002, "v": 2}, {"k": "a", "t": 1005, "v": 4}],
        [{"k": "c", "t": 1010, "v": 3}, {"k": "a", "t": 1012, "v": 7}],
        [{"k": "b", "t": 1030, "v": 6}, {"k": "c", "t": 1040, "v": 9}],
        [{"k": "d", "t": 1061, "v": 8}, {"k": "c", "t": 1063, "v": 5}],
    ]
    expected, remaining = oracle.tws_event_time(runs, delay=10, gap=GAP_S)

    def build(h):
        return (
            h.source("in", "k string, t long, v long")
            .withColumn("ts", F.timestamp_seconds("t"))
            .withWatermark("ts", "10 seconds")
            .groupBy("k")
            .transformWithStateInPandas(
                statefulProcessor=CountListMapTimerProcessor(),
                outputStructType=TWS_OUTPUT,
                outputMode="Update",
                timeMode="EventTime",
            )
        )

    cols = ("k", "kind", "count", "n_values", "sum_values", "parity")

    def scenario(h):
        for rows in runs:
            h.write("in", rows)
            h.run(build, "update")
        return h.batch_outputs(lambda r: tuple(r[c] for c in cols))

    assert same_as_builtin(scenario) == expected
    assert any(row[1] == "timer" for rows in expected.values() for row in rows)
    assert set(remaining) == {"c", "d"}


SHORT_TTL_MS = 2000
LONG_TTL_MS = 3_600_000
SLEEP_PAST_SHORT_TTL_S = 3.0
TIMER_DELAY_MS = 1000
TTL_OUTPUT = "k string, kind string, count long, long_ttl_present boolean, short_ttl_len long, map_size long"


class TtlProcessor(StatefulProcessor):
    """ProcessingTime mode. count (no TTL), first_seen (ValueState, 1 h TTL), recent (ListState, 2 s TTL),
    tags (MapState, 1 h TTL); key "a" also gets a processing-time timer 1 s after its first batch."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.count = handle.getValueState("count", "count long")
        self.first_seen = handle.getValueState("first_seen", "ms long", LONG_TTL_MS)
        self.recent = handle.getListState("recent", "v long", SHORT_TTL_MS)
        self.tags = handle.getMapState("tags", "tag long", "n long", LONG_TTL_MS)

    def handleInputRows(self, key, rows, timerValues):
        long_present = self.first_seen.exists()
        short_len = len(list(self.recent.get()))
        count = self.count.get()[0] if self.count.exists() else 0
        new_values = []
        for pdf in rows:
            new_values.extend(int(v) for v in pdf["v"])
        count += len(new_values)
        for v in new_values:
            tag = (v % 3,)
            prev = self.tags.getValue(tag) if self.tags.containsKey(tag) else (0,)
            self.tags.updateValue(tag, (prev[0] + 1,))
        self.count.update((count,))
        if not long_present:
            self.first_seen.update((timerValues.getCurrentProcessingTimeInMs(),))
            if key[0] == "a":
                self.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + TIMER_DELAY_MS)
        self.recent.put([(v,) for v in new_values])
        map_size = len(list(self.tags.keys()))
        yield pd.DataFrame(
            {
                "k": [key[0]],
                "kind": ["data"],
                "count": [count],
                "long_ttl_present": [long_present],
                "short_ttl_len": [short_len],
                "map_size": [map_size],
            }
        )

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        yield pd.DataFrame(
            {
                "k": [key[0]],
                "kind": ["timer"],
                "count": [self.count.get()[0] if self.count.exists() else -1],
                "long_ttl_present": [self.first_seen.exists()],
                "short_ttl_len": [-1],
                "map_size": [len(list(self.tags.keys()))],
            }
        )

    def close(self) -> None:
        pass


def test_tws_processing_time_ttl_and_timer(same_as_builtin):
    """TTL expiry is checked only across a sleep longer than the short TTL, so the test is deterministic:
    the 1 h TTL never expires during the test, the 2 s TTL always has after the sleep. What is compared
    with Spark's provider leaves out the two clock-dependent facts (a's short-TTL list between the two quick
    runs, the batch the timer fires in)."""

    def build(h):
        return (
            h.source("in", "k string, v long")
            .groupBy("k")
            .transformWithStateInPandas(
                statefulProcessor=TtlProcessor(),
                outputStructType=TTL_OUTPUT,
                outputMode="Update",
                timeMode="ProcessingTime",
            )
        )

    def scenario(h):
        def data_rows(run):
            return sorted(
                (r["k"], r["count"], r["long_ttl_present"], r["short_ttl_len"], r["map_size"])
                for bid in run.batch_ids
                for r in h.outputs.get(bid, [])
                if r["kind"] == "data"
            )

        h.write("in", [{"k": "a", "v": 1}, {"k": "a", "v": 2}, {"k": "a", "v": 3}, {"k": "b", "v": 4}])
        r0 = h.run(build, "update", trigger="once")
        assert data_rows(r0) == [("a", 3, False, 0, 3), ("b", 1, False, 0, 1)]

        h.write("in", [{"k": "a", "v": 6}, {"k": "c", "v": 7}])
        r1 = h.run(build, "update", trigger="once")
        rows = data_rows(r1)
        # a's 2 s TTL list may or may not have expired between two quick runs: only that field is not checked.
        assert [(k, c, lp, ms) for k, c, lp, _, ms in rows] == [("a", 4, True, 3), ("c", 1, False, 1)]
        assert rows[0][3] in (0, 3)

        time.sleep(SLEEP_PAST_SHORT_TTL_S)
        h.write("in", [{"k": "a", "v": 9}, {"k": "b", "v": 10}])
        r2 = h.run(build, "update", trigger="once")
        assert data_rows(r2) == [("a", 5, True, 0, 3), ("b", 2, True, 0, 1)]

        h.write("in", [{"k": "c", "v": 11}, {"k": "d", "v": 12}])
        r3 = h.run(build, "update", trigger="once")
        assert data_rows(r3) == [("c", 2, True, 0, 2), ("d", 1, False, 0, 1)]

        timers = [r for r in h.rows() if r["kind"] == "timer"]
        # a's timer (1 s after its first batch) fired exactly once, at the latest in the run after the sleep.
        assert [(r["k"], r["long_ttl_present"]) for r in timers] == [("a", True)]
        fired_in = [bid for bid, rs in h.outputs.items() if any(r["kind"] == "timer" for r in rs)]
        assert fired_in[0] <= max(r2.batch_ids)
        return [[(k, c, lp, ms) for k, c, lp, _, ms in rows] for rows in (data_rows(r) for r in h.runs)], [
            (r["k"], r["long_ttl_present"]) for r in timers
        ]

    same_as_builtin(scenario)

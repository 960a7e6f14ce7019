"""Stateful operators, each run over several restarts of the same checkpoint, against plain-Python oracles.

Every test is parametrised by provider (see conftest.py). Each run adds one input file and runs the query
with availableNow until it stops; outputs are compared per batch id with the oracle, so a provider that
loses, duplicates, resurrects or fails to evict state across a restart shows up as a diff.
"""

from __future__ import annotations

import pandas as pd
import pytest
from pyspark.sql import functions as F

from lineagestore.testing import oracle

KV_SCHEMA = oracle.KV_SCHEMA
KTV_SCHEMA = "k string, t long, v long"


def _feed_and_run(h, runs, build, output_mode, source="in"):
    results = []
    for rows in runs:
        h.write(source, rows)
        results.append(h.run(build, output_mode))
    return results


# ----------------------------------------------------------------------------------------- aggregation
def test_aggregation_update_mode(make_harness):
    runs = oracle.keyed_runs(seed=7)
    expected, totals = oracle.running_aggregate(runs)
    h = make_harness()

    def build(h):
        return (
            h.source("in", KV_SCHEMA)
            .groupBy("k")
            .agg(F.count(F.lit(1)).alias("cnt"), F.sum("v").alias("total"))
        )

    results = _feed_and_run(h, runs, build, "update")

    assert [r.batch_ids for r in results] == [[i] for i in range(len(runs))]
    assert h.batch_outputs(lambda r: (r["k"], r["cnt"], r["total"])) == expected
    assert results[-1].state_rows_total() == len(totals)


def test_windowed_aggregation_append_mode_evicts(make_harness):
    # Window ends are multiples of 10 and watermarks (max t - 10) end in 5: never equal (oracle enforces).
    runs = [
        [
            {"k": "a", "t": 1001},
            {"k": "b", "t": 1003},
            {"k": "a", "t": 1007},
            {"k": "c", "t": 1012},
            {"k": "a", "t": 1015},
        ],
        # a@1003 is older than the watermark (1005) but its window [1000, 1010) is still open: counted.
        [
            {"k": "a", "t": 1018},
            {"k": "b", "t": 1021},
            {"k": "c", "t": 1025},
            {"k": "a", "t": 1003},
            {"k": "b", "t": 1033},
            {"k": "a", "t": 1035},
        ],
        # a@1004 and c@1016 belong to windows already closed at watermark 1025: dropped.
        [
            {"k": "a", "t": 1004},
            {"k": "c", "t": 1016},
            {"k": "b", "t": 1027},
            {"k": "c", "t": 1041},
            {"k": "a", "t": 1055},
        ],
        [{"k": "a", "t": 1058}, {"k": "b", "t": 1062}, {"k": "c", "t": 1049}, {"k": "a", "t": 1075}],
    ]
    expected, remaining = oracle.windowed_count(runs, delay=10, size=10)
    h = make_harness()

    results = _feed_and_run(h, runs, oracle.windowed_count_query, "append")

    assert h.batch_outputs(lambda r: (r["ws"], r["k"], r["count"])) == expected
    assert results[-1].state_rows_total() == len(remaining)


# ----------------------------------------------------------------------------------------- deduplication
def test_drop_duplicates(make_harness):
    runs = [
        [{"id": "a", "v": 1}, {"id": "b", "v": 2}, {"id": "a", "v": 1}],
        [{"id": "a", "v": 10}, {"id": "c", "v": 3}, {"id": "d", "v": 4}],
        [{"id": "b", "v": 20}, {"id": "e", "v": 5}, {"id": "e", "v": 5}, {"id": "f", "v": 6}],
        [{"id": "c", "v": 30}, {"id": "g", "v": 7}, {"id": "a", "v": 40}],
    ]
    expected, seen = oracle.drop_duplicates(runs, "id")
    h = make_harness()

    def build(h):
        return h.source("in", "id string, v long").dropDuplicates(["id"])

    results = _feed_and_run(h, runs, build, "append")

    assert [r.batch_ids for r in results] == [[i] for i in range(len(runs))]
    assert h.batch_outputs(lambda r: tuple(sorted(r.items()))) == expected
    assert results[-1].state_rows_total() == len(seen)


def test_drop_duplicates_within_watermark(make_harness):
    runs = [
        [
            {"id": "x", "t": 1001, "v": 1},
            {"id": "x", "t": 1001, "v": 1},
            {"id": "y", "t": 1002, "v": 2},
            {"id": "z", "t": 1015, "v": 3},
        ],
        # y is still within its expiry (1012 > watermark 1005): dropped. x@1003 is late: dropped.
        [
            {"id": "y", "t": 1016, "v": 4},
            {"id": "w", "t": 1020, "v": 5},
            {"id": "x", "t": 1003, "v": 6},
            {"id": "q", "t": 1036, "v": 7},
        ],
        # x and y expired at watermark 1026: they come through again. w (expiry 1030) is still a duplicate.
        [
            {"id": "x", "t": 1030, "v": 8},
            {"id": "y", "t": 1031, "v": 9},
            {"id": "w", "t": 1028, "v": 10},
            {"id": "r", "t": 1047, "v": 11},
        ],
        [{"id": "w", "t": 1044, "v": 12}, {"id": "x", "t": 1034, "v": 13}, {"id": "s", "t": 1055, "v": 14}],
    ]
    expected, remaining = oracle.drop_duplicates_within_watermark(runs, "id", delay=10)
    h = make_harness()

    def build(h):
        return (
            h.source("in", "id string, t long, v long")
            .withColumn("ts", F.timestamp_seconds("t"))
            .withWatermark("ts", "10 seconds")
            .dropDuplicatesWithinWatermark(["id"])
            .drop("ts")
        )

    results = _feed_and_run(h, runs, build, "append")

    assert h.batch_outputs(lambda r: tuple(sorted(r.items()))) == expected
    assert results[-1].state_rows_total() == len(remaining)


# ----------------------------------------------------------------------------------------- joins
JOIN_RUNS = [
    {
        "left": [
            {"lid": "a", "lt": 1000, "lv": 1},
            {"lid": "b", "lt": 1003, "lv": 2},
            {"lid": "c", "lt": 1006, "lv": 3},
        ],
        "right": [{"rid": "a", "rt": 1004, "rv": 11}, {"rid": "x", "rt": 1001, "rv": 12}],
    },
    {
        # b@1008 matches b@1003 on the inclusive bound; c@1017 is too far from c@1006.
        "left": [{"lid": "d", "lt": 1020, "lv": 4}, {"lid": "b", "lt": 1030, "lv": 5}],
        "right": [
            {"rid": "b", "rt": 1008, "rv": 13},
            {"rid": "c", "rt": 1017, "rv": 14},
            {"rid": "d", "rt": 1024, "rv": 15},
        ],
    },
    {
        # f@1005 and d@1013 are late (watermark 1014): dropped. h@1041 never finds a partner.
        "left": [
            {"lid": "e", "lt": 1040, "lv": 6},
            {"lid": "f", "lt": 1005, "lv": 7},
            {"lid": "h", "lt": 1041, "lv": 8},
        ],
        "right": [{"rid": "e", "rt": 1043, "rv": 16}, {"rid": "d", "rt": 1013, "rv": 17}],
    },
    {
        "left": [{"lid": "g", "lt": 1060, "lv": 9}],
        "right": [{"rid": "b", "rt": 1033, "rv": 18}, {"rid": "g", "rt": 1059, "rv": 19}],
    },
]
JOIN_COLS = ("lid", "lt", "lv", "rid", "rt", "rv")


def _join_query(how: str):
    def build(h):
        left = (
            h.source("left", "lid string, lt long, lv long")
            .withColumn("lts", F.timestamp_seconds("lt"))
            .withWatermark("lts", "10 seconds")
        )
        right = (
            h.source("right", "rid string, rt long, rv long")
            .withColumn("rts", F.timestamp_seconds("rt"))
            .withWatermark("rts", "10 seconds")
        )
        cond = F.expr("lid = rid AND rts >= lts - interval 5 seconds AND rts <= lts + interval 5 seconds")
        return left.join(right, cond, how).select(*JOIN_COLS)

    return build


@pytest.mark.parametrize("how", ["inner", "left_outer"])
def test_stream_stream_join(make_harness, how):
    join = oracle.JoinOracle(bound=5, left_delay=10, right_delay=10, outer=how == "left_outer")
    expected = join.run(JOIN_RUNS)
    h = make_harness()
    results = []
    for data in JOIN_RUNS:
        h.write("left", data["left"])
        h.write("right", data["right"])
        results.append(h.run(_join_query(how), "append"))

    actual = {
        bid: sorted(rows, key=repr)
        for bid, rows in h.batch_outputs(lambda r: tuple(r[c] for c in JOIN_COLS)).items()
    }
    assert actual == expected
    if how == "left_outer":  # the unmatched left rows came out null-padded when their state was evicted
        assert any(row[3] is None for rows in expected.values() for row in rows)
    assert results[-1].state_rows_total() == join.state_rows()


# ----------------------------------------------------------------------------------------- applyInPandasWithState
GAP_S = 20


def _count_with_event_time_timeout(key, pdfs, state):
    if state.hasTimedOut:
        count, total, _ = state.get
        state.remove()
        yield pd.DataFrame({"k": [key[0]], "count": [count], "total": [total], "status": ["expired"]})
        return
    count, total, max_t = state.get if state.exists else (0, 0, None)
    for pdf in pdfs:
        count += len(pdf)
        total += int(pdf["v"].sum())
        batch_max = int(pdf["t"].max())
        max_t = batch_max if max_t is None else max(max_t, batch_max)
    state.update((count, total, max_t))
    state.setTimeoutTimestamp((max_t + GAP_S) * 1000)
    yield pd.DataFrame({"k": [key[0]], "count": [count], "total": [total], "status": ["update"]})


def test_apply_in_pandas_with_state_event_time_timeout(make_harness):
    runs = [
        [{"k": "a", "t": 1000, "v": 1}, {"k": "b", "t": 1002, "v": 2}, {"k": "a", "t": 1005, "v": 3}],
        [{"k": "c", "t": 1010, "v": 4}, {"k": "a", "t": 1012, "v": 5}],
        [{"k": "b", "t": 1030, "v": 6}, {"k": "c", "t": 1040, "v": 7}],
        # a@1021 is late (watermark 1030): dropped, so a gets no data and times out with b.
        [{"k": "d", "t": 1061, "v": 8}, {"k": "a", "t": 1021, "v": 9}],
    ]
    expected, remaining = oracle.session_counts(runs, delay=10, gap=GAP_S)
    h = make_harness()

    def build(h):
        return (
            h.source("in", KTV_SCHEMA)
            .withColumn("ts", F.timestamp_seconds("t"))
            .withWatermark("ts", "10 seconds")
            .groupBy("k")
            .applyInPandasWithState(
                _count_with_event_time_timeout,
                "k string, count long, total long, status string",
                "count long, total long, max_t long",
                "update",
                "EventTimeTimeout",
            )
        )

    results = _feed_and_run(h, runs, build, "update")

    assert h.batch_outputs(lambda r: (r["k"], r["count"], r["total"], r["status"])) == expected
    assert any(row[3] == "expired" for rows in expected.values() for row in rows)
    assert results[-1].state_rows_total() == len(remaining)

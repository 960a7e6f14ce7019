"""A batch larger than ``maxPendingBytes`` per partition (a backfill's first batch), on a real Spark.

lineagestore keeps a batch's changes in memory up to ``maxPendingBytes`` and spills the rest to local disk
(docs/architecture.md, "A batch larger than memory"). Here the bound is its 1 MiB minimum and each of the
two partitions' first batch holds a few MiB of windowed-aggregation state, so it spills several times; the
no-data batch after it evicts every window while scanning the state (its deletes spill too). Both providers
run the same scenario against the plain-Python oracle.
"""

from __future__ import annotations

from lineagestore.testing import oracle

PENDING_KEY = "spark.sql.streaming.stateStore.lineagestore.maxPendingBytes"
KEYS = 30_000


def _key(i: int) -> str:
    return f"key-{i:06d}-" + "p" * 40  # long keys: a few MiB of state per partition


def test_first_batch_over_max_pending_bytes_spills_and_evicts(spark, provider, make_harness):
    runs = [
        # window 1000: key i counted (i % 3) + 1 times; a row at 1105 moves the watermark past it (1095)
        [{"k": _key(i), "t": 1000 + i % 10} for i in range(KEYS) for _ in range(i % 3 + 1)]
        + [{"k": "z", "t": 1105}],
        # window 1200 for a third of the keys, then a row at 1305 closing it and z's window
        [{"k": _key(i), "t": 1200 + i % 10} for i in range(0, KEYS, 3)] + [{"k": "z", "t": 1305}],
    ]
    expected, remaining = oracle.windowed_count(runs, delay=10, size=10)

    spark.conf.set(PENDING_KEY, "1m")
    try:
        h = make_harness()
        results = []
        for rows in runs:
            h.write("in", rows)
            results.append(h.run(oracle.windowed_count_query, "append"))
    finally:
        spark.conf.unset(PENDING_KEY)

    assert h.batch_outputs(lambda r: (r["ws"], r["k"], r["count"])) == expected
    assert results[-1].state_rows_total() == len(remaining) == 1
    if provider == "lineagestore":
        spilled = [
            op["customMetrics"].get("lineagestoreSpilledBytes", 0)
            for p in results[0].progress
            for op in p.get("stateOperators", [])
        ]
        assert max(spilled) > 0, f"the first run's batches spilled nothing: {spilled}"

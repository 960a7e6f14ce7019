"""Plain-Python oracles (models) for stateful operators, and ``assert_batches`` to compare with them.

The ``oracle`` fixture of the pytest plugin is this module. ``assert_batches(actual, expected)`` compares
``{batch_id: rows}`` maps (e.g. ``stream.batch_outputs(...)`` and a model's output) and fails with a
per-batch diff.

Times are whole seconds (the queries turn them into timestamps with ``timestamp_seconds``). The oracles
replay Spark's micro-batch semantics for an availableNow run over one input file:

* a data batch runs with the watermark computed at the end of the previous batch;
* if that data moved the watermark, Spark runs one no-data batch with the new watermark (this is what
  evicts state / fires timers before the run stops).

``schedule`` produces that sequence; batch ids are its indices. Every comparison between an event time and
a watermark goes through ``_after``, which refuses equality: test data must stay clear of boundaries where
``<`` and ``<=`` would differ, so a pass never depends on an off-by-one guess about Spark.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Row = dict[str, Any]


class AmbiguousTestData(ValueError):
    """The test data hits a watermark boundary exactly; change the data, not the oracle."""


def _after(t: int, watermark: int, what: str) -> bool:
    """True if ``t`` is strictly after ``watermark``; equality is rejected as ambiguous."""
    if t == watermark:
        raise AmbiguousTestData(f"{what}: time {t} equals the watermark {watermark}")
    return t > watermark


@dataclass
class Batch:
    """One micro-batch: which input file it read (None for a no-data batch) and its watermark."""

    batch_id: int
    run: int | None
    watermark: int


def schedule(runs: Sequence[Mapping[str, Sequence[int]]], delays: Mapping[str, int]) -> list[Batch]:
    """Micro-batches Spark executes for runs of one file per source each (event times per source).

    The global watermark is the minimum over sources of (max event time - delay), never decreasing,
    starting at 0 (policy "min", the default).
    """
    batches: list[Batch] = []
    watermark = 0
    max_seen: dict[str, int] = {}
    for run, times in enumerate(runs):
        batches.append(Batch(len(batches), run, watermark))
        for src, ts in times.items():
            if ts:
                max_seen[src] = max(max_seen.get(src, ts[0]), *ts)
        if max_seen:
            candidate = min(max_seen[s] - delays[s] for s in max_seen)
            if candidate > watermark:
                watermark = candidate
                batches.append(Batch(len(batches), None, watermark))
    return batches


def single_source_schedule(runs: Sequence[Sequence[Row]], delay: int, ts_col: str = "t") -> list[Batch]:
    return schedule([{"in": [r[ts_col] for r in rows]} for rows in runs], {"in": delay})


# --------------------------------------------------------------------------- comparison
def assert_batches(actual: Mapping[int, Sequence], expected: Mapping[int, Sequence], what: str = "") -> None:
    """``actual == expected`` for ``{batch_id: rows}``; rows compared as sorted lists (by ``repr``)."""

    def norm(m: Mapping[int, Sequence]) -> dict[int, list]:
        return {b: sorted(rows, key=repr) for b, rows in sorted(m.items())}

    a, e = norm(actual), norm(expected)
    if a == e:
        return
    lines = [f"{what + ': ' if what else ''}output differs from the oracle"]
    for b in sorted(set(a) | set(e)):
        if a.get(b) != e.get(b):
            missing = [r for r in e.get(b, []) if r not in a.get(b, [])]
            extra = [r for r in a.get(b, []) if r not in e.get(b, [])]
            lines.append(f"  batch {b}: missing {missing[:10]}, unexpected {extra[:10]}")
            if not missing and not extra:
                lines.append(f"    (same rows, different multiplicity) actual {a.get(b)} expected {e.get(b)}")
    raise AssertionError("\n".join(lines))


# --------------------------------------------------------------------------- aggregation
KV_SCHEMA = "k string, v long"


def keyed_runs(seed: int, runs: int = 4, rows: int = 12, keys: int = 6, max_v: int = 99) -> list[list[Row]]:
    """``runs`` batches of ``rows`` random ``{"k": "k<i>", "v": 1..max_v}`` rows over ``keys`` keys."""
    import random

    rnd = random.Random(seed)
    return [
        [{"k": f"k{rnd.randrange(keys)}", "v": rnd.randrange(1, max_v + 1)} for _ in range(rows)]
        for _ in range(runs)
    ]


def running_aggregate_query(h: Any, source: str = "in") -> Any:
    """The streaming query :func:`running_aggregate` models, on harness ``h``'s source: count as ``cnt``,
    sum of ``v`` as ``total``; read its output with ``lambda r: (r["k"], r["cnt"], r["total"])``."""
    from pyspark.sql import functions as F

    return (
        h.source(source, KV_SCHEMA)
        .groupBy("k")
        .agg(F.count(F.lit(1)).alias("cnt"), F.sum("v").alias("total"))
    )


def running_aggregate(runs: Sequence[Sequence[Row]]) -> tuple[dict[int, list[tuple]], dict[str, tuple]]:
    """groupBy(k).agg(count, sum(v)) in update mode, no watermark: one batch per run."""
    totals: dict[str, list[int]] = {}
    out: dict[int, list[tuple]] = {}
    for bid, rows in enumerate(runs):
        touched = set()
        for r in rows:
            acc = totals.setdefault(r["k"], [0, 0])
            acc[0] += 1
            acc[1] += r["v"]
            touched.add(r["k"])
        out[bid] = sorted((k, totals[k][0], totals[k][1]) for k in touched)
    return out, {k: tuple(v) for k, v in totals.items()}


def windowed_count_query(h: Any, delay: int = 10, size: int = 10, source: str = "in") -> Any:
    """The streaming query :func:`windowed_count` models, on harness ``h``'s source (``k string, t long``,
    ``t`` in seconds); read its output with ``lambda r: (r["ws"], r["k"], r["count"])``."""
    from pyspark.sql import functions as F

    return (
        h.source(source, "k string, t long")
        .withColumn("ts", F.timestamp_seconds("t"))
        .withWatermark("ts", f"{delay} seconds")
        .groupBy(F.window("ts", f"{size} seconds"), "k")
        .count()
        .select(F.unix_seconds(F.col("window.start")).alias("ws"), "k", "count")
    )


def windowed_count(
    runs: Sequence[Sequence[Row]], delay: int, size: int
) -> tuple[dict[int, list[tuple]], dict[tuple, int]]:
    """withWatermark(delay).groupBy(window(size), k).count() in append mode.

    Rows whose window already ended at the watermark are dropped; windows with end <= watermark are
    emitted once and evicted. Output tuples: (window_start, k, count).
    """
    out: dict[int, list[tuple]] = {}
    state: dict[tuple, int] = defaultdict(int)
    for b in single_source_schedule(runs, delay):
        rows = runs[b.run] if b.run is not None else []
        for r in rows:
            start = r["t"] - r["t"] % size
            if _after(start + size, b.watermark, f"window end of {r}"):
                state[(start, r["k"])] += 1
        done = sorted(key for key in state if not _after(key[0] + size, b.watermark, f"window {key}"))
        out[b.batch_id] = [(start, k, state.pop((start, k))) for start, k in done]
    return out, dict(state)


# --------------------------------------------------------------------------- deduplication
def drop_duplicates(runs: Sequence[Sequence[Row]], key: str) -> tuple[dict[int, list[tuple]], set]:
    """dropDuplicates([key]) without watermark. Output tuples: sorted row items."""
    seen: set = set()
    out: dict[int, list[tuple]] = {}
    for bid, rows in enumerate(runs):
        emitted = []
        for r in rows:
            if r[key] not in seen:
                seen.add(r[key])
                emitted.append(tuple(sorted(r.items())))
        out[bid] = sorted(emitted)
    return out, seen


def drop_duplicates_within_watermark(
    runs: Sequence[Sequence[Row]], key: str, delay: int
) -> tuple[dict[int, list[tuple]], dict[Any, int]]:
    """withWatermark(t, delay).dropDuplicatesWithinWatermark([key]).

    Late rows (t <= watermark) are dropped. A key's state expires at (first t + delay) and is evicted at
    the end of the first batch whose watermark reaches it; afterwards the key is emitted again.
    """
    expiry: dict[Any, int] = {}
    out: dict[int, list[tuple]] = {}
    for b in single_source_schedule(runs, delay):
        rows = runs[b.run] if b.run is not None else []
        emitted = []
        for r in rows:
            if not _after(r["t"], b.watermark, f"late check of {r}"):
                continue
            if r[key] not in expiry:
                expiry[r[key]] = r["t"] + delay
                emitted.append(tuple(sorted(r.items())))
        for k in [k for k, exp in expiry.items() if not _after(exp, b.watermark, f"expiry of {k}")]:
            del expiry[k]
        out[b.batch_id] = sorted(emitted)
    return out, expiry


# --------------------------------------------------------------------------- stream-stream join
@dataclass
class JoinOracle:
    """Inner / left outer join on lid = rid AND rt BETWEEN lt - bound AND lt + bound, both sides watermarked.

    Left columns (lid, lt, lv), right columns (rid, rt, rv). Output tuples (lid, lt, lv, rid, rt, rv) with
    None for the right side of unmatched left rows (left outer).
    """

    bound: int
    left_delay: int
    right_delay: int
    outer: bool = False
    out: dict[int, list[tuple]] = field(default_factory=dict)
    left_state: list[list] = field(default_factory=list)  # [row, matched]
    right_state: list[Row] = field(default_factory=list)

    def _match(self, lrow: Row, rrow: Row) -> bool:
        return lrow["lid"] == rrow["rid"] and lrow["lt"] - self.bound <= rrow["rt"] <= lrow["lt"] + self.bound

    @staticmethod
    def _pair(lrow: Row, rrow: Row | None) -> tuple:
        r = rrow or {}
        return (lrow["lid"], lrow["lt"], lrow["lv"], r.get("rid"), r.get("rt"), r.get("rv"))

    def run(self, runs: Sequence[Mapping[str, Sequence[Row]]]) -> dict[int, list[tuple]]:
        times = [{"left": [r["lt"] for r in x["left"]], "right": [r["rt"] for r in x["right"]]} for x in runs]
        for b in schedule(times, {"left": self.left_delay, "right": self.right_delay}):
            data = runs[b.run] if b.run is not None else {"left": [], "right": []}
            w = b.watermark
            emitted = []
            for lrow in data["left"]:
                if not _after(lrow["lt"], w, f"late check of {lrow}"):
                    continue
                entry = [lrow, False]
                for rrow in self.right_state:
                    if self._match(lrow, rrow):
                        emitted.append(self._pair(lrow, rrow))
                        entry[1] = True
                self.left_state.append(entry)
            for rrow in data["right"]:
                if not _after(rrow["rt"], w, f"late check of {rrow}"):
                    continue
                for entry in self.left_state:
                    if self._match(entry[0], rrow):
                        emitted.append(self._pair(entry[0], rrow))
                        entry[1] = True
                self.right_state.append(rrow)
            # State watermark of either side: rows that no future (non-late) row of the other side can match.
            state_wm = w - self.bound
            kept = []
            for entry in self.left_state:
                if _after(entry[0]["lt"], state_wm, f"left eviction of {entry[0]}"):
                    kept.append(entry)
                elif self.outer and not entry[1]:
                    emitted.append(self._pair(entry[0], None))
            self.left_state = kept
            self.right_state = [
                r for r in self.right_state if _after(r["rt"], state_wm, f"right eviction of {r}")
            ]
            self.out[b.batch_id] = sorted(emitted, key=repr)
        return self.out

    def state_rows(self) -> int:
        return len(self.left_state) + len(self.right_state)


# --------------------------------------------------------------------------- applyInPandasWithState
def session_counts(
    runs: Sequence[Sequence[Row]], delay: int, gap: int
) -> tuple[dict[int, list[tuple]], dict[str, tuple]]:
    """applyInPandasWithState with EventTimeTimeout: per key (count, sum, max t); timeout at max t + gap.

    Keys with data emit (k, count, sum, "update"); keys without data whose timeout is before the watermark
    emit (k, count, sum, "expired") and lose their state. Late rows are dropped.
    """
    state: dict[str, list[int]] = {}
    out: dict[int, list[tuple]] = {}
    for b in single_source_schedule(runs, delay):
        rows = runs[b.run] if b.run is not None else []
        emitted = []
        touched = set()
        for r in rows:
            if not _after(r["t"], b.watermark, f"late check of {r}"):
                continue
            acc = state.setdefault(r["k"], [0, 0, r["t"]])
            acc[0] += 1
            acc[1] += r["v"]
            acc[2] = max(acc[2], r["t"])
            touched.add(r["k"])
        for k in touched:
            emitted.append((k, state[k][0], state[k][1], "update"))
        for k in sorted(set(state) - touched):
            if not _after(state[k][2] + gap, b.watermark, f"timeout of {k}"):
                emitted.append((k, state[k][0], state[k][1], "expired"))
                del state[k]
        out[b.batch_id] = sorted(emitted)
    return out, {k: tuple(v) for k, v in state.items()}


# --------------------------------------------------------------------------- transformWithStateInPandas
def tws_event_time(
    runs: Sequence[Sequence[Row]], delay: int, gap: int
) -> tuple[dict[int, list[tuple]], dict[str, Any]]:
    """The EventTime StatefulProcessor of test_transform_with_state.py.

    Per key: ValueState count, ListState of v, MapState parity -> count, one event-time timer at
    (max t + gap) seconds. Data: (k, "data", count, len(list), sum(list), map json). Timer: the same tuple
    tagged "timer", then all state of the key is cleared.
    """
    state: dict[str, dict[str, Any]] = {}
    out: dict[int, list[tuple]] = {}

    def snapshot(k: str, tag: str) -> tuple:
        s = state[k]
        return (k, tag, s["count"], len(s["list"]), sum(s["list"]), json.dumps(s["map"], sort_keys=True))

    for b in single_source_schedule(runs, delay):
        rows = runs[b.run] if b.run is not None else []
        emitted = []
        touched = set()
        for r in rows:
            if not _after(r["t"], b.watermark, f"late check of {r}"):
                raise AmbiguousTestData(f"transformWithState test data must not contain late rows: {r}")
            s = state.setdefault(r["k"], {"count": 0, "list": [], "map": {}, "max_t": r["t"]})
            s["count"] += 1
            s["list"].append(r["v"])
            parity = "even" if r["v"] % 2 == 0 else "odd"
            s["map"][parity] = s["map"].get(parity, 0) + 1
            s["max_t"] = max(s["max_t"], r["t"])
            touched.add(r["k"])
        for k in touched:
            emitted.append(snapshot(k, "data"))
        for k in sorted(set(state) - touched):
            if not _after(state[k]["max_t"] + gap, b.watermark, f"timer of {k}"):
                emitted.append(snapshot(k, "timer"))
                del state[k]
        out[b.batch_id] = sorted(emitted)
    return out, state

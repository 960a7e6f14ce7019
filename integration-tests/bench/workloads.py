"""The benchmark workloads: deterministic input batches (parquet files) and the streaming queries over them.

Every workload is a function of its parameters and the batch number only (seeded numpy generators), so each
provider sees exactly the same input. Batch 0 is the *load* batch (it fills the state); batches 1..N are the
steady-state batches; the two restore batches after them are small (they measure a restart, not work).

| workload | query | state | per steady batch |
|---|---|---|---|
| ``agg`` | ``groupBy(k).agg(count, sum[, last(payload)])``, update mode | ``keys`` rows (+ ``value_bytes`` each) | ``update_fraction * keys`` rows, random existing keys |
| ``dedup`` | ``dropDuplicates(id)``, append | up to ``keys`` ids | ``update_fraction * keys`` ids drawn from ``[0, keys)`` |
| ``join`` | stream-stream inner join with watermarks and a time-range condition | ~``join_window`` batches of rows per side | ``join_rows`` rows per side |
| ``tws`` | ``transformWithState`` (Python, Row API): ValueState + ListState + MapState per key | ``tws_keys`` keys | ``update_fraction * tws_keys`` rows |
| ``tws_list`` | ``transformWithState`` (Python, Row API): a ListState appended to per row, never trimmed (plus a ValueState count) | ``tws_keys`` lists, growing every batch | ``update_fraction * tws_keys`` rows (appends) |

The queries write to the ``noop`` sink: the benchmark measures the state store, not a sink.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

WORKLOADS = ("agg", "dedup", "join", "tws", "tws_list")
BATCH_SECONDS = 10  # event time advances this much per batch (join, tws)
T0 = 1_700_000_000  # event time of batch 0, epoch seconds


@dataclass(frozen=True)
class Sizes:
    keys: int
    update_fraction: float
    tws_keys: int
    join_rows: int  # rows per side per batch
    join_window: int  # batches a join row stays in state (watermark delay + range), in batches
    restore_rows: int
    # agg only: bytes of incompressible payload per key, carried in the state (0: none), to reach a state
    # of a given size (1M keys x 1 KiB ~ 1 GiB) without writing that much input
    value_bytes: int = 0

    @property
    def updates(self) -> int:
        return max(1, int(self.keys * self.update_fraction))

    @property
    def join_updates(self) -> int:
        return max(2, self.join_rows)

    @property
    def tws_updates(self) -> int:
        return max(1, int(self.tws_keys * self.update_fraction))


def _rng(seed: int, batch: int, stream: int = 0) -> np.random.Generator:
    return np.random.default_rng([seed, batch, stream])


def _write(path: Path, table: pa.Table) -> None:
    """Atomically add one parquet file (temp name starting with '.', which the file source ignores)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp"
    pq.write_table(table, tmp, compression="snappy")
    os.replace(tmp, path)


def _ts(seconds: np.ndarray) -> pa.Array:
    return pa.array((seconds * 1_000_000).astype("int64"), pa.timestamp("us", tz="UTC"))


# ----------------------------------------------------------------------------------------- input batches
def sources(workload: str) -> tuple[str, ...]:
    """Input source names of a workload (one directory each)."""
    return ("left", "right") if workload == "join" else ("in",)


def batch_tables(workload: str, sizes: Sizes, batch: int, kind: str, seed: int = 7) -> dict[str, pa.Table]:
    """The input of one batch as {source name: table}; kind is 'load', 'steady' or 'restore'."""
    rng = _rng(seed, batch)
    n = sizes.restore_rows if kind == "restore" else sizes.updates
    if workload == "agg":
        keys = np.arange(sizes.keys, dtype="int64") if kind == "load" else rng.integers(0, sizes.keys, n)
        return {"in": pa.table({"k": keys, "v": rng.integers(0, 1000, len(keys))})}
    if workload == "dedup":
        ids = np.arange(0, sizes.keys, 2, dtype="int64") if kind == "load" else rng.integers(0, sizes.keys, n)
        return {"in": pa.table({"id": ids, "v": rng.integers(0, 1000, len(ids))})}
    if workload == "join":
        # Left ids are new every batch; each right id arrives in the same batch as its left id (half) or in
        # the next one (the other half). Event time advances BATCH_SECONDS per batch.
        u = sizes.join_updates
        n = sizes.restore_rows if kind == "restore" else u
        base = batch * u * 2
        left = np.arange(base, base + n, dtype="int64")
        prev = np.arange(base - 2 * u + u // 2, base - 2 * u + u, dtype="int64")
        right = np.concatenate([left[: n // 2], prev if batch > 0 else np.empty(0, "int64")])
        t = T0 + batch * BATCH_SECONDS
        return {
            "left": pa.table({"id": left, "lt": _ts(np.full(len(left), t)), "lv": rng.integers(0, 1000, n)}),
            "right": pa.table(
                {
                    "id": right,
                    "rt": _ts(np.full(len(right), t + 1)),
                    "rv": rng.integers(0, 1000, len(right)),
                }
            ),
        }
    if workload in ("tws", "tws_list"):
        if kind == "load":
            keys = np.arange(sizes.tws_keys, dtype="int64")
        else:
            keys = rng.integers(
                0, sizes.tws_keys, sizes.restore_rows if kind == "restore" else sizes.tws_updates
            )
        return {"in": pa.table({"k": keys, "v": rng.integers(0, 1000, len(keys))})}
    raise ValueError(f"unknown workload {workload!r}; expected one of {', '.join(WORKLOADS)}")


def write_batch(workload: str, sizes: Sizes, batch: int, kind: str, input_root: Path, seed: int = 7) -> int:
    """Writes batch ``batch`` into ``input_root/<source>/``; returns the number of input rows."""
    rows = 0
    for source, table in batch_tables(workload, sizes, batch, kind, seed).items():
        _write(input_root / source / f"b{batch:06d}.parquet", table)
        rows += table.num_rows
    return rows


# --------------------------------------------------------------------------------------------- queries
SCHEMAS = {
    "agg": {"in": "k long, v long"},
    "dedup": {"in": "id long, v long"},
    "join": {"left": "id long, lt timestamp, lv long", "right": "id long, rt timestamp, rv long"},
    "tws": {"in": "k long, v long"},
    "tws_list": {"in": "k long, v long"},
}


def stream(spark, input_root: Path, source: str, schema: str):
    return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(input_root / source))


def payload(n_bytes: int):
    """``n_bytes`` of pseudo-random binary derived from the row's (k, v): SHA-512 blocks, incompressible, so
    the state's size on disk is what the sizes say."""
    from pyspark.sql import functions as F

    blocks = [F.unhex(F.sha2(F.concat_ws(":", "k", "v", F.lit(i)), 512)) for i in range(-(-n_bytes // 64))]
    return F.substring(F.concat(*blocks), 1, n_bytes)


def build_query(spark, workload: str, sizes: Sizes, input_root: Path):
    """(DataFrame, output mode) of the workload's streaming query."""
    from pyspark.sql import functions as F

    schemas = SCHEMAS[workload]
    if workload == "agg":
        df = stream(spark, input_root, "in", schemas["in"])
        aggs = [F.count("*").alias("n"), F.sum("v").alias("s")]
        if sizes.value_bytes > 0:
            aggs.append(F.last(payload(sizes.value_bytes)).alias("p"))
        return df.groupBy("k").agg(*aggs), "update"
    if workload == "dedup":
        return stream(spark, input_root, "in", schemas["in"]).dropDuplicates(["id"]), "append"
    if workload == "join":
        delay = f"{BATCH_SECONDS * max(1, sizes.join_window - 1)} seconds"
        left = stream(spark, input_root, "left", schemas["left"]).withWatermark("lt", delay)
        right = stream(spark, input_root, "right", schemas["right"]).withWatermark("rt", delay)
        cond = F.expr(f"lid = rid AND rt >= lt AND rt <= lt + interval {BATCH_SECONDS * 2} seconds")
        joined = left.withColumnRenamed("id", "lid").join(right.withColumnRenamed("id", "rid"), cond)
        return joined, "append"
    if workload == "tws":
        df = stream(spark, input_root, "in", schemas["in"])
        out = df.groupBy("k").transformWithState(
            statefulProcessor=ListMapProcessor(),
            outputStructType="k long, n long, list_len long, buckets long",
            outputMode="Update",
            timeMode="None",
        )
        return out, "update"
    if workload == "tws_list":
        df = stream(spark, input_root, "in", schemas["in"])
        out = df.groupBy("k").transformWithState(
            statefulProcessor=ListAppendProcessor(),
            outputStructType="k long, n long",
            outputMode="Update",
            timeMode="None",
        )
        return out, "update"
    raise ValueError(f"unknown workload {workload!r}")


try:  # the processor class needs pyspark; the module stays importable without it (report.py)
    from pyspark.sql import Row
    from pyspark.sql.streaming import StatefulProcessor

    class ListMapProcessor(StatefulProcessor):
        """Per key: a count (ValueState), the last values (ListState, kept to at most 8) and a count per
        value bucket (MapState). Emits one summary row per key and batch."""

        LIST_MAX = 8

        def init(self, handle) -> None:
            self.count = handle.getValueState("count", "n long")
            self.values = handle.getListState("values", "v long")
            self.buckets = handle.getMapState("buckets", "b long", "n long")

        def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
            n = self.count.get()[0] if self.count.exists() else 0
            for row in rows:
                n += 1
                self.values.appendValue((row.v,))
                b = (row.v % 16,)
                prev = self.buckets.getValue(b) if self.buckets.containsKey(b) else (0,)
                self.buckets.updateValue(b, (prev[0] + 1,))
            values = [v[0] for v in self.values.get()]
            if len(values) > self.LIST_MAX:
                values = values[-self.LIST_MAX // 2 :]
                self.values.put([(v,) for v in values])
            self.count.update((n,))
            yield Row(k=key[0], n=n, list_len=len(values), buckets=len(list(self.buckets.keys())))

        def close(self) -> None:
            pass

    class ListAppendProcessor(StatefulProcessor):
        """Per key: every row appended to a ListState that is never read or trimmed, so the lists grow every
        batch and an append's cost shows whether it depends on the list's length; a ValueState counts them.
        Emits one row per key and batch."""

        def init(self, handle) -> None:
            self.count = handle.getValueState("count", "n long")
            self.values = handle.getListState("values", "v long")

        def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
            n = self.count.get()[0] if self.count.exists() else 0
            for row in rows:
                n += 1
                self.values.appendValue((row.v,))
            self.count.update((n,))
            yield Row(k=key[0], n=n)

        def close(self) -> None:
            pass

except ImportError:  # pragma: no cover
    ListMapProcessor = None  # type: ignore[assignment,misc]
    ListAppendProcessor = None  # type: ignore[assignment,misc]

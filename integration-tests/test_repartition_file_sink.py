"""``repartition`` and ``migrate`` keep the query's sink working (docs/repartition.md, "Spark's file sink").

Both record their rewrite as a batch B + 1 that runs no query. Spark's file sink never writes that batch's
entry in its log (``<path>/_spark_metadata``), and its compaction, every
``spark.sql.streaming.fileSink.log.compactInterval`` batches, reads every batch since the previous one: with
``--file-sink`` the command writes the entry after its commit; without it (or after a crash between the
two) the next compaction fails with BATCH_METADATA_NOT_FOUND until the command runs again with it. A
foreachBatch sink sees batch B and then B + 2.

The queries are dropDuplicates over whole rows writing Parquet, compacting every 3 batches, one input file
per batch; the output is read back through the sink's log (as every reader of it does) and must hold each
distinct row exactly once. One shared SparkSession, a few rows per batch.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException

from lineagestore import repartition as rp
from lineagestore.checkpoint import CheckpointError
from lineagestore.checkpoint.migration import migrate
from lineagestore.cli.repartition import render
from lineagestore.jvm import connect
from lineagestore.testing.harness import PROVIDER_CLASSES, StreamHarness

COMPACT_KEY = "spark.sql.streaming.fileSink.log.compactInterval"
INTERVAL = 3  # compaction batches: 2, 5, 8, 11, 14, ...


@pytest.fixture
def tools(spark):
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", PROVIDER_CLASSES["lineagestore"])
    spark.conf.set("spark.sql.streaming.stateStore.checkpointFormatVersion", "2")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    spark.conf.set(COMPACT_KEY, str(INTERVAL))
    with connect(in_session="ignore") as t:
        yield t
    for q in spark.streams.active:
        q.stop()
    spark.conf.unset(COMPACT_KEY)
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", PROVIDER_CLASSES["builtin"])
    spark.conf.set("spark.sql.shuffle.partitions", "2")


class SinkQuery:
    """dropDuplicates() over (k, v) rows into Spark's Parquet file sink at ``root/out``; ``add`` writes one
    input file (one batch), ``run`` processes every new file and stops."""

    def __init__(self, spark, root: Path, seed: int):
        self.spark = spark
        self.harness = StreamHarness(spark, root, schema="k string, v long", check_provider=False)
        self.checkpoint = self.harness.checkpoint
        self.out = root / "out"
        self.log = self.out / "_spark_metadata"
        self.rnd = random.Random(seed)
        self.rows: set[tuple[str, int]] = set()

    def add(self, files: int) -> None:
        for _ in range(files):
            rows = [(f"k{self.rnd.randrange(12)}", self.rnd.randrange(4)) for _ in range(8)]
            self.rows.update(rows)
            self.harness.write("in", [{"k": k, "v": v} for k, v in rows])

    def run(self) -> None:
        q = (
            self.harness.source("in")
            .dropDuplicates()
            .writeStream.format("parquet")
            .option("path", str(self.out))
            .option("checkpointLocation", str(self.checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        try:
            q.awaitTermination(180)
        finally:
            if q.isActive:
                q.stop()

    def entries(self) -> list[str]:
        names = [p.name for p in self.log.iterdir() if not p.name.startswith(".")]
        return sorted(names, key=lambda n: int(n.split(".")[0]))

    def entry_lines(self, name: str) -> list[str]:
        text = (self.log / name).read_text()
        assert text.split("\n")[0] == "v1", text[:100]
        return [line for line in text.split("\n")[1:] if line]

    def assert_output_exact(self) -> None:
        got = [(r["k"], r["v"]) for r in self.spark.read.parquet(str(self.out)).collect()]
        assert sorted(got) == sorted(self.rows)  # each distinct row once: no batch lost, none doubled


def test_repartition_with_file_sink_through_compactions(spark, tools, tmp_path):
    """2 -> 3 partitions after batch 3 (batch 4 an ordinary entry), resumed through the compaction at 5; then
    3 -> 4 after batch 7, where the rewrite batch 8 is itself a compaction batch (8.compact must hold every
    entry of 5.compact, 6 and 7, as Spark's compaction would); resumed through the compactions at 11 and 14.
    Running the command again writes nothing."""
    q = SinkQuery(spark, tmp_path, seed=3)
    q.add(4)
    q.run()
    assert q.entries() == ["0", "1", "2.compact", "3"]

    out = rp.repartition(
        tools, str(q.checkpoint), 3, file_sink=str(q.out), file_sink_compact_interval=INTERVAL
    )
    assert out["fileSink"]["written"] == ["4"] and out["fileSink"]["compactInterval"] == INTERVAL
    assert (q.log / "4").read_text() == "v1"  # what Spark's sink log writes for a batch without files
    q.add(3)
    q.run()  # batches 5 (compacts 2.compact, 3, 4), 6, 7
    assert q.entries()[-3:] == ["5.compact", "6", "7"]
    q.assert_output_exact()

    expected_8 = q.entry_lines("5.compact") + q.entry_lines("6") + q.entry_lines("7")
    out = rp.repartition(
        tools, str(q.checkpoint), 4, file_sink=str(q.out), file_sink_compact_interval=INTERVAL
    )
    assert out["fileSink"]["written"] == ["8.compact"]
    assert q.entry_lines("8.compact") == expected_8
    again = rp.repartition(
        tools, str(q.checkpoint), 4, file_sink=str(q.out), file_sink_compact_interval=INTERVAL
    )
    assert again["alreadyDone"] and again["fileSink"]["written"] == []
    assert again["fileSink"]["rewriteBatches"] == [8]
    q.add(6)
    q.run()  # batches 9 .. 14: compactions at 11 and 14
    assert "11.compact" in q.entries() and q.entries()[-1] == "14.compact"
    # Spark's compaction at 11 read 8.compact and wrote its entries again: the same lines, byte for byte
    assert q.entry_lines("11.compact")[: len(expected_8)] == expected_8
    q.assert_output_exact()


def test_crash_after_commit_then_rerun_with_file_sink(spark, tools, tmp_path):
    """A crash after the commit of batch 4 and before the sink's entry: the resumed query fails at the
    compaction of batch 5 with BATCH_METADATA_NOT_FOUND, naming the entry. Running the command again with
    --file-sink on the repartitioned checkpoint (which holds the failed batch's offset entry) writes only that
    entry, and the query then runs on with exact output."""
    q = SinkQuery(spark, tmp_path, seed=4)
    q.add(4)
    q.run()
    with pytest.raises(rp.InjectedCrash):
        rp.repartition(
            tools,
            str(q.checkpoint),
            3,
            crash_at=rp.STEP_AFTER_COMMIT,
            file_sink=str(q.out),
            file_sink_compact_interval=INTERVAL,
        )
    assert (q.checkpoint / "commits" / "4").exists() and not (q.log / "4").exists()
    q.add(2)
    with pytest.raises(StreamingQueryException) as failed:
        q.run()
    assert "BATCH_METADATA_NOT_FOUND" in str(failed.value) and "_spark_metadata/4" in str(failed.value)

    with pytest.raises(
        CheckpointError, match="_spark_metadata does not exist: .* is not the path of a query"
    ):
        rp.repartition(tools, str(q.checkpoint), 3, file_sink=str(q.harness.input_dir("in")))
    out = rp.repartition(
        tools, str(q.checkpoint), 3, file_sink=str(q.out), file_sink_compact_interval=INTERVAL
    )
    assert out["alreadyDone"] and out["fileSink"]["written"] == ["4"]
    q.run()  # batch 5 again (compacts 2.compact, 3, 4), then 6
    assert q.entries()[-2:] == ["5.compact", "6"]
    q.assert_output_exact()


def test_migrate_from_rocksdb_with_file_sink(spark, tools, tmp_path):
    """A query started on Spark's RocksDB provider (format 2), migrated onto lineagestore 2 -> 3 partitions
    with --file-sink, resumed through the compactions at 5 and 8."""
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", PROVIDER_CLASSES["builtin"])
    q = SinkQuery(spark, tmp_path, seed=5)
    q.add(4)
    try:
        q.run()
    finally:
        spark.conf.set("spark.sql.streaming.stateStore.providerClass", PROVIDER_CLASSES["lineagestore"])
    assert not list(q.checkpoint.rglob("*_*.delta")), "the query did not run on Spark's provider"
    moved = migrate(spark, str(q.checkpoint), 3, file_sink=str(q.out), file_sink_compact_interval=INTERVAL)
    assert moved["fileSink"]["written"] == ["4"] and moved["rowsMoved"] > 0
    again = migrate(spark, str(q.checkpoint), 3, file_sink=str(q.out), file_sink_compact_interval=INTERVAL)
    assert again["alreadyDone"] and again["fileSink"]["written"] == []
    q.add(5)
    q.run()  # batches 5 .. 9 on lineagestore: compactions at 5 and 8
    assert "5.compact" in q.entries() and q.entries()[-2:] == ["8.compact", "9"]
    assert list(q.checkpoint.rglob("*_*.delta")), "the resumed query did not run on lineagestore"
    q.assert_output_exact()


def test_foreach_batch_sink_sees_b_then_b_plus_2(spark, tools, tmp_path):
    """A foreachBatch sink is called for batches 0, 1, 2, then 4 and 5: the rewrite batch 3 has no output.
    Each batch's rows are exactly its file's rows not seen before. Without --file-sink the report says what a
    file sink needs."""
    h = StreamHarness(spark, tmp_path, schema="k string, v long", rows_as=tuple, check_provider=False)
    rnd = random.Random(6)
    files: list[list[tuple[str, int]]] = []
    start = time.time() - 60

    def add(n: int) -> None:
        for _ in range(n):
            rows = [(f"k{rnd.randrange(10)}", rnd.randrange(3)) for _ in range(6)]
            files.append(rows)
            path = h.write("in", [{"k": k, "v": v} for k, v in rows])
            # the file source takes files by modification time: one second apart, batch i reads file i
            stamp = start + len(files)
            os.utime(path, (stamp, stamp))

    def build(hh):
        return hh.source("in").dropDuplicates()

    add(3)
    h.run(build)
    out = rp.repartition(tools, str(h.checkpoint), 3)
    assert out["fileSink"] is None
    note = render(out, width=200)
    assert "--file-sink" in note and "BATCH_METADATA_NOT_FOUND" in note
    add(2)
    h.run(build)
    assert sorted(h.outputs) == [0, 1, 2, 4, 5]
    seen: set[tuple[str, int]] = set()
    for batch, rows in zip([0, 1, 2, 4, 5], files, strict=True):
        new = set(rows) - seen
        seen |= new
        assert sorted(h.outputs[batch]) == sorted(new)

"""Regression test, found by the soak: ``IdempotentBatchWriter`` skipped a batch whose output exists without
executing the batch's DataFrame, so the stateful operators of a re-run batch never run. With checkpoint format version 2
Spark 4.3 then fails the batch at its end (``assertion failed: CheckpointInfo length: 0, numPartitions: 2``
in ``StateStoreWriter.getStateStoreCheckpointInfo``): no task reported the batch's state store unique IDs.
A batch is re-run with its output present exactly when the process died after the sink wrote and before
Spark wrote the commit log entry, which the soak's SIGKILLs hit. Fixed: such a batch now runs into Spark's
no-op sink, so its state commits, and the first attempt's output is kept.

Deterministic here: run batch 0, delete ``commits/0`` (that crash window), restart: the restart must
succeed, and the next batch must count on from the right state.
"""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from lineagestore.sinks import IdempotentBatchWriter


def test_rerun_of_a_batch_whose_output_exists(spark, provider, tmp_path):
    if provider != "lineagestore":
        pytest.skip("the sink with lineagestore's provider (checkpoint format 2)")
    inp = tmp_path / "in"
    inp.mkdir()
    checkpoint = tmp_path / "ck"
    out = tmp_path / "out"

    def add(name: str, n: int) -> None:
        (inp / f".{name}").write_text("".join(json.dumps({"k": f"k{i % 3}"}) + "\n" for i in range(n)))
        (inp / f".{name}").rename(inp / name)

    def run():
        counts = spark.readStream.schema("k string").json(str(inp)).groupBy("k").agg(F.count("*").alias("n"))
        q = (
            counts.writeStream.outputMode("update")
            .foreachBatch(IdempotentBatchWriter(str(out), fmt="json"))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert q.awaitTermination(120)

    add("f0.json", 9)
    run()
    (checkpoint / "commits" / "0").unlink()  # died after the sink wrote batch 0, before the commit log
    for crc in (checkpoint / "commits").glob(".0.crc"):
        crc.unlink()
    run()  # re-runs batch 0: its output exists
    add("f1.json", 3)
    run()
    rows = [json.loads(x) for p in (out / "batch_id=1").glob("part-*") for x in p.read_text().splitlines()]
    assert sorted((r["k"], r["n"]) for r in rows) == [("k0", 4), ("k1", 4), ("k2", 4)]

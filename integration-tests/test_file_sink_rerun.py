"""Spark's file sink and a batch re-run with checkpoint format 2 (found by test_exactly_once.py under kills).

A process that dies after the file sink committed batch N (``<sink>/_spark_metadata/N``) and before Spark's
commit log entry ``commits/N`` leaves batch N to run again. The file sink then skips it ("already committed")
without executing its DataFrame, so no stateful operator runs and no state store reports a checkpoint; with
checkpoint format 2 Spark 4.3's ``MicroBatchExecution`` fails the batch (``assertion failed: CheckpointInfo
length: 0, numPartitions: 2``), on every restart. It happens with Spark's own RocksDB provider as well: the
assertion is in Spark, not in a provider. lineagestore requires format 2, so its users should write files
through ``foreachBatch`` with ``lineagestore.sinks.IdempotentBatchWriter``, which executes a re-run batch
(test_idempotent_sink_rerun.py). The test states what should happen and is a strict expected failure, so it
goes red the day Spark handles the case.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException


@pytest.mark.xfail(
    strict=True,
    raises=StreamingQueryException,
    reason="Spark 4.3 with checkpoint format 2: a batch the file sink already committed fails on re-run "
    "(CheckpointInfo length: 0)",
)
def test_a_batch_the_file_sink_committed_runs_again_after_a_death_before_the_commit_log(
    spark, provider, tmp_path
):
    inp, out, checkpoint = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    inp.mkdir()
    for n in range(2):
        rows = "".join(json.dumps({"id": n * 10 + i}) + "\n" for i in range(10))
        (inp / f".f{n}.json").write_text(rows)
        (inp / f".f{n}.json").rename(inp / f"f{n}.json")

    def run() -> None:
        q = (
            spark.readStream.schema("id long")
            .option("maxFilesPerTrigger", 1)
            .json(str(inp))
            .dropDuplicates(["id"])
            .writeStream.format("json")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(180)
        if q.exception() is not None:
            raise AssertionError(str(q.exception())[:2000])

    run()
    assert sorted(p.name for p in (out / "_spark_metadata").iterdir() if not p.name.startswith(".")) == [
        "0",
        "1",
    ]
    # the process died after the sink committed batch 1 and before Spark's commit log entry for it
    (checkpoint / "commits" / "1").unlink()
    for crc in Path(checkpoint / "commits").glob(".1.crc"):
        crc.unlink()
    run()  # Spark 4.3 with format 2: fails here, for either provider
    assert (checkpoint / "commits" / "1").exists()

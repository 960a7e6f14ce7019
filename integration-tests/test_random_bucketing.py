"""Seed 003, appendix case 1: each element goes to a random bucket and each bucket collects its elements,

    .withColumn("random_key", (rand() * 1024).cast("int")).groupBy("random_key").agg(collect_list(...))

Two attempts of one batch put the same elements in different buckets (``rand()`` takes a new seed when the
query is planned again). A store that replayed one attempt's changes on top of the other attempt's state
loses an element or holds it twice (the seed's "foo is lost").

Here a batch runs twice: its commit log entry is deleted after it ran (the process died between the state
commit and Spark's commit log), the restart plans it again with a new seed, and both attempts' deltas stay in
the checkpoint. Later batches run on the same executor (which held the first attempt), then on an empty
local directory (everything from the checkpoint).

Invariant: after every run, the state (the last batch's output in complete mode) holds every element written
so far exactly once, whichever attempt the commit log chose.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import functions as F

LOCAL_DIR_KEY = "spark.sql.streaming.stateStore.lineagestore.localDir"
BUCKETS = 16


def test_random_buckets_keep_every_element_once_across_attempts_and_restarts(spark, provider, tmp_path):
    if provider != "lineagestore":
        pytest.skip("the scenario needs unique checkpoint IDs (checkpoint format 2 on lineagestore)")
    inp = tmp_path / "in"
    inp.mkdir()
    checkpoint = tmp_path / "ck"
    written: list[str] = []
    outputs: dict[int, list[str]] = {}

    def add(n: int) -> None:
        name = f"f{len(written):05d}.json"
        elements = [f"e{len(written) + i}" for i in range(n)]
        (inp / f".{name}").write_text("".join(json.dumps({"payload": e}) + "\n" for e in elements))
        (inp / f".{name}").rename(inp / name)
        written.extend(elements)

    def collect(df, batch_id: int) -> None:
        outputs[batch_id] = [e for row in df.collect() for e in row["payload"]]

    def run() -> int:
        buckets = (
            spark.readStream.schema("payload string")
            .option("maxFilesPerTrigger", 1)
            .json(str(inp))
            .withColumn("random_key", (F.rand() * BUCKETS).cast("int"))  # a new seed each time it is planned
            .groupBy("random_key")
            .agg(F.collect_list("payload").alias("payload"))
        )
        q = (
            buckets.writeStream.outputMode("complete")
            .foreachBatch(collect)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert q.awaitTermination(180)
        last = max(outputs)
        held = Counter(outputs[last])
        assert held == Counter(written), (
            f"batch {last}: lost {sorted(set(written) - set(held))}, "
            f"more than once {sorted(e for e, n in held.items() if n > 1)}"
        )
        return last

    snapshot_key = "spark.sql.streaming.stateStore.minDeltasForSnapshot"
    before = {k: spark.conf.get(k, None) for k in (snapshot_key, LOCAL_DIR_KEY)}
    spark.conf.set(snapshot_key, "1")  # a snapshot per attempt
    try:
        add(20)
        add(20)
        assert run() == 1
        (checkpoint / "commits" / "1").unlink()  # died after batch 1's state commit, before its commit log
        for crc in (checkpoint / "commits").glob(".1.crc"):
            crc.unlink()
        assert run() == 1  # batch 1 again: a second attempt of state version 2, bucketed anew
        attempts = [_deltas(checkpoint, p, version=2) for p in _partitions(checkpoint)]
        assert any(len(a) == 2 for a in attempts), f"no partition has both attempts of version 2: {attempts}"

        add(20)
        assert run() == 2  # on the executor that held the first attempt
        fresh = tmp_path / "fresh-local-dir"
        fresh.mkdir()
        spark.conf.set(LOCAL_DIR_KEY, str(fresh))
        add(20)
        assert run() == 3  # from the checkpoint alone
        assert any((fresh / "lineagestore").rglob("*.sst")), f"the restart did not use {fresh}"
    finally:
        for key, value in before.items():
            spark.conf.unset(key) if value is None else spark.conf.set(key, value)


def _partitions(checkpoint: Path) -> list[Path]:
    return sorted(p for p in (checkpoint / "state" / "0").iterdir() if p.name.isdigit())


def _deltas(checkpoint: Path, partition: Path, version: int) -> list[str]:
    return sorted(f.name for f in partition.rglob(f"{version}_*.delta"))

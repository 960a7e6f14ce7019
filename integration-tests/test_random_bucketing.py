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

import pytest
from pyspark.sql import functions as F

from seed003_attempts import two_attempts_then_restarts

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

    two_attempts_then_restarts(spark, checkpoint, tmp_path / "fresh-local-dir", add, run)

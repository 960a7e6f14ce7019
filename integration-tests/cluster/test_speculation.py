"""Seed 003's core case on a real cluster: a speculative copy of a stateful task runs on another executor,
both attempts write a checkpoint of the same version, and the lineage continues from the one the driver
committed, on whichever executor the next batch lands.

The armed batch's partition-0 task holds in a UDF downstream of the aggregation, after its state committed,
on its original attempt only: the scheduler launches a copy on another host, which commits its own
checkpoint and wins. Invariants: every batch's output equals the oracle's; both attempts' deltas exist; the
committed lineage the delta headers record agrees with Spark's commit log (a load of the losing attempt would
put its unique ID into the next delta's lineage, which ``inspect`` reports as a conflict); ``verify`` clean.
"""

from __future__ import annotations

import os
import time

from test_cluster import _assert_checkpoint_clean

from lineagestore.testing import oracle
from lineagestore.testing.cli import run_cli
from lineagestore.testing.harness import PROVIDER_CLASSES, StreamHarness


def _slow_original(total):
    """The original attempt of the armed batch's partition 0 holds; every attempt leaves a marker."""
    from pyspark import TaskContext

    armed = os.environ.get("LS_SPEC_ARMED", "/nonexistent")
    if os.path.exists(armed):
        ctx = TaskContext.get()
        marker = f"{armed}.p{ctx.partitionId()}-a{ctx.attemptNumber()}-{os.environ.get('SPARK_LOCAL_IP')}"
        open(marker, "a").close()
        if ctx.partitionId() == 0 and ctx.attemptNumber() == 0:
            time.sleep(20)
    return total


def test_a_speculative_attempt_on_another_executor_and_the_committed_one_wins(spark, cluster, tmp_path):
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.shuffle.partitions", "3")
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", PROVIDER_CLASSES["lineagestore"])
    armed = tmp_path / "armed"
    # the executors' Python workers read the flag's path from the environment the UDF carries
    spark.sparkContext.environment["LS_SPEC_ARMED"] = str(armed)
    slow = F.udf(_slow_original, "long")

    def build(h):
        return oracle.running_aggregate_query(h).select("k", "cnt", slow("total").alias("total"))

    h = StreamHarness(spark, tmp_path / "stream")
    runs = oracle.keyed_runs(seed=3, runs=5, rows=60, keys=12)
    expected, _ = oracle.running_aggregate(runs)
    for i, rows in enumerate(runs):
        h.add(rows)
        if i == 2:
            armed.touch()
        h.run(build, "update")
        if i == 2:
            armed.unlink()
    oracle.assert_batches(h.batch_outputs(lambda r: (r["k"], r["cnt"], r["total"])), expected)

    attempts = sorted(p.name.split(".", 1)[1] for p in tmp_path.glob("armed.p0-a*"))
    hosts = {a.rsplit("-", 1)[1] for a in attempts}
    assert len(hosts) >= 2, f"partition 0's attempts did not run on two executors: {attempts}"
    # batch 2 is state version 3: both attempts committed a checkpoint of it
    store = h.checkpoint / "state" / "0" / "0"
    deltas = sorted(p.name for p in store.glob("3_*.delta"))
    assert len(deltas) >= 2, f"only one attempt wrote version 3: {deltas}"
    inspected = run_cli(["inspect", str(h.checkpoint)], json=True)
    assert inspected.code == 0, inspected.report
    partition0 = next(s for s in inspected.report["stores"] if s["partitionId"] == 0 and s["operatorId"] == 0)
    assert partition0["conflicts"] == [], partition0["conflicts"]
    assert partition0["totals"]["orphanAttempts"] >= 1
    _assert_checkpoint_clean(h.checkpoint)

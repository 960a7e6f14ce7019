"""lineagestore on a real multi-executor Spark (issue 18): a standalone Master and three Workers on 127.0.0.2,
.3 and .4, one executor each with its own local directory (``--lineagestore-cluster=3``; ``dev/test`` runs this
directory in a pytest process of its own, since a process has one SparkContext).

Every scenario compares each batch with a plain-Python oracle and ends with ``lineagestore verify`` clean and
``lineagestore gc`` finding no shared blob that no snapshot references.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from lineagestore.testing import oracle
from lineagestore.testing.cli import run_cli
from lineagestore.testing.harness import PROVIDER_CLASSES, StreamHarness

PARTITIONS = 6  # more partitions than the cluster's 3 cores: stores drift between executors


@pytest.fixture
def harness(spark, cluster, tmp_path):
    spark.conf.set("spark.sql.shuffle.partitions", str(PARTITIONS))
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", PROVIDER_CLASSES["lineagestore"])
    h = StreamHarness(spark, tmp_path / "stream")
    yield h
    for q in spark.streams.active:
        q.stop()


def _assert_checkpoint_clean(checkpoint: Path, crashed: bool = False) -> None:
    verified = run_cli(["verify", str(checkpoint)], json=True)
    assert verified.code == 0, verified.report
    if crashed:  # a killed executor may leave an upload's blobs behind: the sweep past the grace removes them
        applied = run_cli(["gc", str(checkpoint), "--grace", "0s", "--apply"], json=True)
        assert applied.code == 0, applied.report
    # After the query stops, executors still upload the snapshots they froze (maintenance, close): between an
    # upload's blobs and its zip, those blobs are referenced by no snapshot yet. A leak is a blob that stays
    # so once the uploads are over, so the plan is asked again for a while before it counts as one.
    deadline = time.monotonic() + 30
    while True:
        plan = run_cli(["gc", str(checkpoint), "--grace", "0s"], json=True)
        assert plan.code == 0, plan.report
        leaked = [
            (store["dir"], d["file"])
            for store in plan.report["stores"]
            for d in store["delete"]
            if d["file"].startswith("shared/") and d["reason"]["kind"] == "unreferenced"
        ]
        if not leaked or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert leaked == [], f"shared blobs no snapshot references 30 s after the query stopped: {leaked}"


def _stores_by_host(cluster) -> dict[str, int]:
    return {
        host: len([p for p in (cluster.local_dir(host) / "lineagestore" / "stores").glob("*") if p.is_dir()])
        for host in cluster.hosts
    }


def test_the_session_runs_on_three_executors_on_three_hosts(spark, cluster):
    # a task's Python worker inherits its executor's environment, whose SPARK_LOCAL_IP is its Worker's host
    hosts = (
        spark.sparkContext.parallelize(range(30), 30)
        .map(lambda _: os.environ.get("SPARK_LOCAL_IP"))
        .collect()
    )
    assert set(hosts) == set(cluster.hosts)
    assert sorted(cluster.executor_pids()) == cluster.hosts


def test_stores_move_between_executors_and_every_load_is_right(harness, cluster):
    runs = oracle.keyed_runs(seed=18, runs=6, rows=80, keys=40)
    expected, _ = oracle.running_aggregate(runs)
    for rows in runs:
        harness.add(rows)
        harness.run(oracle.running_aggregate_query, "update")  # a restart per run: stores are placed anew
    oracle.assert_batches(harness.batch_outputs(lambda r: (r["k"], r["cnt"], r["total"])), expected)
    spread = _stores_by_host(cluster)
    assert sum(1 for n in spread.values() if n) >= 2, f"the stores never left one executor: {spread}"
    _assert_checkpoint_clean(harness.checkpoint)


def test_an_executor_killed_mid_batch_loses_nothing(harness, cluster, tmp_path):
    from pyspark.sql import functions as F

    armed = tmp_path / "armed"
    started = tmp_path / "started"

    def slow(total):
        # in the armed batch, every task holds here after its stateful part ran: the kill lands mid-batch
        if armed.exists():
            started.touch()
            time.sleep(4)
        return total

    slow_udf = F.udf(slow, "long")

    def build(h):
        return oracle.running_aggregate_query(h).select("k", "cnt", slow_udf("total").alias("total"))

    runs = oracle.keyed_runs(seed=181, runs=5, rows=80, keys=40)
    expected, _ = oracle.running_aggregate(runs)
    victim = cluster.hosts[1]
    killed: list[int] = []

    def kill_when_started():
        deadline = time.monotonic() + 120
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        killed.append(cluster.kill_executor(victim))

    for i, rows in enumerate(runs):
        harness.add(rows)
        if i == 2:
            armed.touch()
            killer = threading.Thread(target=kill_when_started)
            killer.start()
        harness.run(build, "update")
        if i == 2:
            killer.join()
            armed.unlink()
            assert killed, "the executor was not killed during the batch"
    oracle.assert_batches(harness.batch_outputs(lambda r: (r["k"], r["cnt"], r["total"])), expected)
    # the Master started a new executor on the victim's host, over the local state the dead one left
    deadline = time.monotonic() + 60
    while victim not in cluster.executor_pids() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert victim in cluster.executor_pids()
    cluster.await_executors(harness.spark)  # registered with the driver too: the next tests count on three
    _assert_checkpoint_clean(harness.checkpoint, crashed=True)

"""Adjunct tables on the multi-executor cluster (issue 19): lookups run on three executor JVMs, each holding
one replica of the table (shared by its tasks), every event enriched as the plain-Python oracle says for the
version its lookup was given, and a version change downloads only the deltas each replica lacks. The
replicas' markers make the same facts visible to ``lineagestore inspect`` (their lag behind the latest)."""

from __future__ import annotations

import json
import threading
import time

import pytest

from lineagestore import adjunct
from lineagestore.testing import faults
from test_adjunct_partitioned import sparks_partition_of
from test_adjunct_tables import CHANGE_SCHEMA, ROUNDS, Oracle, as_table
from test_adjunct_tables import inspect_json as _inspect

PARTITIONS = 12  # more tasks than the 3 executors' cores: each executor runs several, sharing its replica


def _replica_dirs(cluster, host: str, table: str) -> list[str]:
    """The local directories on ``host`` leased to a replica of ``table`` (each holds its location in STORE)."""
    return [
        str(f.parent)
        for f in cluster.local_dir(host).rglob("STORE")
        if f.read_text().startswith("adjunct-replica:") and table in f.read_text()
    ]


def test_lookups_on_three_executors_one_replica_each_deltas_only(spark, cluster, tmp_path):
    table = str(tmp_path / "table")
    oracle = Oracle()
    keys = [0, 1, 2, 3, 4, 5, 6, 99, 1000]
    # No preferred locations (a cached or shuffled input would pull its tasks to the executors holding it),
    # and every task holds its executor's one core for 300 ms (one row of each partition sleeps): an executor
    # cannot run all the tasks before the others are offered some, so each of the 3 runs some of them.
    events = spark.range(0, 10 * PARTITIONS, 1, PARTITIONS).selectExpr(
        "cast(id as int) as event",
        f"element_at(array({', '.join(map(str, keys))}), cast(id % {len(keys)} + 1 as int)) as id",
        "reflect('java.lang.Thread', 'sleep', if(id % 10 = 0, 300L, 0L)) as pause",
    )
    hosts = set(cluster.hosts)
    before: dict[str, dict] = {}  # host -> its replica's marker after the previous version
    for version, round_changes in enumerate(ROUNDS, start=1):
        df = spark.createDataFrame(round_changes, CHANGE_SCHEMA)
        assert adjunct.maintain_batch(df, version - 1, table, ["id"], "seq", source="cluster-test") == version
        oracle.commit(version, round_changes)
        if before:  # the replicas still hold the previous version: inspect shows them one version behind
            assert {_host(r): r["lag"] for r in _inspect(table)["replicas"]} == {h: 1 for h in before}
        # Speculation is on in the cluster suite: a task slow in a cold executor JVM can lose to its copy and
        # be killed before its replica loads (or before its marker is written: the interrupt fails the write,
        # and the next task there writes it), leaving that executor without a replica at this version in this
        # job. The lookup is run again (at most 3 times, results checked every time) until every executor
        # holds one.
        for _attempt in range(3):
            rows = adjunct.lookup(events, table, version=version).collect()
            assert len(rows) == 10 * PARTITIONS
            for r in rows:
                expected = oracle.versions[version].get(r["id"], (None, None))
                assert (r["name"], r["score"]) == expected, (version, r)
            replicas = {_host(r): r for r in _inspect(table)["replicas"] if r["version"] == version}
            if set(replicas) == hosts:
                break
        # one replica per executor (not per task), on every executor, at the version its lookup was given
        assert set(replicas) == hosts, replicas
        assert len(_inspect(table)["replicas"]) == 3
        assert all(r["lag"] == 0 for r in replicas.values()), replicas
        for host in hosts:
            assert len(_replica_dirs(cluster, host, table)) == 1, (host, _replica_dirs(cluster, host, table))
        # moving up one version replayed the one delta each replica lacked and downloaded no snapshot file
        for host, r in replicas.items():
            assert r["bytesDownloaded"] == 0, r
            if host in before:
                assert r["deltasReplayed"] - before[host]["deltasReplayed"] == 1, (before[host], r)
        before = replicas


def _host(replica: dict) -> str:
    return replica["replica"].split("@")[1]


def test_partitioned_lookup_on_three_executors_reads_each_partition_where_its_task_ran(
    spark, cluster, tmp_path
):
    """A table in 6 partitions, events shuffled like it: every event enriched as the oracle says, and each
    executor holds replicas of exactly the partitions whose tasks it ran (its markers), no others."""
    table = str(tmp_path / "partitioned")
    n = 6
    oracle = Oracle()
    for version, round_changes in enumerate(ROUNDS[:2], start=1):
        df = spark.createDataFrame(round_changes, CHANGE_SCHEMA)
        assert (
            adjunct.maintain_batch(df, version - 1, table, ["id"], "seq", source="cluster-p", partitions=n)
            == version
        )
        oracle.commit(version, round_changes)
    keys = [0, 1, 2, 3, 4, 5, 6, 7, 8, 99, 1000]
    events = spark.range(0, 10 * n, 1, n).selectExpr(
        "cast(id as int) as event",
        f"element_at(array({', '.join(map(str, keys))}), cast(id % {len(keys)} + 1 as int)) as id",
    )
    rows = adjunct.lookup(events.repartition(n, "id"), table, version=2).collect()
    assert len(rows) == 10 * n
    for r in rows:
        assert (r["name"], r["score"]) == oracle.versions[2].get(r["id"], (None, None)), r
    placed = set(sparks_partition_of(spark, keys, n).values())  # the partitions that had events
    marks = _inspect(table)["replicas"]
    assert {m["partition"] for m in marks} == placed, marks
    assert all(m["lag"] == 0 for m in marks), marks
    for host in cluster.hosts:
        held = sorted(int(d.split("/store/")[1].split("/")[0]) for d in _replica_stores(cluster, host, table))
        assert held == sorted(m["partition"] for m in marks if _host(m) == host), (host, held, marks)


def _replica_stores(cluster, host: str, table: str) -> list[str]:
    """The store locations of the replicas of ``table`` leased on ``host`` (from each directory's STORE)."""
    return [
        f.read_text()
        for f in cluster.local_dir(host).rglob("STORE")
        if f.read_text().startswith("adjunct-replica:") and table in f.read_text()
    ]


def _record(table, version: int) -> dict[str, str]:
    text = (table / "_adjunct" / "commits" / str(version)).read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def _maintain_report(spark, table) -> list[dict]:
    text = spark._jvm.io.lineagestore.spark.adjunct.MaintainTasks.lastReport(str(table))
    return [json.loads(line) for line in text.splitlines()]


def test_partitioned_maintain_split_across_executors_a_retried_task_named_once(spark, cluster, tmp_path):
    """Maintain on the executors (docs/adjunct-tables.md "Maintain"): a table in 6 partitions, each batch's
    changes applied by one task per partition, on more than one executor, each partition's next task where it
    last committed (its store warm there). A task failing after committing its partition's checkpoint is
    retried by Spark within the job: the table's record names exactly one of the two children of that
    partition's parent, and every reader gets the oracle's answer."""
    table = tmp_path / "maintained"
    n = 6
    oracle = Oracle()
    changes = [(k, "upsert", 1, f"a{k}", float(k)) for k in range(600)]
    df = spark.createDataFrame(changes, CHANGE_SCHEMA)
    assert adjunct.maintain_batch(df, 0, str(table), ["id"], "seq", source="cluster-m", partitions=n) == 1
    oracle.commit(1, changes)
    first = _maintain_report(spark, table)
    assert sorted(r["partition"] for r in first) == list(range(n))
    assert len({r["host"] for r in first}) >= 2, first  # the maintain work was split across executors
    assert sum(r["changes"] for r in first) == 600

    updates = [(k, "upsert", 2, f"b{k}", -float(k)) for k in range(0, 600, 2)]
    df = spark.createDataFrame(updates, CHANGE_SCHEMA)
    with faults.fail_once_at(spark, "adjunct.after-partition-commit", tmp_path / "markers") as markers:
        # the failed task is retried in the same job: the batch commits at once
        assert adjunct.maintain_batch(df, 1, str(table), ["id"], "seq", source="cluster-m") == 2
        assert faults.fired(markers, "adjunct.after-partition-commit")
    oracle.commit(2, updates)
    rec = _record(table, 2)
    second = _maintain_report(spark, table)
    named = {int(k.removeprefix("store.")): v for k, v in rec.items() if k.startswith("store.")}
    assert {r["partition"]: r["checkpoint"] for r in second} == {
        p: v for p, v in named.items() if v[0] == "2"
    }
    children = {
        p: {f.name.removesuffix(".delta") for f in (table / "store" / str(p)).glob("2_*.delta")}
        for p in named
    }
    assert all(named[p] in children[p] for p in named), (named, children)
    # the partition whose first attempt failed after committing holds two children of its parent, one named
    assert any(len(c) >= 2 for c in children.values()), children
    by_partition = {r["partition"]: r for r in first}
    # each task ran where its partition last committed and found its store there (nothing downloaded); the
    # retried partition may have moved, and speculation may run a copy elsewhere
    assert sum(1 for r in second if r["host"] == by_partition[r["partition"]]["host"] and r["warm"]) >= n - 2
    assert as_table(adjunct.read(spark, str(table)).collect()) == oracle.versions[2]
    events = spark.createDataFrame([(k, k) for k in range(0, 610, 7)], "event INT, id INT").repartition(
        n, "id"
    )
    rows = adjunct.lookup(events, str(table)).collect()
    assert {r["id"]: (r["name"], r["score"]) for r in rows} == {
        k: oracle.versions[2].get(k, (None, None)) for k in range(0, 610, 7)
    }


# The long run only, for now: it passes, but after it the replacement executor on the victim's host got none
# of test_cluster.py's next 30 tasks, though registered with the driver (2026-12-02, twice; cause not found).
@pytest.mark.long_run
def test_an_executor_killed_during_maintain_loses_nothing(spark, cluster, tmp_path):
    """An executor SIGKILLed while the batch's maintain tasks run (its warm partition stores lost with it):
    Spark re-runs its tasks elsewhere, each loading its parent from storage; the batch commits one version
    whose record names a child of each recorded parent, and the table is the oracle's."""
    table = tmp_path / "killed"
    n = 6
    keys = 200_000

    def batch(seq: int, tag: str):
        return spark.range(keys).selectExpr(
            "cast(id as int) as id",
            "'upsert' as op",
            f"cast({seq} as long) as seq",
            f"concat('{tag}', id) as name",
            "cast(id as double) as score",
        )

    assert (
        adjunct.maintain_batch(batch(1, "a"), 0, str(table), ["id"], "seq", source="kill", partitions=n) == 1
    )
    parents = _record(table, 1)
    victim = cluster.hosts[1]
    tracker = spark.sparkContext.statusTracker()
    killed: list[int] = []
    done = threading.Event()

    def kill_when_maintaining():
        # the apply stage is the job whose tasks run MaintainTasks (its stage named after its collect call)
        while not done.is_set() and not killed:
            for sid in tracker.getActiveStageIds():
                info = tracker.getStageInfo(sid)
                if info and "MaintainTasks" in info.name and info.numActiveTasks > 0:
                    killed.append(cluster.kill_executor(victim))
                    break
            time.sleep(0.05)

    killer = threading.Thread(target=kill_when_maintaining)
    killer.start()
    try:
        assert adjunct.maintain_batch(batch(2, "b"), 1, str(table), ["id"], "seq", source="kill") == 2
    finally:
        done.set()
        killer.join()
    assert killed, "the executor was not killed during maintain"
    rec = _record(table, 2)
    for p in range(n):  # every partition changed: each named checkpoint is a child of its recorded parent
        assert rec[f"store.{p}"].startswith("2_") and parents[f"store.{p}"].startswith("1_"), (p, rec)
    got = adjunct.read(spark, str(table))
    expected = batch(2, "b").select("id", "name", "score")
    assert got.count() == keys
    assert got.select("id", "name", "score").exceptAll(expected).count() == 0
    # the Master starts a new executor on the victim's host; the next tests count on it registered with the
    # driver, not only running (a JVM that still starts left the next test's job with two executors)
    cluster.await_executors(spark)
    assert victim in cluster.executor_pids()

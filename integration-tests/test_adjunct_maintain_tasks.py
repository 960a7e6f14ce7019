"""Adjunct maintain on the executors (docs/adjunct-tables.md "Maintain", "How attempts, re-runs and lost
executors resolve"): one task per partition commits its store's checkpoint, the driver writes the table record
last. A task that fails after committing, and a driver that fails between the partitions' commits and the
record (the named steps of ``CrashPoints.AdjunctMaintain``, through the test hook of ``lineagestore.testing.faults``),
leave checkpoints no record names; the re-run's record names exactly one checkpoint per partition, each a
child of the parent the last record named, and every reader gets the oracle's answer. In ``local[2]`` a failed
task is not retried (the batch fails and is re-run); the cluster suite retries it within the job."""

from __future__ import annotations

import json

import pytest

from lineagestore import adjunct
from lineagestore.testing import faults
from test_adjunct_tables import CHANGE_SCHEMA, EVENT_SCHEMA, ROUNDS, Oracle, as_table

N = 3


def record(table, version: int) -> dict[str, str]:
    """The table commit record of ``version`` (Java properties of plain values)."""
    text = (table / "_adjunct" / "commits" / str(version)).read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def deltas(table, version: int) -> dict[int, set[str]]:
    """Per partition, the checkpoints ``<version>_<id>`` its store holds deltas of."""
    found: dict[int, set[str]] = {}
    for f in table.glob(f"store/*/{version}_*.delta"):
        found.setdefault(int(f.parent.name), set()).add(f.name.removesuffix(".delta"))
    return found


def report(spark, table) -> list[dict]:
    """The last recorded batch's maintain tasks (``MaintainTasks.lastReport``): one per committing partition."""
    text = spark._jvm.io.lineagestore.spark.adjunct.MaintainTasks.lastReport(str(table))
    return [json.loads(line) for line in text.splitlines()]


def check_readers(spark, table, expected: dict) -> None:
    assert as_table(adjunct.read(spark, str(table)).collect()) == expected
    keys = sorted(expected) + [1000]
    events = spark.createDataFrame([(k, k) for k in keys], EVENT_SCHEMA).repartition(N, "id")
    rows = adjunct.lookup(events, str(table)).collect()
    assert {r["id"]: (r["name"], r["score"]) for r in rows} == {
        k: expected.get(k, (None, None)) for k in keys
    }


@pytest.mark.parametrize("step", faults.ADJUNCT_STEPS)
def test_a_failure_after_partition_commits_resolves_by_the_record(spark, tmp_path, step):
    """A task failing after committing its partition (``adjunct.after-partition-commit``) or the driver failing
    before the record (``adjunct.before-record``): nothing recorded, the re-run records one child of the
    recorded parent per changed partition, the failed run's checkpoints are orphans, readers see the oracle."""
    table = tmp_path / "table"
    src = str(tmp_path / "m")
    oracle = Oracle()

    def commit(batch_id, rows):
        df = spark.createDataFrame(rows, CHANGE_SCHEMA)
        return adjunct.maintain_batch(df, batch_id, str(table), ["id"], "seq", source=src, partitions=N)

    assert commit(0, ROUNDS[0]) == 1
    oracle.commit(1, ROUNDS[0])
    parents = record(table, 1)
    with faults.fail_once_at(spark, step, tmp_path / "markers") as markers:
        with pytest.raises(Exception, match=step):
            commit(1, ROUNDS[1])
        assert faults.fired(markers, step)
    assert not (table / "_adjunct" / "commits" / "2").exists()  # nothing recorded
    failed = {p: set(ids) for p, ids in deltas(table, 2).items()}
    assert failed  # the failed run committed partition checkpoints no record names
    assert commit(1, ROUNDS[1]) == 2
    oracle.commit(2, ROUNDS[1])
    rec = record(table, 2)
    named = {int(k.removeprefix("store.")): v for k, v in rec.items() if k.startswith("store.")}
    for p, ids in deltas(table, 2).items():
        # a store that committed twice over the same parent: the record names exactly one of the two, the re-run's
        assert named[p] in ids and named[p] not in failed.get(p, set()), (p, ids, named)
    for p in range(N):  # every record's checkpoint is a child of the one the last record named (or kept)
        before, after = parents.get(f"store.{p}"), named.get(p)
        if after and after.startswith("2_"):
            assert before is None or before.startswith("1_"), (p, before, after)
        else:
            assert after == before, (p, before, after)
    assert {r["partition"] for r in report(spark, table)} == {
        p for p, v in named.items() if v.startswith("2_")
    }
    check_readers(spark, table, oracle.versions[2])


def test_maintain_tasks_find_their_stores_warm_and_a_broadcast_table_is_one_task(spark, tmp_path):
    """From the second batch on, each partition's task runs where the partition was last committed and finds
    its store at the parent there (nothing downloaded); a table of one store is maintained in one task."""
    oracle = Oracle()
    table = tmp_path / "table"
    broadcast = tmp_path / "broadcast"
    for version, rows in enumerate(ROUNDS, start=1):
        df = spark.createDataFrame(rows, CHANGE_SCHEMA)
        assert (
            adjunct.maintain_batch(df, version - 1, str(table), ["id"], "seq", source="w", partitions=N)
            == version
        )
        assert adjunct.maintain_batch(df, version - 1, str(broadcast), ["id"], "seq", source="w") == version
        oracle.commit(version, rows)
        tasks = report(spark, table)
        assert tasks and all(r["changes"] > 0 for r in tasks), tasks
        one = report(spark, broadcast)
        assert len(one) == 1 and one[0]["partition"] == 0 and one[0]["changes"] == len({r[0] for r in rows})
        if version > 1:
            assert all(r["warm"] and r["bytesDownloaded"] == 0 for r in tasks + one), tasks + one
    check_readers(spark, table, oracle.versions[len(ROUNDS)])
    assert as_table(adjunct.read(spark, str(broadcast)).collect()) == oracle.versions[len(ROUNDS)]

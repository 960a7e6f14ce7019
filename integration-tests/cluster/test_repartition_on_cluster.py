"""``repartition`` as a Spark job on the 3-executor cluster (issue 47): the tasks of one job rewrite the stores
on the executors, each group of new partitions in a task of its own, and the driver commits. The operator tests
of ``test_repartition.py`` run here with the job only (their oracle, placement and ``verify`` checks
unchanged), ``migrate`` from Spark's providers (their stores opened by Spark's own provider in the tasks),
and a task that fails after writing its stores is retried on the cluster: the retry's stores are
the committed ones, the first attempt's are orphans that ``gc`` removes, and nothing changes a result."""

from __future__ import annotations

import random

import pytest
from pyspark.sql import functions as F

from lineagestore import repartition as rp
from lineagestore.checkpoint import gc, load
from test_repartition import (  # noqa: F401  (fixtures and tests collected here, run on the cluster session)
    Query,
    _placement_matches_spark,
    _rows,
    _settled_files,
    _verify_clean,
    test_dedup_then_aggregation_up_and_down,
    test_flat_map_groups_with_state,
    test_migrate_from_spark_providers,
    tools,
)


@pytest.fixture
def rewriter(spark):
    """On the cluster ``repartition`` is given the session: the Spark job, never the driver's threads."""
    return spark


def _zips(checkpoint) -> set:
    return {p for p in (checkpoint / "state").rglob("*.zip")}


def test_task_failing_after_its_write_is_retried_and_leaves_orphans(spark, tools, tmp_path):  # noqa: F811
    def build(q):
        return q.source("in").groupBy("k").agg(F.sum("v"), F.count("*"))

    spark.conf.set("spark.sql.shuffle.partitions", "2")
    q = Query(spark, tmp_path, build)
    rows = _rows(random.Random(31), 60, keys=30)
    q.write("in", rows)
    q.run()
    cp = str(q.checkpoint)
    before = _settled_files(q.checkpoint)

    # 2 -> 6: a multiple, so one task per old partition, each writing three new stores
    out = rp.repartition(spark, cp, 6, crash_at=rp.STEP_TASK_AFTER_WRITE)
    assert out["ranAs"] == "spark job" and len(out["tasks"]) == 2
    retried = [t for t in out["tasks"] if t["attempt"] > 0]
    assert len(retried) == 1, out["tasks"]  # the failed first attempt's result never reached the driver
    # the repartition's stores stand at version 2 (batch 0's committed version 1, plus one); an executor's
    # maintenance may still upload batch 0's own snapshot meanwhile, which is not counted
    new_zips = {p for p in _zips(q.checkpoint) - before if p.name.startswith("2_")}
    # six committed new stores, plus the three the failed attempt wrote (orphans: no commit names them)
    assert len(new_zips) == 9, sorted(str(p) for p in new_zips)
    _verify_clean(tools, q.checkpoint)
    _placement_matches_spark(spark, q.checkpoint, 6, ["k"], operatorId=0)

    more = _rows(random.Random(32), 30, keys=30)
    q.write("in", more)
    q.run()
    totals: dict[str, tuple[int, int]] = {}
    for r in rows + more:
        s, c = totals.get(r["k"], (0, 0))
        totals[r["k"]] = (s + r["v"], c + 1)
    assert sorted(q.outputs[2]) == sorted((k, *totals[k]) for k in {r["k"] for r in more})

    # gc takes the failed attempt's stores as orphans (grace 0), and what stays is clean
    _settled_files(q.checkpoint)
    done = gc(tools, load(tools, cp), 1, 0, True)
    assert not done["errors"]
    orphaned = [
        d["file"]
        for st in done["stores"]
        for d in st["delete"]
        if d["file"].endswith(".zip") and d["reason"].get("status") == "orphan"
    ]
    # the failed attempt's three stores, at the repartition's version (batch 1's store version 2)
    assert len(orphaned) == 3 and all(f.startswith("2_") for f in orphaned), orphaned
    _verify_clean(tools, q.checkpoint)
    q.write("in", [{"k": "k1", "g": 0, "v": 5}])
    q.run()
    s, c = totals.get("k1", (0, 0))
    assert sorted(q.outputs[3]) == [("k1", s + 5, c + 1)]

    # 6 -> 3, a divisor: three tasks, each folding two old stores into one, spread over the executors
    out = rp.repartition(spark, cp, 3)
    assert len(out["tasks"]) == 3 and all(t["attempt"] == 0 for t in out["tasks"])
    executors = {t["executor"] for t in out["tasks"]}
    assert len(executors) >= 2 and "driver" not in executors, out["tasks"]
    _verify_clean(tools, q.checkpoint)
    q.write("in", [{"k": "k2", "g": 0, "v": 7}])
    q.run()
    s, c = totals.get("k2", (0, 0))
    assert sorted(q.outputs[5]) == [("k2", s + 7, c + 1)]

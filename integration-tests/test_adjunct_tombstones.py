"""Tombstone retention of adjunct tables (docs/adjunct-tables.md "Tombstone retention"), in a real Spark
(``local[2]``) with real RocksDB stores: a table created with ``tombstone_retention=R`` purges, in its
maintain tasks, the tombstones whose ordering is at or below the floor (the highest ordering of the record
the batch builds on, minus R), found through the stores' tombstone index; a late change at or below the floor
for a key the store holds nothing of is refused and counted in the version's record. The stores' own key
counts (``MaintainTasks.lastReport``: rows and tombstones, and of them tombstones, after each task's commit)
show the tombstones go; the readers give the documented answer throughout."""

from __future__ import annotations

import json

import pytest

from lineagestore import adjunct
from lineagestore.adjunct import AdjunctTableError
from test_adjunct_maintain_tasks import record, report
from test_adjunct_tables import CHANGE_SCHEMA, as_table, inspect_json

RETENTION = 100


def stored(spark, table, partitions: int = 1) -> tuple[int, int]:
    """(keys the last batch's stores hold: rows and tombstones, of them tombstones), summed over its tasks,
    one per partition (each changed by the batch)."""
    tasks = report(spark, table)
    assert len(tasks) == partitions, tasks
    return sum(t["storedKeys"] for t in tasks), sum(t["tombstones"] for t in tasks)


def latest_version(table) -> int:
    return max(int(p.name) for p in (table / "_adjunct" / "commits").iterdir() if p.name.isdigit())


@pytest.mark.parametrize("partitions", [None, 3])
def test_tombstones_past_the_bound_are_purged_and_late_changes_below_it_refused(spark, tmp_path, partitions):
    table = tmp_path / "table"

    def commit(batch_id, rows, **kw):
        df = spark.createDataFrame(rows, CHANGE_SCHEMA)
        return adjunct.maintain_batch(
            df, batch_id, str(table), ["id"], "seq", source="m", partitions=partitions, **kw
        )

    # every batch below changes keys 10..19 too, so each of the 3 partitions' tasks runs (a partition's
    # tombstones are purged by its own maintain task)
    def touch_all(seq):
        return [(k, "upsert", seq, f"v{seq}", float(k)) for k in range(10, 20)]

    first = [(k, "upsert", 1 + k, f"n{k}", float(k)) for k in range(21)]
    assert commit(0, first, tombstone_retention=RETENTION) == 1
    assert "tombstoneRetention=100" in (table / "_adjunct" / "table.properties").read_text()
    assert stored(spark, table, partitions or 1) == (21, 0)
    # deletes of keys 0..9 at orderings 100..109: ten tombstones, indexed
    assert commit(1, [(k, "delete", 100 + k, None, None) for k in range(10)] + touch_all(110)) == 2
    assert stored(spark, table, partitions or 1) == (21, 10)
    assert record(table, 2)["highestOrdering"] == "110"
    # floor of this batch: 110 - 100 = 10, below every tombstone: none purged; a late upsert of key 3 older
    # than its delete is ignored by its tombstone (not refused: the tombstone is there to say so)
    assert commit(2, [(3, "upsert", 50, "n3-late", 3.0)] + touch_all(300)) == 3
    rec = record(table, 3)
    assert (rec["tombstonesPurged"], rec["lateChangesRefused"], rec["highestOrdering"]) == ("0", "0", "300")
    assert stored(spark, table, partitions or 1) == (21, 10)
    # floor 300 - 100 = 200: all ten tombstones (orderings <= 109) are purged in this batch's tasks
    assert commit(3, touch_all(400)) == 4
    rec = record(table, 4)
    assert (rec["tombstonesPurged"], rec["lateChangesRefused"]) == ("10", "0")
    assert stored(spark, table, partitions or 1) == (11, 0)
    # floor 400 - 100 = 300. Refused (at or below it, their keys hold nothing): the late upsert of deleted key
    # 3 (older than its purged delete: refusing it keeps the documented answer, the key stays deleted) and
    # a new key 77 at ordering 250. Applied: key 78 above the floor, key 12's update (a live row compares
    # as always), key 4's delete at 350 (above the floor: a tombstone again).
    late = [
        (3, "upsert", 60, "n3-late", 3.0),
        (77, "upsert", 250, "n77", 7.7),
        (78, "upsert", 500, "n78", 7.8),
        (12, "upsert", 450, "n12-b", 1.2),
        (20, "delete", 290, None, None),  # at or below the floor, over an older live row: deleted outright
        (4, "delete", 350, None, None),  # a key with nothing stored, above the floor: a tombstone
    ] + [(k, "upsert", 460, f"v{k}", float(k)) for k in range(13, 20)]
    assert commit(4, late) == 5
    rec = record(table, 5)
    assert rec["lateChangesRefused"] == "2"
    assert rec["tombstonesPurged"] == "1"  # key 20's delete below the floor removed the key, no tombstone
    # keys 10..19 and 78 hold rows, key 4 a tombstone
    assert stored(spark, table, partitions or 1) == (12, 1)
    expected = {k: ("v400", float(k)) for k in [10, 11]}
    expected.update({k: (f"v{k}", float(k)) for k in range(13, 20)})
    expected[12] = ("n12-b", 1.2)
    expected[78] = ("n78", 7.8)
    assert as_table(adjunct.read(spark, str(table)).collect()) == expected
    # inspect shows the bound, the highest ordering (key 78's 500) and the next batch's floor
    assert inspect_json(str(table))["tombstones"] == {
        "retention": RETENTION,
        "highestOrdering": 500,
        "floor": 400,
    }
    # the lookup agrees (partitioned: events placed like the table)
    events = spark.createDataFrame([(k, k) for k in [3, 4, 11, 12, 20, 77, 78]], "event INT, id INT")
    if partitions:
        events = events.repartition(partitions, "id")
    rows = {r["id"]: r["name"] for r in adjunct.lookup(events, str(table)).collect()}
    assert rows == {3: None, 4: None, 11: "v400", 12: "n12-b", 20: None, 77: None, 78: "n78"}


def test_the_bound_is_kept_by_the_table_across_restarts_of_the_maintaining_query(spark, tmp_path):
    """A streaming maintain with ``tombstone_retention=5``, stopped and started again without it, keeps the
    table's bound: the second run's batches purge the first run's tombstones."""
    table = tmp_path / "table"
    changes_dir = tmp_path / "changes"
    changes_dir.mkdir()
    ckpt = str(tmp_path / "ckpt")

    def run(**kw):
        changes = spark.readStream.schema(CHANGE_SCHEMA).json(str(changes_dir))
        q = adjunct.maintain(changes, str(table), ["id"], "seq", checkpoint=ckpt, **kw)
        q.trigger(availableNow=True).start().awaitTermination()

    def write(name, rows):
        with open(changes_dir / name, "w") as f:
            for cid, op, seq, name_, score in rows:
                f.write(json.dumps({"id": cid, "op": op, "seq": seq, "name": name_, "score": score}) + "\n")

    write("1.json", [(1, "upsert", 1, "a", 1.0), (2, "upsert", 2, "b", 2.0)])
    run(tombstone_retention=5)
    write("2.json", [(1, "delete", 10, None, None)])
    run()
    assert stored(spark, table) == (2, 1)
    write("3.json", [(2, "upsert", 20, "b2", 2.5)])  # highest 20: the next batch's floor is 15
    run()
    write("4.json", [(2, "upsert", 21, "b3", 2.6), (1, "upsert", 9, "a-late", 1.1)])
    run(tombstone_retention=5)  # the same bound again: accepted
    last = record(table, latest_version(table))
    assert (last["tombstonesPurged"], last["lateChangesRefused"]) == ("1", "1")
    assert stored(spark, table) == (1, 0)
    assert as_table(adjunct.read(spark, str(table)).collect()) == {2: ("b3", 2.6)}
    assert "tombstoneRetention=5" in (table / "_adjunct" / "table.properties").read_text()


@pytest.mark.parametrize("bad", [-1, "100", 1.5, True])
def test_a_bad_bound_is_refused_by_name_before_anything_is_written(spark, tmp_path, bad):
    table = tmp_path / "table"
    df = spark.createDataFrame([(1, "upsert", 1, "a", 1.0)], CHANGE_SCHEMA)
    with pytest.raises(AdjunctTableError, match=r"tombstone_retention="):
        adjunct.maintain_batch(df, 0, str(table), ["id"], "seq", source="m", tombstone_retention=bad)
    with pytest.raises(AdjunctTableError, match=r"tombstone_retention="):
        adjunct.maintain(
            df, str(table), ["id"], "seq", checkpoint=str(tmp_path / "c"), tombstone_retention=bad
        )
    assert not table.exists()


def test_the_jvm_refuses_a_negative_bound_itself(spark, tmp_path):
    """The JVM entry point checks the bound too (a caller other than the Python wrapper)."""
    table = tmp_path / "table"
    df = spark.createDataFrame([(1, "upsert", 1, "a", 1.0)], CHANGE_SCHEMA)
    jvm = spark._jvm
    keys = jvm.java.util.ArrayList()
    keys.add("id")
    with pytest.raises(Exception, match=r"tombstone_retention=-3 is negative"):
        jvm.io.lineagestore.spark.adjunct.AdjunctMaintain.maintainBatch(
            df._jdf, 0, str(table), keys, "seq", "op", "m", 100, 0, jvm.java.lang.Long(-3)
        )
    assert not (table / "_adjunct" / "commits").exists()


def test_changing_the_bound_is_refused_naming_both_and_nothing_is_committed(spark, tmp_path):
    with_bound, without = tmp_path / "with", tmp_path / "without"
    df = spark.createDataFrame([(1, "upsert", 1, "a", 1.0)], CHANGE_SCHEMA)
    assert (
        adjunct.maintain_batch(df, 0, str(with_bound), ["id"], "seq", source="m", tombstone_retention=10) == 1
    )
    assert adjunct.maintain_batch(df, 0, str(without), ["id"], "seq", source="m") == 1
    with pytest.raises(AdjunctTableError, match=r"keeps tombstones for 10 .*tombstone_retention=20"):
        adjunct.maintain_batch(df, 1, str(with_bound), ["id"], "seq", source="m", tombstone_retention=20)
    with pytest.raises(
        AdjunctTableError, match=r"created without tombstone retention.*tombstone_retention=10"
    ):
        adjunct.maintain_batch(df, 1, str(without), ["id"], "seq", source="m", tombstone_retention=10)
    for t in (with_bound, without):
        assert latest_version(t) == 1
    # the table's own bound, or none, is accepted
    assert (
        adjunct.maintain_batch(df, 1, str(with_bound), ["id"], "seq", source="m", tombstone_retention=10) == 2
    )
    assert adjunct.maintain_batch(df, 2, str(with_bound), ["id"], "seq", source="m") == 3


def test_a_generation_leaves_no_tombstone_in_the_index(spark, tmp_path):
    """Publishing a generation over a table with retention deletes every key it lacks outright: the index of
    tombstones is emptied with them, and maintaining on afterwards purges and refuses as before."""
    table = tmp_path / "table"
    rows = [(k, "upsert", k, f"n{k}", float(k)) for k in range(5)] + [(9, "delete", 9, None, None)]
    adjunct.maintain_batch(
        spark.createDataFrame(rows, CHANGE_SCHEMA),
        0,
        str(table),
        ["id"],
        "seq",
        source="m",
        tombstone_retention=3,
    )
    assert stored(spark, table) == (6, 1)
    dataset = spark.createDataFrame([(1, "g1", 1.0), (2, "g2", 2.0)], "id INT, name STRING, score DOUBLE")
    adjunct.publish(dataset, str(table), ["id"], 1, source="g")
    assert stored(spark, table) == (2, 0)
    # the highest ordering (9) is kept from before the generation: floor 6, so key 9's late upsert at 5 is
    # refused and key 7's at 8 applied
    late = [(9, "upsert", 5, "late", 0.0), (7, "upsert", 8, "n7", 7.0)]
    adjunct.maintain_batch(
        spark.createDataFrame(late, CHANGE_SCHEMA), 1, str(table), ["id"], "seq", source="m"
    )
    assert as_table(adjunct.read(spark, str(table)).collect()) == {
        1: ("g1", 1.0),
        2: ("g2", 2.0),
        7: ("n7", 7.0),
    }
    last = record(table, latest_version(table))
    assert last["lateChangesRefused"] == "1"

"""Partitioned adjunct tables (docs/adjunct-tables.md "Partitioned mode") end to end.

A table maintained with ``partitions=N`` keeps one store per partition, each key in the partition Spark's
shuffle sends it to; a lookup of events partitioned like the table (hash-partitioned on the key columns into N)
reads in task p only partition p's store. Checked against the plain-Python oracle of test_adjunct_tables.py
(same changes, same rule), against Spark's own ``repartition(N, keys)`` for placement, and for the error when
the events are partitioned otherwise. Shares the session's Spark; small data.
"""

from __future__ import annotations

import pytest
from pyspark.errors import StreamingQueryException

from lineagestore import adjunct, cli
from lineagestore.adjunct import AdjunctTableError
from lineagestore.testing.cli import hadoop_conf_args, run_cli
from test_adjunct_tables import (
    CHANGE_SCHEMA,
    EVENT_SCHEMA,
    ROUNDS,
    SNAPSHOT_INTERVAL_KEY,
    Oracle,
    as_table,
    inspect_json,
    run_once,
    session_conf,
    write_json,
)

N = 3


def sparks_partition_of(spark, keys: list[int], n: int) -> dict[int, int]:
    """Where Spark's own shuffle (``repartition(n, id)``) puts each key."""
    df = spark.createDataFrame([(k,) for k in keys], "id INT").repartition(n, "id")
    return dict(df.rdd.mapPartitionsWithIndex(lambda p, rows: ((r.id, p) for r in rows)).collect())


def test_partitioned_maintain_and_enrich_streams_against_oracle(spark, tmp_path):
    """Streams on both sides, each restarted every round (availableNow runs on their checkpoints), an enriching
    batch killed after its lookup and re-run at its recorded version; every event enriched as the oracle says
    for that version."""
    table = str(tmp_path / "table")
    changes_dir, events_dir = tmp_path / "changes", tmp_path / "events"
    changes_dir.mkdir()
    events_dir.mkdir()
    changes = spark.readStream.schema(CHANGE_SCHEMA).json(str(changes_dir))
    # a stateless streaming shuffle: the foreachBatch DataFrame's plan no longer says how it is partitioned,
    # so the per-event check is what guards the lookup here
    events = spark.readStream.schema(EVENT_SCHEMA).json(str(events_dir)).repartition(N, "id")
    oracle = Oracle()
    seen: dict[int, list] = {}
    enrich_ckpt = str(tmp_path / "enrich-ckpt")
    maintain_ckpt = str(tmp_path / "maintain-ckpt")

    def keep(df, batch_id):
        seen[batch_id] = [r.asDict() for r in df.collect()]

    def killed_after_lookup(df, batch_id):
        df.collect()
        raise RuntimeError("killed before the batch committed")

    keys = [0, 1, 2, 3, 4, 5, 6, 99, 1000, None]
    version = 0
    for r, round_changes in enumerate(ROUNDS, start=1):
        write_json(changes_dir, f"r{r}", round_changes, ["id", "op", "seq", "name", "score"])
        run_once(adjunct.maintain(changes, table, ["id"], "seq", checkpoint=maintain_ckpt, partitions=N))
        version += 1
        oracle.commit(version, round_changes)
        assert as_table(adjunct.read(spark, table).collect()) == oracle.versions[version]
        write_json(events_dir, f"e{r}", [(r * 100 + i, k) for i, k in enumerate(keys)], ["event", "id"])
        if r == 2:  # the enriching query dies after its lookup; the table moves on while it is down
            q = (
                adjunct.enrich(events, table, checkpoint=enrich_ckpt, process=killed_after_lookup)
                .trigger(availableNow=True)
                .start()
            )
            with pytest.raises(StreamingQueryException, match="killed before the batch committed"):
                q.awaitTermination(120)
            extra = [(1, "upsert", 1000, "n1-while-down", 0.5)]
            df = spark.createDataFrame(extra, CHANGE_SCHEMA)
            version += 1
            assert adjunct.maintain_batch(df, 100, table, ["id"], "seq", source="other") == version
            oracle.commit(version, extra)
        run_once(adjunct.enrich(events, table, checkpoint=enrich_ckpt, process=keep))

    assert sorted(seen) == [0, 1, 2]
    for batch_id, rows in seen.items():
        v = adjunct.version_for_batch(spark, table, enrich_ckpt, batch_id)
        # batch 1 was first run before the extra version: its re-run keeps the version it recorded then
        assert v == [1, 2, 4][batch_id], (batch_id, v)
        assert len(rows) == len(keys)
        for r in rows:
            assert (r["name"], r["score"]) == oracle.versions[v].get(r["id"], (None, None)), (batch_id, r)
    for version, state in oracle.versions.items():  # every version stays readable as it was committed
        assert as_table(adjunct.read(spark, table, version).collect()) == state

    report = inspect_json(table)
    assert report["partitions"] == N
    assert [v["version"] for v in report["versions"]] == [1, 2, 3, 4]
    # one replica per partition in this JVM, each at the latest version (it holds that partition's store)
    assert sorted(r["partition"] for r in report["replicas"]) == list(range(N)), report["replicas"]
    assert all(r["lag"] == 0 for r in report["replicas"]), report["replicas"]


def test_inspect_shows_each_partitions_checkpoint_and_how_far_its_replicas_are_behind(spark, tmp_path):
    """``inspect`` on a partitioned table: per partition, the store checkpoint the latest record names and the
    lag of its replicas (table versions and the store's own), as of their last loads; a partition no lookup
    has read says so."""
    table = str(tmp_path / "table")
    keys = list(range(30))

    def commit(batch_id, seq):
        rows = [(k, "upsert", seq, f"n{k}-{seq}", float(k)) for k in keys]
        adjunct.maintain_batch(
            spark.createDataFrame(rows, CHANGE_SCHEMA), batch_id, table, ["id"], "seq", partitions=N
        )

    def lookup(ks):
        events = spark.createDataFrame([(k, k) for k in ks], EVENT_SCHEMA).repartition(N, "id")
        return {r["id"]: r["name"] for r in adjunct.lookup(events, table).collect()}

    commit(0, 1)
    states = inspect_json(table)["partitionStates"]
    assert [s["partition"] for s in states] == list(range(N))
    assert all(s["replicas"] == 0 and s["maxLag"] is None and s["storeVersion"] == 1 for s in states), states
    assert lookup(keys) == {k: f"n{k}-1" for k in keys}  # every partition's replica loads version 1
    commit(1, 2)
    commit(2, 3)
    assert lookup([7]) == {7: "n7-3"}  # only key 7's partition's replica moves to version 3
    report = inspect_json(table)
    moved = {r["partition"] for r in report["replicas"] if r["lag"] == 0}
    assert len(moved) == 1, report["replicas"]
    states = {s["partition"]: s for s in report["partitionStates"]}
    commits = {v["version"]: v for v in report["versions"]}
    assert set(commits) == {1, 2, 3}
    for p, s in states.items():
        # every partition changed at every version: its store is at version 3, named by table version 3 only
        assert (s["storeVersion"], s["since"], s["replicas"]) == (3, 3, 1), s
        assert s["checkpoint"].startswith("3_"), s
        assert (s["maxLag"], s["maxStoreLag"]) == ((0, 0) if p in moved else (2, 2)), (p, s)
    result = run_cli(["inspect", table])
    assert result.code == 0, result.err
    text = " ".join(result.out.split())  # the page wraps long lines
    assert "1 replica(s), all at the latest version" in text, text
    assert "1 replica(s), the furthest 2 table version(s) (2 of its store's) behind" in text, text
    assert "not known offline" in text, text


def test_placement_is_sparks_shuffle_and_tasks_open_only_their_partition(spark, tmp_path):
    table = str(tmp_path / "table")
    n = 4
    keys = list(range(40))
    rows = [(k, "upsert", 1, f"n{k}", float(k)) for k in keys]
    adjunct.maintain_batch(spark.createDataFrame(rows, CHANGE_SCHEMA), 0, table, ["id"], "seq", partitions=n)
    spark_says = sparks_partition_of(spark, keys, n)

    # events with keys of one partition only: the other tasks get no events and load no replica (the table is
    # new: nothing read it yet)
    p = spark_says[7]
    mine = [k for k in keys if spark_says[k] == p]
    events = spark.createDataFrame([(i, k) for i, k in enumerate(mine)], EVENT_SCHEMA).repartition(n, "id")
    found = adjunct.lookup(events, table).collect()
    assert {r["id"]: r["name"] for r in found} == {k: f"n{k}" for k in mine}
    for q in range(n):
        stats = adjunct.local_replica_stats(spark, table, q)
        assert (stats.get("version") == 1) if q == p else stats == {}, (q, stats)

    # read runs one task per partition, task p reading store p: the keys each store holds
    stored = dict(
        adjunct.read(spark, table).rdd.mapPartitionsWithIndex(lambda p, rs: ((r.id, p) for r in rs)).collect()
    )
    assert stored == spark_says
    assert len(set(stored.values())) == n  # 40 keys: every partition holds some (a real test of placement)


def test_events_not_partitioned_like_the_table_are_refused_and_nothing_moves(spark, tmp_path):
    table = str(tmp_path / "table")
    src = str(tmp_path / "m")
    rows = [(k, "upsert", 1, f"n{k}", 1.0) for k in range(20)]
    adjunct.maintain_batch(
        spark.createDataFrame(rows, CHANGE_SCHEMA), 0, table, ["id"], "seq", source=src, partitions=4
    )
    before = adjunct.versions(spark, table)
    events = spark.createDataFrame([(i, i) for i in range(20)], EVENT_SCHEMA)

    def refused(df, match, error=AdjunctTableError):
        with pytest.raises(error, match=match) as e:
            adjunct.lookup(df, table).collect()
        text = str(e.value)
        assert table in text and "events.repartition(4, 'id')" in text and "without partitions" in text, text

    # what the plan says: refused before anything runs
    refused(events.repartition(3, "id"), r"hash-partitioned on \(id\) into 3 partitions")
    refused(events.repartition(4, "event"), r"hash-partitioned on \(event\) into 4 partitions")
    refused(events.repartition(4), "RoundRobinPartitioning")
    # the plan does not say, and the partition count is not the table's
    refused(
        spark.range(0, 20, 1, 2).selectExpr("cast(id as int) event", "cast(id as int) id"),
        "are in 2 partitions",
    )
    # the plan does not say, the count is the table's, but the events are not placed like the keys: per event
    unplaced = spark.range(0, 20, 1, 4).selectExpr("cast(id as int) event", "cast(id as int) id")
    # (a task fails with it: Spark's job error carries the message)
    refused(
        unplaced,
        r"an event with key \(\d+\) is in partition \d, where Spark's hash .* places it in \d",
        error=Exception,
    )
    # an aggregation's shuffle on the key columns into 4 partitions is partitioned like the table (adaptive
    # execution would coalesce this tiny shuffle: a batch lookup then fails naming that; streaming runs a
    # stateful operator's shuffle without coalescing)
    confs = {"spark.sql.shuffle.partitions": "4", "spark.sql.adaptive.coalescePartitions.enabled": "false"}
    saved = {k: spark.conf.get(k) for k in confs}
    spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "true")
    spark.conf.set("spark.sql.shuffle.partitions", "4")
    try:
        refused(events.groupBy("id").count(), "adaptive query execution coalesced")
        for k, v in confs.items():
            spark.conf.set(k, v)
        counted = adjunct.lookup(events.groupBy("id").count(), table).collect()
        assert {r["id"]: r["name"] for r in counted} == {k: f"n{k}" for k in range(20)}
    finally:
        for k, v in saved.items():
            spark.conf.set(k, v)

    with pytest.raises(AdjunctTableError, match="has 4 partition"):
        adjunct.maintain_batch(
            spark.createDataFrame(rows, CHANGE_SCHEMA), 1, table, ["id"], "seq", source=src, partitions=2
        )
    with pytest.raises(AdjunctTableError, match="partitions must be positive"):
        adjunct.maintain_batch(
            spark.createDataFrame(rows, CHANGE_SCHEMA), 1, table, ["id"], "seq", source=src, partitions=0
        )
    assert adjunct.versions(spark, table) == before


def test_partitioned_rerun_after_a_crash_before_the_record_commits_over_the_same_parents(spark, tmp_path):
    """A crash after some partitions' deltas but before the table record: the re-run commits every changed
    partition again over the parent the last record names; no reader loads the orphans."""
    table = tmp_path / "table"
    src = str(tmp_path / "m")

    def commit(batch_id, rows):
        df = spark.createDataFrame(rows, CHANGE_SCHEMA)
        return adjunct.maintain_batch(df, batch_id, str(table), ["id"], "seq", source=src, partitions=N)

    assert commit(0, [(k, "upsert", 1, f"a{k}", 1.0) for k in range(12)]) == 1
    assert commit(1, [(k, "upsert", 2, "lost", 2.0) for k in range(12)]) == 2
    (table / "_adjunct" / "commits" / "2").unlink()  # the crash: version 2's record was never written
    (table / "_adjunct" / "commits" / ".2.crc").unlink(missing_ok=True)
    orphans = sorted(str(f.relative_to(table)) for f in table.glob("store/*/2_*.delta"))
    assert len(orphans) == N
    assert commit(1, [(0, "upsert", 3, "c", 3.0)]) == 2
    assert len(list(table.glob("store/*/2_*.delta"))) == N + 1  # the one partition changed, over its parent
    expected = {k: (f"a{k}", 1.0) for k in range(12)} | {0: ("c", 3.0)}
    assert as_table(adjunct.read(spark, str(table)).collect()) == expected
    events = spark.createDataFrame([(k, k) for k in range(12)], EVENT_SCHEMA).repartition(N, "id")
    assert {
        r["id"]: (r["name"], r["score"]) for r in adjunct.lookup(events, str(table)).collect()
    } == expected


def test_partitioned_s3a_table(spark, s3_server, s3_bucket, capsys):
    table = f"s3a://{s3_bucket}/tables/partitioned"
    oracle = Oracle()
    for version, round_changes in enumerate(ROUNDS[:2], start=1):
        df = spark.createDataFrame(round_changes, CHANGE_SCHEMA)
        assert (
            adjunct.maintain_batch(df, version - 1, table, ["id"], "seq", source="s3", partitions=N)
            == version
        )
        oracle.commit(version, round_changes)
    keys = [1, 2, 4, 99, 7]
    events = spark.createDataFrame(list(enumerate(keys)), EVENT_SCHEMA).repartition(N, "id")
    for version in (1, 2):
        rows = adjunct.lookup(events, table, version=version).collect()
        assert {r["id"]: (r["name"], r["score"]) for r in rows} == {
            k: oracle.versions[version].get(k, (None, None)) for k in keys
        }
    hadoop_args = hadoop_conf_args(s3_server.hadoop_conf(s3_bucket))
    assert cli.main([*hadoop_args, "inspect", table]) == 0
    out = capsys.readouterr().out
    assert f"({N} partitions)" in out and "versions       1..2 (2 kept)" in out, out


def test_enrich_after_a_stateful_operator_shuffled_like_the_table(spark, tmp_path):
    """A streaming aggregation on the key column with spark.sql.shuffle.partitions = N: its foreachBatch
    DataFrame keeps the operator's partitioning, so the plan says the events are partitioned like the table."""
    table = str(tmp_path / "table")
    rows = [(k, "upsert", 1, f"n{k}", float(k)) for k in range(12)]
    adjunct.maintain_batch(spark.createDataFrame(rows, CHANGE_SCHEMA), 0, table, ["id"], "seq", partitions=N)
    events_dir = tmp_path / "events"
    write_json(events_dir, "e0", [(i, k % 14) for i, k in enumerate(range(30))], ["event", "id"])
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(N))
    seen: list = []
    try:
        counts = spark.readStream.schema(EVENT_SCHEMA).json(str(events_dir)).groupBy("id").count()
        writer = adjunct.enrich(
            counts, table, checkpoint=str(tmp_path / "ckpt"), process=lambda df, b: seen.extend(df.collect())
        )
        run_once(writer.outputMode("update"))
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    assert sorted((r["id"], r["count"], r["name"]) for r in seen) == [
        (k, 3 if k < 2 else 2, f"n{k}" if k < 12 else None) for k in range(14)
    ]


def test_each_partition_snapshots_on_its_own_phase(spark, tmp_path):
    """A partitioned table's stores freeze on their partitions' phases of the snapshot interval, as a query's
    stores do: with a snapshot every 3 versions, partition p's store snapshots at versions p, p + 3, ..., so no
    maintain uploads every partition's snapshot at once (they all froze at 3 and 6 before)."""
    table = tmp_path / "table"
    with session_conf(spark, SNAPSHOT_INTERVAL_KEY, "3"):  # Spark's own key, as for a query's stores
        for b in range(6):
            rows = [(k, "upsert", b, f"n{b}", float(b)) for k in range(12)]
            df = spark.createDataFrame(rows, CHANGE_SCHEMA)
            assert adjunct.maintain_batch(df, b, str(table), ["id"], "seq", source="m", partitions=N) == b + 1
    for p in range(N):
        zips = sorted(int(f.name.split("_")[0]) for f in (table / "store" / str(p)).glob("*.zip"))
        assert zips == [v for v in range(1, 7) if (v - p) % 3 == 0], (p, zips)
    assert as_table(adjunct.read(spark, str(table)).collect()) == {k: ("n5", 5.0) for k in range(12)}

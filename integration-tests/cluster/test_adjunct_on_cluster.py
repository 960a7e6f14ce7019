"""Adjunct tables on the multi-executor cluster (issue 19): lookups run on three executor JVMs, each holding
one replica of the table (shared by its tasks), every event enriched as the plain-Python oracle says for the
version its lookup was given, and a version change downloads only the deltas each replica lacks. The
replicas' markers make the same facts visible to ``lineagestore inspect`` (their lag behind the latest)."""

from __future__ import annotations

from lineagestore import adjunct
from test_adjunct_tables import CHANGE_SCHEMA, EVENT_SCHEMA, ROUNDS, Oracle
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
    events = spark.createDataFrame(
        [(i, keys[i % len(keys)]) for i in range(10 * PARTITIONS)], EVENT_SCHEMA
    ).repartition(PARTITIONS)
    events.cache().count()
    hosts = set(cluster.hosts)
    for version, round_changes in enumerate(ROUNDS, start=1):
        df = spark.createDataFrame(round_changes, CHANGE_SCHEMA)
        assert adjunct.maintain_batch(df, version - 1, table, ["id"], "seq", source="cluster-test") == version
        oracle.commit(version, round_changes)
        if version == 2:
            # the replicas still hold version 1: inspect shows them one version behind
            assert {r["replica"].split("@")[1]: r["lag"] for r in _inspect(table)["replicas"]} == {
                h: 1 for h in hosts
            }
        rows = adjunct.lookup(events, table, version=version).collect()
        assert len(rows) == 10 * PARTITIONS
        for r in rows:
            assert (r["name"], r["score"]) == oracle.versions[version].get(r["id"], (None, None)), (
                version,
                r,
            )

        replicas = _inspect(table)["replicas"]
        # one replica per executor (not per task), on every executor, each at the version its lookup was given
        assert sorted(r["replica"].split("@")[1] for r in replicas) == sorted(hosts), replicas
        assert all(r["version"] == version and r["lag"] == 0 for r in replicas), replicas
        for host in hosts:
            assert len(_replica_dirs(cluster, host, table)) == 1, (host, _replica_dirs(cluster, host, table))
        # moving to a new version replayed the one delta each replica lacked, downloading no snapshot files
        assert all(r["deltasReplayed"] == version and r["bytesDownloaded"] == 0 for r in replicas), replicas
    events.unpersist()

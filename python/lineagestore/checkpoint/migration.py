"""``migrate``: move a stopped query from Spark's HDFS or RocksDB state store provider (checkpoint
format version 1 or 2) onto lineagestore, keeping its state, optionally with a new partition count.

Restarting such a checkpoint under :func:`lineagestore.configure` is not enough: Spark restores the provider
a checkpoint started with from its offset log (and only logs a warning), so the query would silently stay
on the old provider. Like ``repartition``, this records the move as one more batch ``B + 1``:

1. every store of every operator is read with Spark's own state data source at the last committed batch
   ``B`` (it reads every provider's format), encoded with Spark's state encoders and written through
   lineagestore's store at version ``B + 2`` (``StateMigration`` in the Spark glue);
2. ``offsets/B+1``: ``offsets/B`` with lineagestore as the provider, checkpoint format version 2 and the
   partition count;
3. ``commits/B+1`` last, naming the new stores' unique IDs;
4. with ``file_sink``, only then, the entry of batch ``B + 1`` in the log of the query's file sink
   (:mod:`.file_sink`; run again on the migrated checkpoint, it writes only what is missing).

Nothing of the old provider's files is changed or deleted. It needs a SparkSession (the data source is
Spark's); the rows pass through the driver.
"""

from __future__ import annotations

import json
from typing import Any

from lineagestore._session import PROVIDER_CLASS
from lineagestore.checkpoint import file_sink as sink_log
from lineagestore.checkpoint.errors import CheckpointError
from lineagestore.checkpoint.model import to_uri
from lineagestore.checkpoint.progress import NO_PROGRESS, Progress
from lineagestore.checkpoint.spark_files import (
    DEFAULT_STORE,
    FORMAT_KEY,
    PROVIDER_KEY,
    SHUFFLE_PARTITIONS,
    SPARK_DEFAULT_PROVIDER,
    TWS_ENCODING_KEY,
    batch_ids,
    commit_unique_ids,
    commit_with_ids,
    numbered_dirs,
    offset_conf,
    offsets_with_conf,
    operator_info,
    operator_path,
    partition_key_columns,
    schema_jsons,
    store_path,
    tws_info,
)
from lineagestore.jvm import connect

SPARK_PROVIDERS = (
    "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    SPARK_DEFAULT_PROVIDER,
)


def migratable(files: Any, path: str, uri: str) -> tuple[int, dict[str, str], str]:
    """The last committed batch, its offset entry's SQL settings and the provider they record, of a checkpoint
    ``migrate`` can move; ``CheckpointError`` saying why not. ``files``: ``JvmTools``, or ``LocalFiles`` for a
    local checkpoint before any JVM starts (``lineagestore migrate`` refuses then without starting Spark)."""
    commits, offsets = batch_ids(files, f"{uri}/commits"), batch_ids(files, f"{uri}/offsets")
    if not commits:
        raise CheckpointError(f"{path} has no committed batch: start the query on lineagestore instead")
    last = commits[-1]
    if offsets and offsets[-1] > last:
        raise CheckpointError(
            f"{path}: batch {offsets[-1]} has an offset entry but no commit: a query is running it, or one "
            "stopped mid-batch. Stop the query (or run it once to finish the batch) and migrate again"
        )
    conf = offset_conf(files, f"{uri}/offsets/{last}")
    provider = conf.get(PROVIDER_KEY, SPARK_PROVIDERS[1])  # Spark's default when none is recorded
    if provider == PROVIDER_CLASS:
        raise CheckpointError(
            f"{path} already runs on lineagestore; use `lineagestore repartition` (or, to write the missing "
            "entries of the query's file sink log after a migrate, give --file-sink)"
        )
    if provider not in SPARK_PROVIDERS:
        raise CheckpointError(
            f"{path} was written by {provider}: migrate reads Spark's HDFS and RocksDB providers only"
        )
    return last, conf, provider


def migrated_already(files: Any, uri: str) -> int | None:
    """The last committed batch if it runs on lineagestore already (a migration done before, whose file sink
    may still lack its entry), else None. ``files``: as for :func:`migratable`."""
    commits = batch_ids(files, f"{uri}/commits")
    if not commits:
        return None
    provider = offset_conf(files, f"{uri}/offsets/{commits[-1]}").get(PROVIDER_KEY)
    return commits[-1] if provider == PROVIDER_CLASS else None


def migrate(
    spark: Any,
    path: str,
    partitions: int | None = None,
    progress: Progress = NO_PROGRESS,
    file_sink: str | None = None,
    file_sink_compact_interval: int = sink_log.SPARK_DEFAULT_COMPACT_INTERVAL,
) -> dict[str, Any]:
    """Migrate the stopped query at ``path`` onto lineagestore (see the module doc). ``file_sink``: the
    ``path`` of the query's Spark file sink, whose log then gets the entry of the new batch
    (``file_sink_compact_interval``: the query's ``spark.sql.streaming.fileSink.log.compactInterval``); on a
    checkpoint migrated already, only the sink's missing entries are written."""
    if partitions is not None and partitions <= 0:
        raise CheckpointError(f"partitions must be at least 1, got {partitions}")
    uri = to_uri(path)
    with connect(in_session="ignore") as tools:
        done = migrated_already(tools, uri) if file_sink is not None else None
        if done is not None:
            return {
                "checkpoint": uri,
                "lastBatch": done,
                "alreadyDone": True,
                "fileSink": sink_log.catch_up(tools, uri, file_sink, file_sink_compact_interval),
            }
        last, conf, provider = migratable(tools, path, uri)
        old_n = int(conf.get(SHUFFLE_PARTITIONS, "0"))
        commit_ids = commit_unique_ids(tools, uri, last)
        # format version 2 shows in the commit log's unique IDs (the offset log does not always record it)
        format_version = "2" if commit_ids else "1"
        n = partitions or old_n
        glue = spark._jvm.org.apache.spark.sql.execution.streaming.state.lineagestore
        migration = glue.StateMigration
        g = tools.guarded
        # every store is added to one Spark job (a task per group of new partitions), then run at once
        job = g(glue.RepartitionJob.builder, n, False)
        added: list[tuple[int, str]] = []  # (operator, store name) in the order the job reports them
        operators = numbered_dirs(tools, f"{uri}/state")
        infos_of: dict[int, dict[str, dict]] = {}
        tws_of = {op: tws_info(tools, f"{uri}/{operator_path(op)}", last) for op in operators}
        for op in operators:
            if tws_of[op] is not None:
                if provider != SPARK_PROVIDERS[0]:
                    raise CheckpointError(
                        f"{uri}/{operator_path(op)} is a transformWithState operator on {provider}: Spark runs "
                        "transformWithState on its RocksDB provider only; the checkpoint is inconsistent"
                    )
                encoding = conf.get(TWS_ENCODING_KEY, "unsaferow")
                if encoding.lower() != "unsaferow":
                    raise CheckpointError(
                        f"{uri}/{operator_path(op)} is a transformWithState operator whose state is encoded with "
                        f"{TWS_ENCODING_KEY}={encoding}: migrate moves the unsaferow encoding only; start the "
                        "query on lineagestore with a new checkpoint location"
                    )
                infos_of[op] = {DEFAULT_STORE: {}}  # one store; its families come from the state schema file
                continue
            infos_of[op] = operator_info(tools, f"{uri}/{operator_path(op)}")
            if not infos_of[op]:
                raise CheckpointError(
                    f"{uri}/{operator_path(op)}/_metadata/metadata is missing: the store names are unknown"
                )
        for op in operators:
            op_uri = f"{uri}/{operator_path(op)}"
            tws = tws_of[op]
            old_ids = (commit_ids.get(str(op)) or []) if format_version == "2" else []
            if tws is not None:
                g(
                    migration.migrateTwsStore,
                    job,
                    spark._jsparkSession,
                    uri,
                    op,
                    DEFAULT_STORE,
                    last,
                    provider,
                    format_version,
                    tws.operator_name,
                    tws.schema_file,
                    tws.properties,
                    old_n,
                    "\n".join(p[0] for p in old_ids),
                    n,
                    n == old_n,
                    op_uri,
                )
                added.append((op, DEFAULT_STORE))
                continue
            infos = infos_of[op]
            for store_idx, (name, info) in enumerate(infos.items()):
                key_json, value_json = schema_jsons(
                    tools, f"{uri}/{store_path(op, 0, name)}/_metadata/schema"
                )
                prefix = int(info.get("numColsPrefixKey", 0))
                part_cols = partition_key_columns(name, len(json.loads(key_json)["fields"]), prefix)
                g(
                    migration.migrateStore,
                    job,
                    spark._jsparkSession,
                    uri,
                    op,
                    name,
                    last,
                    provider,
                    format_version,
                    key_json,
                    value_json,
                    prefix,
                    part_cols,
                    int(info.get("numPartitions", old_n)),
                    "\n".join(ids_of_part[store_idx] for ids_of_part in old_ids),
                    n,
                    n == old_n,
                    op_uri,
                )
                added.append((op, name))
        progress.start("migrate (Spark job)", 1)
        out = json.loads(g(job.run, spark._jsparkSession, None))
        progress.step(f"{len(added)} stores, {len(out['tasks'])} tasks")
        progress.finish()
        ids: dict[str, list[list[str]]] = {}
        rows = 0
        for (op, _name), store_out in zip(added, out["stores"], strict=True):
            rows += store_out["rowsRead"]
            per_part = ids.setdefault(str(op), [[] for _ in range(n)])
            for p, uid in enumerate(store_out["uniqueIds"]):
                per_part[p].append(uid)
        conf_after = {PROVIDER_KEY: PROVIDER_CLASS, FORMAT_KEY: "2", SHUFFLE_PARTITIONS: str(n)}
        tools.write_text(
            f"{uri}/offsets/{last + 1}",
            offsets_with_conf(tools, f"{uri}/offsets/{last}", conf_after, rewrite="migrate"),
            False,
        )
        # format version 2's commit log entry (the unique IDs), whatever version the old one had
        tools.write_text(
            f"{uri}/commits/{last + 1}", commit_with_ids(tools, f"{uri}/commits/{last}", ids, "v2"), False
        )
        # only after the commit: see the module doc of file_sink
        sink = (
            sink_log.catch_up(tools, uri, file_sink, file_sink_compact_interval)
            if file_sink is not None
            else None
        )
    return {
        "checkpoint": uri,
        "from": provider,
        "lastBatch": last,
        "newBatch": last + 1,
        "oldPartitions": old_n,
        "newPartitions": n,
        "rowsMoved": rows,
        "tasks": out["tasks"],
        "fileSink": sink,
    }

"""Adjunct tables: a change stream kept as a versioned, read-only key-value table (docs/adjunct-tables.md).

Every function here calls the JVM operators of ``io.lineagestore.spark.adjunct`` through py4j; no Python runs
per row.

* :func:`maintain` keeps a table from a streaming DataFrame of changes (one committed version per batch), in
  one store or ``partitions`` stores placed like Spark's shuffle;
* :func:`publish` (:func:`publish_stream`) replaces the table's content with a bounded dataset, a new
  generation readers switch to atomically;
* :func:`lookup` enriches a (batch) DataFrame with the table's row per key, left-join semantics;
* :func:`enrich` does it for a streaming DataFrame, each micro-batch at one recorded version, optionally
  holding its first batch until the maintaining query has :func:`caught_up`;
* :func:`read` and :func:`versions` show the table.

After the DataFrame, the path and (where a function has them) the key and ordering columns, every argument is
keyword-only: most are strings, and one passed in another's place would be taken without an error.
docs/adjunct-tables.md "Python signatures" lists them (checked by python/tests/test_docs_signatures.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from lineagestore._session import check_checkpoint_location
from lineagestore.jvm.errors import translated

_PKG = "io.lineagestore.spark.adjunct"


class AdjunctTableError(ValueError):
    """Bad input to an adjunct-table call; nothing committed was touched. The message says what to do."""


def _jvm_call(body: Callable[[], Any]) -> Any:
    return translated(body, {f"{_PKG}.AdjunctTableException": AdjunctTableError})


def _obj(spark: Any, name: str) -> Any:
    return getattr(spark._jvm.io.lineagestore.spark.adjunct, name)


def _java_list(spark: Any, items: Sequence[str]) -> Any:
    out = spark._jvm.java.util.ArrayList()
    for i in items:
        out.add(i)
    return out


def maintain_batch(
    changes: Any,
    batch_id: int,
    path: str,
    keys: Sequence[str],
    ordering: str,
    *,
    op: str = "op",
    source: str = "",
    retain_versions: int = 100,
    partitions: int | None = None,
    tombstone_retention: int | None = None,
) -> int:
    """Applies one batch of changes to the table at ``path`` and commits it; returns the table version.

    A re-run of a batch (same ``source`` and ``batch_id``) already committed does nothing. ``partitions``,
    ``tombstone_retention``: see :func:`maintain`.
    """
    spark = changes.sparkSession
    n = 0 if partitions is None else partitions
    if n < 0 or (partitions is not None and n == 0):
        raise AdjunctTableError(f"adjunct table {path}: partitions must be positive, not {partitions}")
    retention = _tombstone_retention(path, tombstone_retention)
    return _jvm_call(
        lambda: _obj(spark, "AdjunctMaintain").maintainBatch(
            changes._jdf,
            batch_id,
            path,
            _java_list(spark, keys),
            ordering,
            op,
            source,
            retain_versions,
            n,
            retention,
        )
    )


def _tombstone_retention(path: str, value: Any) -> Any:
    """``tombstone_retention`` checked before the JVM sees it (a whole number of ordering units, or None)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise AdjunctTableError(
            f"adjunct table {path}: tombstone_retention={value!r} is not a whole number; pass how many ordering "
            "units behind the highest ordering value a deleted key's tombstone is kept (an int >= 0), or None"
        )
    if value < 0:
        raise AdjunctTableError(
            f"adjunct table {path}: tombstone_retention={value} is negative; pass a number of ordering units "
            ">= 0, or None (tombstones kept for ever)"
        )
    return value


def maintain(
    changes: Any,
    path: str,
    keys: Sequence[str],
    ordering: str,
    *,
    checkpoint: str,
    op: str = "op",
    retain_versions: int = 100,
    partitions: int | None = None,
    tombstone_retention: int | None = None,
) -> Any:
    """A ``DataStreamWriter`` keeping the adjunct table at ``path`` from the streaming DataFrame ``changes``.

    ``changes`` has the key columns, an ``op`` column (``upsert``/``insert``/``update`` or ``delete``), an
    integral ``ordering`` column (a sequence number or commit time; the newest change per key wins, a late
    older one is ignored) and the value columns (every other column). Add a trigger and ``start()`` it.

    ``partitions``: a new table's number of partitions (default 1: one store, broadcast lookup). With N > 1
    each key lives in the partition Spark's shuffle sends it to (``repartition(N, *keys)``), one store per
    partition, and lookups are partitioned: events hash-partitioned on the key columns into N read only
    their partition's store. An existing table keeps its own (pass none, or the same).

    ``tombstone_retention``: a new table's bound on deleted keys' tombstones, in units of ``ordering``
    (default None: kept for ever). A tombstone whose ordering is at least this far behind the highest ordering
    value maintained is purged; a later change at or below that floor for a key the table holds nothing of is
    refused (counted in the version's record), as it could bring a deleted key back. Fixed when the table is
    created (docs/adjunct-tables.md "Tombstone retention").
    """
    retention = _tombstone_retention(path, tombstone_retention)

    def batch(df: Any, batch_id: int) -> None:
        maintain_batch(
            df,
            batch_id,
            path,
            keys,
            ordering,
            op=op,
            source=checkpoint,
            retain_versions=retain_versions,
            partitions=partitions,
            tombstone_retention=retention,
        )

    check_checkpoint_location(changes.sparkSession, checkpoint)
    return changes.writeStream.option("checkpointLocation", checkpoint).foreachBatch(batch)


def publish(
    dataset: Any,
    path: str,
    keys: Sequence[str],
    generation: int,
    *,
    source: str = "",
    retain_versions: int = 100,
    partitions: int | None = None,
) -> int:
    """Publishes the batch DataFrame ``dataset`` (key and value columns, one row per key: a daily file, a
    model's lookup table) as generation ``generation`` of the table at ``path``; returns the table version.

    The version holds exactly the dataset's rows: every other key is deleted. It is built and then sealed by
    the table's commit record, so readers switch to it atomically and never see part of it. A re-run of a
    published generation (same ``source``, a ``generation`` not above the last published) does nothing.
    ``partitions``: see :func:`maintain`.
    """
    spark = dataset.sparkSession
    n = 0 if partitions is None else partitions
    if n < 0 or (partitions is not None and n == 0):
        raise AdjunctTableError(f"adjunct table {path}: partitions must be positive, not {partitions}")
    return _jvm_call(
        lambda: _obj(spark, "AdjunctMaintain").publishGeneration(
            dataset._jdf, generation, path, _java_list(spark, keys), source, retain_versions, n
        )
    )


def publish_stream(
    datasets: Any,
    path: str,
    keys: Sequence[str],
    *,
    checkpoint: str,
    retain_versions: int = 100,
    partitions: int | None = None,
) -> Any:
    """A ``DataStreamWriter`` publishing each micro-batch of the streaming DataFrame ``datasets`` as a new
    generation (:func:`publish`, the batch id as generation number): e.g. a file source with
    ``maxFilesPerTrigger=1`` over a directory receiving one complete file per generation."""

    def batch(df: Any, batch_id: int) -> None:
        publish(
            df,
            path,
            keys,
            batch_id,
            source=checkpoint,
            retain_versions=retain_versions,
            partitions=partitions,
        )

    check_checkpoint_location(datasets.sparkSession, checkpoint)
    return datasets.writeStream.option("checkpointLocation", checkpoint).foreachBatch(batch)


def lookup(events: Any, path: str, *, on: Sequence[str] | None = None, version: int | None = None) -> Any:
    """``events`` (a batch DataFrame) with the table's value columns for each event's key (nulls if absent).

    ``on``: the events' columns matching the table's key columns, in order (default: the same names).
    ``version``: a committed table version (default: the latest). Of a partitioned table, the events must be
    hash-partitioned on the ``on`` columns into the table's N partitions (``events.repartition(N, *on)``, or a
    stateful operator's shuffle on them); otherwise this fails saying so.
    """
    spark = events.sparkSession
    from pyspark.sql import DataFrame

    if events.isStreaming:
        raise AdjunctTableError(
            f"lookup of adjunct table {path} takes a batch DataFrame; for a streaming one use "
            "lineagestore.adjunct.enrich, which picks and records one table version per micro-batch"
        )
    jdf = _jvm_call(
        lambda: _obj(spark, "AdjunctLookup").lookup(
            events._jdf, path, _java_list(spark, on or []), -1 if version is None else version
        )
    )
    return DataFrame(jdf, spark)


def version_for_batch(spark: Any, path: str, checkpoint: str, batch_id: int) -> int:
    """The table version micro-batch ``batch_id`` of the query at ``checkpoint`` sees (recorded once)."""
    return _jvm_call(
        lambda: _obj(spark, "AdjunctLookup").versionForBatch(spark._jsparkSession, path, checkpoint, batch_id)
    )


def caught_up(maintaining: Any) -> bool:
    """Whether the maintaining query ``maintaining`` (a ``StreamingQuery`` running :func:`maintain`) has caught
    up with the input available to its change stream: it stopped without error (``availableNow`` ran to its
    end), or it finished a trigger that found no new input (Spark's status: no trigger active, no data
    available) after at least one trigger. Its ``foreachBatch`` commits a table version inside the trigger, so
    every change its sources offered before that trigger is in the table then. Raises if it failed."""
    error = maintaining.exception()
    if error is not None:
        raise AdjunctTableError(
            f"the maintaining query {maintaining.name or maintaining.id} failed, so the table cannot catch up: "
            f"{error}"
        )
    if not maintaining.isActive:
        return True
    status = maintaining.status
    return (
        maintaining.lastProgress is not None
        and not status["isTriggerActive"]
        and not status["isDataAvailable"]
    )


def enrich(
    events: Any,
    path: str,
    *,
    checkpoint: str,
    process: Callable[[Any, int], None],
    on: Sequence[str] | None = None,
    bootstrap: Any = None,
    bootstrap_timeout_s: float = 600.0,
) -> Any:
    """A ``DataStreamWriter`` over the streaming DataFrame ``events`` calling ``process(enriched, batch_id)``.

    Each micro-batch is enriched at one table version, picked on the driver when the batch starts and
    recorded under ``<checkpoint>/adjunct/``, so a re-run of the batch after a restart sees the same one.
    ``bootstrap``: the maintaining ``StreamingQuery`` (in this session); the first batch this run picks a
    version for waits until that query has :func:`caught_up` (at most ``bootstrap_timeout_s``, then fails
    naming the query). A batch re-run with a recorded version does not wait. Add a trigger and ``start()`` it.
    """
    held = [bootstrap is not None]  # only the first batch of this run is held

    def batch(df: Any, batch_id: int) -> None:
        spark = df.sparkSession
        if held[0] and not _has_recorded_version(spark, path, checkpoint, batch_id):
            deadline = time.monotonic() + bootstrap_timeout_s
            while not caught_up(bootstrap):
                if time.monotonic() > deadline:
                    raise AdjunctTableError(
                        f"adjunct table {path}: the maintaining query {bootstrap.name or bootstrap.id} has not "
                        f"caught up with its change stream within {bootstrap_timeout_s:g} s; batch {batch_id} "
                        "of the enriching query was held and not run. Check the maintaining query's progress, "
                        "or raise bootstrap_timeout_s."
                    )
                time.sleep(0.2)
        held[0] = False
        v = version_for_batch(spark, path, checkpoint, batch_id)
        process(lookup(df, path, on=on, version=v), batch_id)

    check_checkpoint_location(events.sparkSession, checkpoint)
    return events.writeStream.option("checkpointLocation", checkpoint).foreachBatch(batch)


def _has_recorded_version(spark: Any, path: str, checkpoint: str, batch_id: int) -> bool:
    return bool(
        _jvm_call(
            lambda: _obj(spark, "AdjunctLookup").hasRecordedVersion(
                spark._jsparkSession, path, checkpoint, batch_id
            )
        )
    )


def read(spark: Any, path: str, version: int | None = None) -> Any:
    """The table's live rows (key and value columns) at ``version`` (default: the latest)."""
    from pyspark.sql import DataFrame

    jdf = _jvm_call(
        lambda: _obj(spark, "AdjunctLookup").read(
            spark._jsparkSession, path, -1 if version is None else version
        )
    )
    return DataFrame(jdf, spark)


def versions(spark: Any, path: str) -> list[dict]:
    """The table's committed versions still kept, oldest first: version, uniqueId, sourceBatchId."""
    rows = _jvm_call(lambda: _obj(spark, "AdjunctLookup").versions(spark._jsparkSession, path))
    out = []
    for line in rows:
        v, uid, b = str(line).split("\t")
        out.append({"version": int(v), "uniqueId": uid, "sourceBatchId": int(b)})
    return out


def local_replica_stats(spark: Any, path: str, partition: int = 0) -> dict[str, int]:
    """What this JVM's replica of the table (of its ``partition``) holds and downloaded (the driver's in
    ``local[N]``: tests)."""
    m = _obj(spark, "AdjunctLookup").localReplicaStats(spark._jsparkSession, path, partition)
    return {str(k): int(m.get(k)) for k in m.keySet()}

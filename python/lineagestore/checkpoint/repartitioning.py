"""``repartition``: change the partition count of a stopped query's state.

A stateful query's partition count (``spark.sql.shuffle.partitions`` when it first ran) is frozen in its
checkpoint. This rewrites the state of the last committed batch ``B`` into ``N`` partitions and records it as
one more batch, the way Spark 4.3's own offline repartition does (which refuses every provider but its own):

1. every store of every operator is rewritten: each key is placed by Spark's own partitioning expression
   (``SparkKeyPlacement``) and every new partition's store is committed at version ``B + 2`` under a fresh
   unique ID, in lineagestore's format (no existing file is touched: until the commit log names them the new
   files are unreferenced). Given a SparkSession, as one Spark job whose tasks (one per independent group of
   new partitions, ``RepartitionJob``) run on the executors and read only their group's old stores; given the
   tools' JVM, on that JVM's threads (``CheckpointTools.repartitionStore``). Both split the work the same way
   (``StoreRepartitioner.groupsOf``) and write the same stores;
2. ``offsets/B+1``: a copy of ``offsets/B`` whose recorded ``spark.sql.shuffle.partitions`` is ``N``, marked
   as a rewrite batch (``spark_files.REWRITE_FIELD``);
3. ``commits/B+1`` last, naming the new unique IDs: from here on the checkpoint is repartitioned;
4. with ``file_sink``, only then, the entry of batch ``B + 1`` in the log of the query's file sink
   (:mod:`.file_sink`; run again on the repartitioned checkpoint, it writes only what is missing).

A crash before 3 leaves the old checkpoint plus orphan files (``gc`` removes them) and, after 2, an offset
entry without commit, which Spark refuses to start from (``STREAMING_UNFINISHED_REPARTITION_DETECTED``, Spark's
own tool leaves the same); running this command again finishes it (step 1 again, then 3), ``--undo`` removes
the uncommitted entry instead. Spark's JSON files are read and written through :mod:`.spark_files`;
lineagestore's format only in the JVM.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from lineagestore.checkpoint import file_sink as sink_log
from lineagestore.checkpoint.errors import CheckpointError
from lineagestore.checkpoint.model import load, to_uri
from lineagestore.checkpoint.progress import NO_PROGRESS, Progress
from lineagestore.checkpoint.spark_files import (
    SHUFFLE_PARTITIONS,
    TWS_ENCODING_KEY,
    TwsInfo,
    batch_ids,
    commit_unique_ids,
    commit_with_ids,
    is_repartition_entry,
    offset_conf,
    offsets_with_conf,
    operator_info,
    operator_path,
    partition_key_columns,
    schema_jsons,
    store_path,
    store_suffix,
    tws_info,
    unfinished_repartition,
)
from lineagestore.jvm import JvmTools

# The steps between the writes, named for crash tests (``crash_at``): a crash at any of them leaves the old
# checkpoint as it was (plus unreferenced files) or an offset entry without commit, which a re-run finishes.
STEP_AFTER_STORES = "repartition.after-stores"
STEP_AFTER_OFFSETS = "repartition.after-offsets"
STEPS = (STEP_AFTER_STORES, STEP_AFTER_OFFSETS)
# Between the checkpoint's commit and the file sink's entry (with ``file_sink``): the checkpoint is
# repartitioned, the sink's log lacks the entry, and a re-run with ``file_sink`` writes only that.
STEP_AFTER_COMMIT = "repartition.after-commit"
# In the Spark job: a task that fails after its new stores are written is retried (its first write is left as
# orphans for ``gc``); the name is the JVM's (``RepartitionJob.TaskAfterWrite``).
STEP_TASK_AFTER_WRITE = "repartition.task-after-write"


class InjectedCrash(RuntimeError):
    """Raised at a named step by a test's ``crash_at``; never by production code."""


@dataclass
class StorePlan:
    """One store name of one operator: where its old partitions' committed checkpoints are, and how a key
    is decoded and placed."""

    operator_id: int
    store_name: str
    key_schema: str  # Spark's JSON
    value_schema: str
    prefix_key_columns: int  # the encoder spec the operator wrote keys with (session windows: > 0)
    partition_key_columns: int  # the leading key columns Spark's shuffle partitions by
    sources: list[tuple[int, str, str]]  # (old partition, unique id committed in batch B, store uri)
    # transformWithState (operator metadata version 2): each column family keys its rows differently; the
    # JVM places them by the grouping key, from the operator's name, schema files and state variables
    tws: TwsInfo | None = None


@dataclass
class Plan:
    uri: str
    last_batch: int  # B: the batch whose state is rewritten
    old_partitions: int
    new_partitions: int
    stores: list[StorePlan]
    resume: bool  # offsets/B+1 already written by an interrupted run (ours or Spark's): finish it
    writes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "checkpoint": self.uri,
            "lastBatch": self.last_batch,
            "newBatch": self.last_batch + 1,
            "oldPartitions": self.old_partitions,
            "newPartitions": self.new_partitions,
            "storeVersion": self.last_batch + 2,
            "resume": self.resume,
            "stores": [
                {
                    "operatorId": s.operator_id,
                    "storeName": s.store_name,
                    "partitionKeyColumns": s.partition_key_columns,  # 0: transformWithState's, per family
                    "transformWithState": s.tws is not None,
                    "oldPartitions": len(s.sources),
                }
                for s in self.stores
            ],
            "writes": self.writes,
        }


def repartitioned_offsets(tools: JvmTools, src: str, partitions: int) -> str:
    """``offsets/B`` with ``spark.sql.shuffle.partitions`` set to ``partitions``, marked as a rewrite batch:
    what ``offsets/B+1`` holds."""
    return offsets_with_conf(tools, src, {SHUFFLE_PARTITIONS: str(partitions)}, rewrite="repartition")


def plan(tools: JvmTools, path: str, partitions: int) -> Plan:
    if partitions <= 0:
        raise CheckpointError(f"--partitions must be at least 1, got {partitions}")
    cp = load(tools, path)  # refuses another provider's checkpoint and format version 1, naming the file
    uri = cp.uri
    if not cp.batches:
        raise CheckpointError(
            f"{path} has no committed batch: nothing to repartition; start the query with "
            f"{SHUFFLE_PARTITIONS}={partitions} instead"
        )
    last = cp.batches[-1]
    resume = False
    if cp.uncommitted:
        pending = (
            is_repartition_entry(tools, uri, cp.uncommitted[0]) if cp.uncommitted == [last + 1] else None
        )
        if pending is None:
            raise CheckpointError(
                f"{path}: batch {cp.uncommitted[0]} has an offset entry (offsets/{cp.uncommitted[0]}) but no "
                "commit: a query is running it, or one stopped mid-batch. Stop the query (or, if none runs, "
                "start it once so it finishes the batch, then stop it) and run repartition again"
            )
        if pending != partitions:
            raise CheckpointError(
                f"{path}: offsets/{last + 1} is an unfinished repartition to {pending} partitions; finish it "
                f"with --partitions {pending}, or --undo it first"
            )
        # the state is rewritten from the last committed batch, the one before the repartition entry
        resume = True
    recorded = offset_conf(tools, f"{uri}/offsets/{last}")
    old_n = int(recorded.get(SHUFFLE_PARTITIONS, "0"))
    if not resume and old_n == partitions:
        raise CheckpointError(
            f"{path} already has {partitions} partitions ({SHUFFLE_PARTITIONS} of offsets/{last}); to write "
            "the missing entries of a file sink's log after an earlier repartition, give --file-sink"
        )
    ids = commit_unique_ids(tools, uri, last)
    stores: list[StorePlan] = []
    for op, names in sorted(cp.operators.items()):
        op_uri = f"{uri}/{operator_path(op)}"
        infos = operator_info(tools, op_uri)
        per_part = ids.get(str(op))
        if not per_part:
            raise CheckpointError(f"{uri}/commits/{last} names no unique IDs for operator {op}")
        tws = tws_info(tools, op_uri, last)
        if tws is not None:
            tws.encoding = recorded.get(TWS_ENCODING_KEY, "unsaferow")
            for idx, name in enumerate(names):
                sources = [
                    (p, per_part[p][idx], f"{uri}/{store_path(op, p, name)}") for p in range(len(per_part))
                ]
                stores.append(StorePlan(op, name, "", "", 0, 0, sources, tws))
            continue
        for idx, name in enumerate(names):
            key_json, value_json = schema_jsons(tools, f"{uri}/{store_path(op, 0, name)}/_metadata/schema")
            prefix = int(infos.get(name, {}).get("numColsPrefixKey", 0))
            part_cols = partition_key_columns(name, len(json.loads(key_json)["fields"]), prefix)
            sources = [
                (p, per_part[p][idx], f"{uri}/{store_path(op, p, name)}") for p in range(len(per_part))
            ]
            stores.append(StorePlan(op, name, key_json, value_json, prefix, part_cols, sources))
    p = Plan(uri, last, old_n, partitions, stores, resume)
    for s in stores:
        p.writes.append(
            f"{operator_path(s.operator_id)}/{{0..{partitions - 1}}}{store_suffix(s.store_name)}/"
            f"{last + 2}_<new unique id>.delta and .zip"
        )
    if not resume:
        p.writes.append(f"offsets/{last + 1} ({SHUFFLE_PARTITIONS}={partitions})")
    p.writes.append(f"commits/{last + 1} (the new unique IDs; written last)")
    return p


def repartition(
    target: Any,
    path: str,
    partitions: int,
    dry_run: bool = False,
    progress: Progress = NO_PROGRESS,
    crash_at: str | None = None,
    general_path_only: bool = False,
    file_sink: str | None = None,
    file_sink_compact_interval: int = sink_log.SPARK_DEFAULT_COMPACT_INTERVAL,
) -> dict[str, Any]:
    """Repartition the stopped query at ``path`` to ``partitions``; see the module doc. ``target``: a
    SparkSession, whose executors rewrite the stores as one Spark job (each group of new partitions a task,
    docs/repartition.md, "The Spark job"), or :class:`JvmTools`, whose JVM rewrites them on its own threads
    (the command line without ``--master``). ``file_sink``: the
    ``path`` of the query's Spark file sink, whose log then gets the entry of the new batch
    (``file_sink_compact_interval``: the query's ``spark.sql.streaming.fileSink.log.compactInterval``); on a
    checkpoint that has ``partitions`` already, only the sink's missing entries are written. ``crash_at``
    (tests only) is one of :data:`STEPS` or :data:`STEP_AFTER_COMMIT`: :class:`InjectedCrash` is raised
    there; or, with a SparkSession, :data:`STEP_TASK_AFTER_WRITE`: the job's first task fails once after its
    write, and is retried. ``general_path_only`` (benchmarks only) turns off the grouped, parallel rewrite for multiples and
    divisors (``StoreRepartitioner``), to measure what it gains; the result is the same."""
    tools, spark = _tools_of(target)
    known = (*STEPS, STEP_AFTER_COMMIT) + ((STEP_TASK_AFTER_WRITE,) if spark is not None else ())
    if crash_at is not None and crash_at not in known:
        raise ValueError(f"unknown step {crash_at!r}; steps: {', '.join(known)}")

    def step(name: str) -> None:
        if crash_at == name:
            raise InjectedCrash(f"injected crash at {name}")

    if file_sink is not None and not dry_run:
        done = _repartitioned_already(tools, path, partitions)
        if done is not None:
            uri, last = done
            return {
                "checkpoint": uri,
                "lastBatch": last,
                "newPartitions": partitions,
                "alreadyDone": True,
                "fileSink": sink_log.catch_up(tools, uri, file_sink, file_sink_compact_interval),
            }
    p = plan(tools, path, partitions)
    result = p.to_json()
    result["dryRun"] = dry_run
    result["fileSink"] = None
    if dry_run:
        if file_sink is not None:
            result["writes"].append(f"{file_sink}/_spark_metadata/{p.last_batch + 1} (after the commit)")
        return result
    if spark is not None:
        new_ids, rows, phases, tasks = _rewrite_as_job(tools, spark, p, general_path_only, crash_at, progress)
        result["tasks"] = tasks
    else:
        new_ids, rows, phases = _rewrite_in_jvm(tools, p, general_path_only, progress)
    result["ranAs"] = "spark job" if spark is not None else "tools JVM"
    step(STEP_AFTER_STORES)
    new_batch = p.last_batch + 1
    if not p.resume:
        tools.write_text(
            f"{p.uri}/offsets/{new_batch}",
            repartitioned_offsets(tools, f"{p.uri}/offsets/{p.last_batch}", partitions),
            False,
        )
    step(STEP_AFTER_OFFSETS)
    tools.write_text(
        f"{p.uri}/commits/{new_batch}",
        commit_with_ids(tools, f"{p.uri}/commits/{p.last_batch}", new_ids),
        False,
    )
    result["rowsMoved"] = rows
    result["phasesMs"] = phases  # where the time went, summed over stores and threads
    step(STEP_AFTER_COMMIT)
    if file_sink is not None:  # only now: see the module doc of file_sink
        result["fileSink"] = sink_log.catch_up(tools, p.uri, file_sink, file_sink_compact_interval)
    return result


def _tools_of(target: Any) -> tuple[JvmTools, Any]:
    """(the tools, the SparkSession or None) for ``repartition``'s ``target``."""
    if isinstance(target, JvmTools):
        return target, None
    if hasattr(target, "_jsparkSession"):
        tools = JvmTools(target._jvm)
        # the driver's own reads and writes (Spark's files) reach the storage as the session's tasks do
        for key, value in target.sparkContext.getConf().getAll():
            if key.startswith("spark.hadoop."):
                tools.set_hadoop_conf(key[len("spark.hadoop.") :], value)
        return tools, target
    raise TypeError(f"repartition takes a SparkSession or JvmTools, got {type(target).__name__}")


def _placement_args(s: StorePlan) -> tuple[str, tuple[Any, ...]]:
    """How store ``s``'s keys are placed: which placement (``"tws"`` or ``"rows"``) and its arguments, the
    same for the tools' JVM and the Spark job's recipes."""
    if s.tws is not None:
        t = s.tws
        return "tws", (t.operator_name, s.store_name, "\n".join(t.schema_files), t.properties, t.encoding)
    return "rows", (s.key_schema, s.value_schema, s.prefix_key_columns, s.partition_key_columns)


def _sources(p: Plan, s: StorePlan) -> str:
    return "\n".join(f"{part} {p.last_batch + 1} {uid} {uri}" for part, uid, uri in s.sources)


def _rewrite_in_jvm(
    tools: JvmTools, p: Plan, general_path_only: bool, progress: Progress
) -> tuple[dict[str, list[list[str | None]]], int, dict[str, int]]:
    """Every store rewritten in the tools' JVM, one store after another (``StoreRepartitioner``'s threads
    write a store's groups in parallel): (new unique IDs by operator and partition, rows, phases)."""
    new_ids: dict[str, list[list[str | None]]] = {}
    rows = 0
    phases: dict[str, int] = {}
    progress.start("repartition", len(p.stores))
    for s in p.stores:
        kind, args = _placement_args(s)
        if kind == "tws":
            name, store, files, props, encoding = args
            placement = tools.tws_placement(name, store, files.split("\n"), props, encoding, p.new_partitions)
        else:
            placement = tools.key_placement(*args, p.new_partitions)
        out = tools.repartition_store(
            f"{p.uri}/{operator_path(s.operator_id)}",
            s.operator_id,
            s.store_name,
            _sources(p, s),
            p.last_batch + 1,
            placement,
            general_path_only,
        )
        rows += _gather(out, s, p.new_partitions, new_ids, phases)
        progress.step(f"operator {s.operator_id} {s.store_name}: {out['rowsRead']} rows")
    progress.finish()
    return new_ids, rows, phases


def _rewrite_as_job(
    tools: JvmTools, spark: Any, p: Plan, general_path_only: bool, crash_at: str | None, progress: Progress
) -> tuple[dict[str, list[list[str | None]]], int, dict[str, int], list[dict[str, Any]]]:
    """Every store rewritten by one Spark job on ``spark``'s executors (``RepartitionJob``): each store's
    placement is built on the driver first (a store that cannot be placed is refused before any task runs).
    Returns what :func:`_rewrite_in_jvm` does and, per task, where it ran and how long it took."""
    g = tools.guarded
    job_class = spark._jvm.org.apache.spark.sql.execution.streaming.state.lineagestore.RepartitionJob
    job = g(job_class.builder, p.new_partitions, general_path_only)
    for s in p.stores:
        kind, args = _placement_args(s)
        recipe = g(job.twsRecipe, *args) if kind == "tws" else g(job.rowKeyRecipe, *args)
        g(
            job.store,
            spark._jsparkSession,
            f"{p.uri}/{operator_path(s.operator_id)}",
            s.operator_id,
            s.store_name,
            _sources(p, s),
            p.last_batch + 1,
            recipe,
        )
    progress.start("repartition (Spark job)", 1)
    fail_at = STEP_TASK_AFTER_WRITE if crash_at == STEP_TASK_AFTER_WRITE else None
    out = json.loads(g(job.run, spark._jsparkSession, fail_at))
    progress.step(f"{len(p.stores)} stores, {len(out['tasks'])} tasks")
    progress.finish()
    new_ids: dict[str, list[list[str | None]]] = {}
    rows = 0
    phases: dict[str, int] = {}
    for s, store_out in zip(p.stores, out["stores"], strict=True):
        rows += _gather(store_out, s, p.new_partitions, new_ids, phases)
    return new_ids, rows, phases, out["tasks"]


def _gather(
    out: dict[str, Any],
    s: StorePlan,
    partitions: int,
    new_ids: dict[str, list[list[str | None]]],
    phases: dict[str, int],
) -> int:
    """Adds one store's rewrite (``out``) to ``new_ids`` (by operator, then partition, in the order of the
    operator's store names, as the commit log lists them) and ``phases``; returns its rows."""
    for name, ms in out.get("phasesMs", {}).items():
        phases[name] = phases.get(name, 0) + ms
    per_part = new_ids.setdefault(str(s.operator_id), [[] for _ in range(partitions)])
    for part, uid in enumerate(out["uniqueIds"]):
        per_part[part].append(uid)
    return out["rowsRead"]


def _repartitioned_already(tools: JvmTools, path: str, partitions: int) -> tuple[str, int] | None:
    """(URI, last committed batch) if the checkpoint's last committed batch runs with ``partitions`` already
    (a repartition done before, whose file sink may still lack its entry), else None."""
    uri = to_uri(path)
    committed = batch_ids(tools, f"{uri}/commits")
    if not committed:
        return None
    recorded = offset_conf(tools, f"{uri}/offsets/{committed[-1]}").get(SHUFFLE_PARTITIONS)
    if recorded != str(partitions) or is_repartition_entry(tools, uri, committed[-1] + 1) is not None:
        return None
    return uri, committed[-1]


def undo(target: Any, path: str) -> dict[str, Any]:
    """Remove the uncommitted repartition entry ``offsets/B+1`` (ours or Spark's), nothing else. ``target``:
    as :func:`repartition`'s."""
    tools, _ = _tools_of(target)
    cp = load(tools, path)
    note = unfinished_repartition(tools, cp.uri, cp.batches, cp.uncommitted)
    if note is None:
        raise CheckpointError(f"{path} does not end in an unfinished repartition: nothing to undo")
    target = f"{cp.uri}/offsets/{cp.uncommitted[0]}"
    tools.delete(target)
    return {"checkpoint": cp.uri, "removed": target}

"""What Spark itself records in a checkpoint that the tools explain: the SQL settings of the offset log
(which state store provider and checkpoint format a restart keeps) and the operator names of the state
metadata. Spark's JSON files only; lineagestore's own format is read by the JVM (``checkpoint_jvm``)."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lineagestore.checkpoint_jvm import JvmTools

# Spark 4.3's StateStoreWriter.shortName of each stateful operator (StatefulOperatorsUtils) (recorded in the state metadata as
# operatorInfo.operatorName) -> what a user wrote. Names not listed here are shown as Spark records them.
OPERATOR_KINDS = {
    "stateStoreSave": "aggregation",
    "sessionWindowStateStoreSaveExec": "session window aggregation",
    "dedupe": "dropDuplicates",
    "dedupeWithinWatermark": "dropDuplicatesWithinWatermark",
    "symmetricHashJoin": "stream-stream join",
    "flatMapGroupsWithState": "flatMapGroupsWithState",
    "applyInPandasWithState": "applyInPandasWithState",
    "transformWithStateExec": "transformWithState",
    "transformWithStateInPandasExec": "transformWithStateInPandas",
    "transformWithStateInPySparkExec": "transformWithStateInPySpark",
    "globalLimit": "streaming limit",
}


def operator_kind(spark_name: str | None) -> str | None:
    """What an operator is, from Spark's recorded name; None when the checkpoint has no state metadata."""
    if not spark_name:
        return None
    return OPERATOR_KINDS.get(spark_name, spark_name)


PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
FORMAT_KEY = "spark.sql.streaming.stateStore.checkpointFormatVersion"
LINEAGESTORE_PROVIDER = "io.lineagestore.spark.LineageStateStoreProvider"
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


def recorded_conf(tools: JvmTools, uri: str, offsets: list[int]) -> tuple[str | None, dict[str, str]]:
    """The newest offset log entry's path and the SQL settings Spark recorded in it (``conf`` of its metadata
    line), which Spark applies again on every restart: among them the state store provider and the
    checkpoint format version. ({} when there is no entry or it records none.)"""
    if not offsets:
        return None, {}
    path = f"{uri}/offsets/{offsets[-1]}"
    for line in (tools.read_text(path) or "").splitlines()[1:]:
        try:
            meta = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(meta, dict) and isinstance(meta.get("conf"), dict):
            return path, {str(k): str(v) for k, v in meta["conf"].items()}
    return path, {}


def foreign_provider(tools: JvmTools, uri: str, offsets: list[int]) -> str | None:
    """Why the tools cannot read this checkpoint when its offset log names another state store provider."""
    path, conf = recorded_conf(tools, uri, offsets)
    provider, version = conf.get(PROVIDER_KEY), conf.get(FORMAT_KEY)
    if not provider or provider == LINEAGESTORE_PROVIDER:
        return None
    return (
        f"{uri} was written by {provider}, not lineagestore (its offset log {path} records "
        f"{PROVIDER_KEY}={provider}" + (f", {FORMAT_KEY}={version}" if version else "") + "). Spark keeps "
        "the provider a checkpoint started with on every restart, even under lineagestore.configure, so this "
        "query has never run on lineagestore. To move it, stop it and migrate its state (`lineagestore migrate "
        f"{uri}`, docs/repartition.md) or start on a new checkpoint location; see "
        "docs/operations.md#a-checkpoint-of-another-provider"
    )


def not_lineagestore(tools: JvmTools, uri: str, last_batch: int, offsets: list[int]) -> str:
    """Why a checkpoint of lineagestore's provider (or none recorded) has no lineage: format version 1."""
    path, conf = recorded_conf(tools, uri, offsets)
    version = conf.get(FORMAT_KEY)
    return (
        f"{uri}/commits/{last_batch} has no stateUniqueIds, so this checkpoint has no lineage to inspect: it "
        f"was written with {FORMAT_KEY}={version or '1 (not recorded: the default)'} "
        f"({path or 'no offset log entry'}), and lineagestore needs version 2 (lineagestore.configure sets it)"
    )


# ---- repartition batches (Spark 4.3's offline repartition, and lineagestore's) ---------------------------------


def read_log_entry(tools: JvmTools, uri: str) -> tuple[str, list[str]]:
    """A Spark log entry's version line and the lines after it; ValueError naming the file if it is absent
    or not a log entry."""
    text = tools.read_text(uri)
    if text is None:
        raise ValueError(f"{uri} does not exist")
    lines = text.split("\n")
    if not re.fullmatch(r"v\d+", lines[0].strip()) or len(lines) < 2:
        raise ValueError(f"{uri} is not a Spark log entry (expected a 'v<N>' line then JSON)")
    return lines[0].strip(), lines[1:]


def repartitioned_offsets(tools: JvmTools, src: str, partitions: int) -> str:
    """``offsets/B`` with ``spark.sql.shuffle.partitions`` set to ``partitions``: what ``offsets/B+1`` holds.
    The source offsets (every later line) are kept byte for byte, so the next batch reads on from them."""
    version, rest = read_log_entry(tools, src)
    meta = json.loads(rest[0])
    meta.setdefault("conf", {})[SHUFFLE_PARTITIONS] = str(partitions)
    return "\n".join([version, json.dumps(meta, separators=(",", ":"))] + rest[1:])


def is_repartition_entry(tools: JvmTools, uri: str, batch: int) -> int | None:
    """If ``offsets/<batch>`` is a repartition batch (the same source offsets as ``offsets/<batch-1>``, only
    the shuffle partitions differ), its new partition count; else None. Spark's tool writes the same."""
    try:
        _, new = read_log_entry(tools, f"{uri}/offsets/{batch}")
        _, old = read_log_entry(tools, f"{uri}/offsets/{batch - 1}")
        new_meta, old_meta = json.loads(new[0]), json.loads(old[0])
    except (ValueError, json.JSONDecodeError):
        return None
    if new[1:] != old[1:]:
        return None
    n_new = (new_meta.get("conf") or {}).get(SHUFFLE_PARTITIONS)
    n_old = (old_meta.get("conf") or {}).get(SHUFFLE_PARTITIONS)
    if n_new is None or n_new == n_old:
        return None
    return int(n_new)


def unfinished_repartition(
    tools: JvmTools, uri: str, batches: list[int], uncommitted: list[int]
) -> str | None:
    """A note for ``verify`` when the checkpoint ends in a repartition batch that was never committed."""
    if not batches or uncommitted != [batches[-1] + 1]:
        return None
    n = is_repartition_entry(tools, uri, uncommitted[0])
    if n is None:
        return None
    b = uncommitted[0]
    return (
        f"offsets/{b} is an unfinished repartition to {n} partitions (Spark's offline repartition or an "
        f"interrupted `lineagestore repartition`): Spark refuses to start this query until it is finished or "
        f"undone. Finish it: `lineagestore repartition {uri} --partitions {n}`; or undo it: "
        f"`lineagestore repartition {uri} --undo` (removes only offsets/{b})"
    )

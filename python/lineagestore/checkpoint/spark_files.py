"""What Spark itself records in a checkpoint, read (and, for a new batch, written) in one place: the layout
(``commits/``, ``offsets/``, ``metadata``, ``state/<op>/<part>[/<store>]``), the log entries (a ``v<N>`` line
then JSON) and their batch ids, the SQL settings of the offset log (which state store provider, checkpoint
format and partition count a restart keeps), the commit log's unique IDs, the operator metadata (store
names, operator names, transformWithState's state variables) and the state schema files. Spark's files only;
lineagestore's own format is read by the JVM (:mod:`lineagestore.jvm`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lineagestore._session import PROVIDER_CLASS
from lineagestore.checkpoint.errors import CheckpointError

if TYPE_CHECKING:
    from lineagestore.jvm import JvmTools

PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
FORMAT_KEY = "spark.sql.streaming.stateStore.checkpointFormatVersion"
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
TWS_ENCODING_KEY = "spark.sql.streaming.stateStore.encodingFormat"
# the provider Spark runs when none is recorded (SQLConf.STATE_STORE_PROVIDER_CLASS's default)
SPARK_DEFAULT_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"

DEFAULT_STORE = "default"
# Spark's stream-stream join keeps four stores per partition, in this order (SymmetricHashJoinStateManager)
JOIN_STORES = [
    "left-keyToNumValues",
    "left-keyWithIndexToValue",
    "right-keyToNumValues",
    "right-keyWithIndexToValue",
]


# ---- the state directory layout -------------------------------------------------------------------------


def store_path(operator_id: int, partition_id: int, store_name: str = DEFAULT_STORE) -> str:
    """A store's directory relative to the checkpoint: ``state/<op>/<part>``, plus ``/<store>`` for a store
    other than the default one. Spark decides it (``StateStoreId.storeCheckpointLocation``); the Scala tools
    have the same rule for the stores they write (``io.lineagestore.tools``: repartition, and
    ``StateMigration`` in the Spark glue). Every Python path to a store is built here."""
    return f"{operator_path(operator_id)}/{partition_id}{store_suffix(store_name)}"


def operator_path(operator_id: int) -> str:
    """An operator's directory relative to the checkpoint: ``state/<op>``."""
    return f"state/{operator_id}"


def store_suffix(store_name: str) -> str:
    """What a store adds under its partition's directory: nothing for the default store, ``/<store>``."""
    return "" if store_name == DEFAULT_STORE else f"/{store_name}"


# ---- log entries and batch ids --------------------------------------------------------------------------


def batch_ids(tools: JvmTools, dir_uri: str) -> list[int]:
    """The batch ids of a log directory (``commits/``, ``offsets/``, ``_metadata/v2``), ascending: its files
    named by a number (Spark's ``.crc`` and temporary files are not)."""
    entries = tools.list(dir_uri) or []
    return sorted(int(e["name"]) for e in entries if not e["dir"] and e["name"].isdigit())


def numbered_dirs(tools: JvmTools, dir_uri: str) -> list[int]:
    """The numbered sub-directories (operators under ``state/``, partitions under ``state/<op>``)."""
    entries = tools.list(dir_uri) or []
    return sorted(int(e["name"]) for e in entries if e["dir"] and e["name"].isdigit())


def read_log_entry(tools: JvmTools, uri: str, listed: bool = False) -> tuple[str, list[str]]:
    """A Spark log entry's version line (``v1``, ``v2``) and the lines after it (JSON). ``CheckpointError``
    naming the file if it is absent (``listed``: it was listed a moment ago) or not a log entry."""
    text = tools.read_text(uri)
    if text is None:
        if listed:
            raise CheckpointError(f"{uri} disappeared while reading it; is the query still running?")
        raise CheckpointError(f"{uri} does not exist")
    lines = text.split("\n")
    if len(lines) < 2 or not re.fullmatch(r"v\d+", lines[0].strip()):
        raise CheckpointError(f"{uri} is not a Spark log entry (expected a 'v<N>' line then JSON)")
    return lines[0].strip(), lines[1:]


def read_log_json(tools: JvmTools, uri: str, listed: bool = False) -> dict[str, Any]:
    """The JSON object a log entry holds after its version line (a commit, an offset entry's metadata, the
    operator metadata); ``CheckpointError`` naming the file when it is unreadable."""
    _, lines = read_log_entry(tools, uri, listed)
    try:
        value = json.loads(lines[0])
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{uri} holds unreadable JSON ({e}); the file is damaged") from None
    if not isinstance(value, dict):
        raise CheckpointError(f"{uri} holds JSON that is not an object; the file is damaged")
    return value


def query_id(tools: JvmTools, uri: str) -> str | None:
    """The query id of the checkpoint's ``metadata`` file (JSON without a version line), None without one."""
    text = tools.read_text(f"{uri}/metadata") or ""
    if not text.strip():
        return None
    try:
        return json.loads(text.strip().splitlines()[0]).get("id")
    except (json.JSONDecodeError, IndexError, AttributeError):
        raise CheckpointError(f"{uri}/metadata is not Spark's query metadata (unreadable JSON)") from None


def commit_unique_ids(tools: JvmTools, uri: str, batch: int, listed: bool = False) -> dict[str, Any]:
    """``stateUniqueIds`` of ``commits/<batch>``: operator id (text) -> per partition, per store, the unique
    ID that batch committed ({} in format version 1)."""
    return read_log_json(tools, f"{uri}/commits/{batch}", listed).get("stateUniqueIds") or {}


def offset_conf(tools: JvmTools, uri: str) -> dict[str, str]:
    """The SQL settings an offset log entry records (``conf`` of its metadata line), which Spark applies again
    on every restart."""
    meta = read_log_json(tools, uri)
    return {str(k): str(v) for k, v in (meta.get("conf") or {}).items()}


def recorded_conf(tools: JvmTools, uri: str, offsets: list[int]) -> tuple[str | None, dict[str, str]]:
    """The newest offset log entry's path and the SQL settings it records ({} when there is no entry or it
    records none: an unreadable entry is not an error here, the explanations below only use it)."""
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


# The field of an offset entry's metadata line that marks the batch as a rewrite of the state (repartition,
# migrate) which ran no query: its value is {"operation": "repartition" | "migrate"}. Spark reads the line
# into OffsetSeqMetadata and ignores fields it does not know; the query's next batch writes its own line
# without it. docs/format.md, "Rewrite batches".
REWRITE_FIELD = "lineagestoreRewrite"


def offsets_with_conf(tools: JvmTools, src: str, conf: dict[str, str], rewrite: str | None = None) -> str:
    """The text of offset entry ``src`` with ``conf`` set in its recorded settings: what the next batch's
    entry of a repartition or migration holds, marked as a rewrite batch by ``rewrite`` (the operation). The
    source offsets (every later line) are kept byte for byte, so the next batch reads on from them."""
    version, rest = read_log_entry(tools, src)
    meta = read_log_json(tools, src)
    meta.setdefault("conf", {}).update(conf)
    if rewrite is not None:
        meta[REWRITE_FIELD] = {"operation": rewrite}
    return "\n".join([version, json.dumps(meta, separators=(",", ":"))] + rest[1:])


def commit_with_ids(tools: JvmTools, src: str, unique_ids: dict[str, Any], version: str | None = None) -> str:
    """The text of commit entry ``src`` with ``stateUniqueIds`` replaced (and its version line, if given): the
    commit of a repartition's or migration's new batch."""
    old_version, _ = read_log_entry(tools, src)
    commit = read_log_json(tools, src)
    commit["stateUniqueIds"] = unique_ids
    return f"{version or old_version}\n" + json.dumps(commit, separators=(",", ":"))


# ---- operator metadata and state schemas ----------------------------------------------------------------

# Spark 4.3's StateStoreWriter.shortName of each stateful operator (StatefulOperatorsUtils) (recorded in the
# state metadata as operatorInfo.operatorName) -> what a user wrote. Names not listed here are shown as Spark
# records them.
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


def operator_metadata_paths(tools: JvmTools, op_uri: str) -> list[str]:
    """The operator's state metadata files, the one to trust first: the newest ``_metadata/v2/<batch>``
    (written when a run starts or its schema changes), then ``_metadata/metadata`` (version 1)."""
    candidates = [f"{op_uri}/_metadata/metadata"]
    v2 = batch_ids(tools, f"{op_uri}/_metadata/v2")
    if v2:
        candidates.insert(0, f"{op_uri}/_metadata/v2/{v2[-1]}")
    return candidates


def operator_info(tools: JvmTools, op_uri: str) -> dict[str, dict]:
    """Per store name, what the operator metadata (version 1: ``_metadata/metadata``) records."""
    uri = f"{op_uri}/_metadata/metadata"
    if tools.read_text(uri) is None:
        return {}
    return {s["storeName"]: s for s in read_log_json(tools, uri).get("stateStoreInfo", [])}


@dataclass
class TwsInfo:
    operator_name: str
    schema_files: list[str]  # the state schema files (format 3) the operator metadata lists, newest last
    properties: str  # operatorPropertiesJson: the state variables, by which each family is placed
    encoding: str = "unsaferow"  # spark.sql.streaming.stateStore.encodingFormat of the offset log

    @property
    def schema_file(self) -> str:
        """The newest schema file: every column family's schema and key encoder as the operator runs now."""
        return self.schema_files[-1]


def tws_info(tools: JvmTools, op_uri: str, last_batch: int) -> TwsInfo | None:
    """What places a transformWithState operator's rows, from its newest operator metadata (version 2,
    ``_metadata/v2/<batch>``) at or before ``last_batch``; None for operators with version 1 metadata."""
    batches = [b for b in batch_ids(tools, f"{op_uri}/_metadata/v2") if b <= last_batch]
    if not batches:
        return None
    path = f"{op_uri}/_metadata/v2/{batches[-1]}"
    try:
        meta = read_log_json(tools, path)
        stores = meta["stateStoreInfo"]
        schema_files = stores[0]["stateSchemaFilePaths"]
        if not schema_files:
            raise IndexError
        return TwsInfo(
            meta["operatorInfo"]["operatorName"], list(schema_files), meta["operatorPropertiesJson"]
        )
    except (CheckpointError, IndexError, KeyError, TypeError):
        raise CheckpointError(
            f"{path} is not readable operator metadata (version 2): the state variables that place this "
            "operator's rows are unknown; the file is damaged"
        ) from None


def schema_jsons(tools: JvmTools, schema_uri: str) -> tuple[str, str]:
    """Key and value schema JSON from Spark's schema file (``_metadata/schema``: a version, then each schema
    as DataOutputStream UTF chunks). The JSON objects are found by decoding, not by fixed offsets."""
    text = tools.read_text(schema_uri)
    if text is None:
        raise CheckpointError(
            f"{schema_uri} does not exist: the operator's key schema is needed to place keys"
        )
    decoder = json.JSONDecoder()
    found: list[str] = []
    i = 0
    while len(found) < 2:
        i = text.find('{"type":"struct"', i)
        if i < 0:
            break
        obj, end = decoder.raw_decode(text, i)
        found.append(json.dumps(obj, separators=(",", ":")))
        i = end
    if len(found) < 2:
        raise CheckpointError(f"{schema_uri}: could not read the key and value schemas; the file is damaged")
    return found[0], found[1]


def partition_key_columns(store_name: str, key_columns: int, prefix_key_columns: int) -> int:
    """The leading key columns Spark's shuffle partitions a store's keys by: the join key of a join's
    ``keyWithIndexToValue`` (then the value's index), a session window's grouping key (the prefix, then the
    session start), else the whole key."""
    if store_name.endswith("keyWithIndexToValue"):
        return key_columns - 1
    if prefix_key_columns > 0:
        return prefix_key_columns
    return key_columns


# ---- which provider wrote it -----------------------------------------------------------------------------


def foreign_provider(tools: JvmTools, uri: str, offsets: list[int]) -> str | None:
    """Why the tools cannot read this checkpoint when its offset log names another state store provider."""
    path, conf = recorded_conf(tools, uri, offsets)
    provider, version = conf.get(PROVIDER_KEY), conf.get(FORMAT_KEY)
    if not provider or provider == PROVIDER_CLASS:
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


# ---- repartition batches (Spark 4.3's offline repartition, and lineagestore's) ---------------------------


def restated_conf(tools: JvmTools, uri: str, batch: int) -> tuple[dict, dict] | None:
    """If ``offsets/<batch>`` restates ``offsets/<batch-1>`` (the same source offsets: a batch that read no
    input, as a repartition's or a migration's added batch is), the SQL settings the two record (older,
    newer); else None, also when either entry is absent or unreadable."""
    try:
        _, new = read_log_entry(tools, f"{uri}/offsets/{batch}")
        _, old = read_log_entry(tools, f"{uri}/offsets/{batch - 1}")
        new_meta, old_meta = json.loads(new[0]), json.loads(old[0])
    except (CheckpointError, json.JSONDecodeError):
        return None
    if new[1:] != old[1:] or not isinstance(new_meta, dict) or not isinstance(old_meta, dict):
        return None
    return old_meta.get("conf") or {}, new_meta.get("conf") or {}


def rewrite_operation(tools: JvmTools, uri: str, batch: int) -> str | None:
    """What rewrote the state at batch ``batch`` ("repartition", "migrate"), or None for a batch the query ran.
    A batch is a rewrite batch if ``offsets/<batch>`` carries :data:`REWRITE_FIELD`, or (what Spark's own
    offline repartition and lineagestore before the field wrote) if it restates ``offsets/<batch-1>`` and
    records another state store provider (a migrate) or partition count (a repartition): a batch the query
    runs keeps both, as Spark restores them from the offset log."""
    try:
        _, lines = read_log_entry(tools, f"{uri}/offsets/{batch}")
        marked = json.loads(lines[0]).get(REWRITE_FIELD)
    except (CheckpointError, json.JSONDecodeError, AttributeError):
        return None
    if isinstance(marked, dict) and marked.get("operation"):
        return str(marked["operation"])
    confs = restated_conf(tools, uri, batch)
    if confs is None:
        return None
    old, new = confs
    if new.get(PROVIDER_KEY, SPARK_DEFAULT_PROVIDER) != old.get(PROVIDER_KEY, SPARK_DEFAULT_PROVIDER):
        return "migrate"
    if new.get(SHUFFLE_PARTITIONS) != old.get(SHUFFLE_PARTITIONS):
        return "repartition"
    return None


def is_repartition_entry(tools: JvmTools, uri: str, batch: int) -> int | None:
    """If ``offsets/<batch>`` is a repartition batch (the same source offsets as ``offsets/<batch-1>``, only
    the shuffle partitions differ), its new partition count; else None. Spark's tool writes the same."""
    confs = restated_conf(tools, uri, batch)
    if confs is None:
        return None
    n_new = confs[1].get(SHUFFLE_PARTITIONS)
    if n_new is None or n_new == confs[0].get(SHUFFLE_PARTITIONS):
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

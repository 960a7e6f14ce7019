"""The log of Spark's file sink after a rewrite batch: ``repartition`` and ``migrate`` record their rewrite as a
batch ``B + 1`` that runs no query, so a query writing through Spark's file sink (``format("parquet")`` and
the other file formats with a ``path``) never writes ``<path>/_spark_metadata/<B+1>``. Spark's sink log
compacts every ``spark.sql.streaming.fileSink.log.compactInterval`` batches by reading every batch since the
previous compaction, and fails on the missing one (``[BATCH_METADATA_NOT_FOUND] Unable to find batch
.../_spark_metadata/<B+1>``), as does every reader of the sink's output. :func:`catch_up` writes, for each
rewrite batch the checkpoint records and the sink's log lacks, the entry Spark's ``FileStreamSinkLog`` writes
for a batch that wrote no files: ``v1`` alone, or, for a compaction batch, ``<b>.compact`` holding every entry
of the batches since the previous compaction, as Spark's compaction writes them (the same JSON lines).

It runs only after the checkpoint's commit of the rewrite batch (docs/repartition.md, "Spark's file sink"):
an entry written before would make the file sink skip a real batch ``B + 1`` run after a crash (Spark skips
a batch its sink log already has). It writes only missing entries, so running it again changes nothing.

Entries a sink's ``retention`` option would drop are kept: Spark drops them at its next compaction.
Spark's file sink log's format and rules are Spark's (``CompactibleFileStreamLog``): which batch is a
compaction batch and which interval a log's compact files imply are asked of Spark's own code through the
JVM. Spark's ``FileStreamSinkLog`` itself is not used to write, as it needs a SparkSession, which
``repartition``'s JVM does not run; the entries it would re-serialize are Spark's own lines, copied as they
are, so the result is the same bytes.
"""

from __future__ import annotations

from typing import Any

from lineagestore.checkpoint.errors import CheckpointError
from lineagestore.checkpoint.model import to_uri
from lineagestore.checkpoint.spark_files import batch_ids, rewrite_operation
from lineagestore.jvm import JvmTools

COMPACT_INTERVAL_KEY = "spark.sql.streaming.fileSink.log.compactInterval"
SPARK_DEFAULT_COMPACT_INTERVAL = 10  # SQLConf.FILE_SINK_LOG_COMPACT_INTERVAL's default
METADATA_DIR = "_spark_metadata"  # FileStreamSink.metadataDir
COMPACT_SUFFIX = ".compact"  # CompactibleFileStreamLog.COMPACT_FILE_SUFFIX
VERSION_LINE = "v1"  # FileStreamSinkLog.VERSION


def catch_up(
    tools: JvmTools,
    checkpoint_uri: str,
    sink_path: str,
    compact_interval: int = SPARK_DEFAULT_COMPACT_INTERVAL,
) -> dict[str, Any]:
    """Write the missing entries of the rewrite batches of ``checkpoint_uri`` into the log of the file sink at
    ``sink_path`` (the sink's ``path`` option). ``compact_interval``: the query's
    ``spark.sql.streaming.fileSink.log.compactInterval``; from the log's compact files Spark derives the
    interval it really uses, and so does this. ``CheckpointError`` naming the file when the log does not fit
    the checkpoint (another query's sink, a sink ahead of the checkpoint, an interval its files contradict)."""
    if compact_interval < 1:
        raise CheckpointError(
            f"the file sink's compaction interval must be at least 1, got {compact_interval}"
        )
    log_uri = f"{to_uri(sink_path)}/{METADATA_DIR}"
    rules = tools.file_sink_log_rules()
    entries = _entries(tools, log_uri, sink_path)
    compacts = sorted((b for b, name in entries.items() if name.endswith(COMPACT_SUFFIX)), reverse=True)
    interval = _interval(rules, compact_interval, compacts)
    for b, name in sorted(entries.items()):
        if name.endswith(COMPACT_SUFFIX) != bool(rules.isCompactionBatch(b, interval)):
            raise CheckpointError(
                f"{log_uri}/{name} does not fit the compaction interval {interval} (from {COMPACT_INTERVAL_KEY}="
                f"{compact_interval} and the log's compact files, as Spark derives it): give the query's "
                f"{COMPACT_INTERVAL_KEY} (--file-sink-compact-interval); nothing was written"
            )
    committed = batch_ids(tools, f"{checkpoint_uri}/commits")
    if not committed:
        raise CheckpointError(f"{checkpoint_uri} has no committed batch: its file sink needs nothing")
    sink_latest = max(entries, default=-1)
    if sink_latest > committed[-1]:
        raise CheckpointError(
            f"{log_uri} records batch {sink_latest}, beyond the last batch {checkpoint_uri} committed "
            f"({committed[-1]}): it is not this query's sink, or a batch the sink committed has no commit in the "
            "checkpoint (start the query once to finish it); nothing was written"
        )
    # batches below the newest compaction are in it: only it (a rewrite batch's compaction is checked) and
    # later ones matter
    newest_compact = compacts[0] if compacts else -1
    rewrites: list[int] = []
    for b in (b for b in committed if b >= newest_compact):
        if rewrite_operation(tools, checkpoint_uri, b) is not None:
            rewrites.append(b)
        elif b not in entries:
            raise CheckpointError(
                f"{log_uri} has no entry for batch {b}, which the query ran and committed in {checkpoint_uri}: "
                f"{sink_path} is not this query's file sink (give its `path` option); nothing was written"
            )
    written: list[str] = []
    lines_of: dict[int, list[str]] = {}
    for b in rewrites:
        present = entries.get(b)
        if present is not None:
            # entries are written whole (HadoopBlobStore.writeWhole), yet the newest one, with nothing after
            # it, is still compared with what this run would write and replaced if it differs: nothing in the
            # sink's log has read it yet, and a rewrite batch's entry has exactly one right content
            if b == sink_latest:
                try:
                    text = _entry(tools, rules, log_uri, entries, b, interval, lines_of)
                except CheckpointError:  # its sources are gone (Spark's clean-up): it was read since
                    continue
                if tools.read_text(f"{log_uri}/{present}") != text:
                    tools.write_text(f"{log_uri}/{present}", text, True)
                    written.append(present)
            continue
        name = f"{b}{COMPACT_SUFFIX}" if rules.isCompactionBatch(b, interval) else str(b)
        tools.write_text(
            f"{log_uri}/{name}", _entry(tools, rules, log_uri, entries, b, interval, lines_of), False
        )
        entries[b] = name
        written.append(name)
    return {
        "sink": log_uri,
        "compactInterval": interval,
        "rewriteBatches": rewrites,
        "written": written,
    }


def _entry(
    tools: JvmTools,
    rules: Any,
    log_uri: str,
    entries: dict[int, str],
    batch: int,
    interval: int,
    cache: dict[int, list[str]],
) -> str:
    """What Spark's FileStreamSinkLog writes for batch ``batch`` when it wrote no files: its version line, and
    for a compaction batch every entry of the batches since the previous compaction (that one included)."""
    text = VERSION_LINE
    if rules.isCompactionBatch(batch, interval):
        for source in range(max(0, batch - interval), batch):  # CompactibleFileStreamLog's valid batches
            text += "".join("\n" + line for line in _lines(tools, log_uri, entries, source, cache))
    return text


def _entries(tools: JvmTools, log_uri: str, sink_path: str) -> dict[int, str]:
    """Batch id -> file name of the log's entries (``<b>`` or ``<b>.compact``; Hadoop's ``.crc`` files and
    Spark's temporaries are not entries)."""
    listed = tools.list(log_uri)
    if listed is None:
        raise CheckpointError(
            f"{log_uri} does not exist: {sink_path} is not the path of a query's file sink (give the `path` "
            "option of its writeStream); nothing was written"
        )
    entries: dict[int, str] = {}
    for e in listed:
        name = e["name"]
        stem = name[: -len(COMPACT_SUFFIX)] if name.endswith(COMPACT_SUFFIX) else name
        if not e["dir"] and stem.isdigit():
            entries[int(stem)] = name
    return entries


def _interval(rules: Any, default: int, compacts_newest_first: list[int]) -> int:
    """The compaction interval Spark's sink log uses on this log (``CompactibleFileStreamLog.compactInterval``):
    the distance of the two newest compact files, else derived from the one compact file and the default,
    else the default."""
    if len(compacts_newest_first) >= 2:
        return compacts_newest_first[0] - compacts_newest_first[1]
    if compacts_newest_first:
        return int(rules.deriveCompactInterval(default, compacts_newest_first[0]))
    return default


def _lines(
    tools: JvmTools, log_uri: str, entries: dict[int, str], batch: int, cache: dict[int, list[str]]
) -> list[str]:
    """The entries (JSON lines) of batch ``batch``'s file, as Spark wrote them."""
    if batch in cache:
        return cache[batch]
    name = entries.get(batch)
    text = tools.read_text(f"{log_uri}/{name}") if name is not None else None
    if text is None:
        raise CheckpointError(
            f"{log_uri}/{batch} (or {batch}{COMPACT_SUFFIX}) does not exist, and the compaction of a later batch "
            "needs it: the sink's log is damaged; nothing was written for that batch"
        )
    lines = text.split("\n")
    if lines[0].strip() != VERSION_LINE:
        raise CheckpointError(
            f"{log_uri}/{name} starts with {lines[0][:20]!r}, not {VERSION_LINE!r}: not a log of Spark's file sink "
            "this version reads"
        )
    cache[batch] = [line for line in lines[1:] if line.strip()]
    return cache[batch]

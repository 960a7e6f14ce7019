"""A restartable streaming harness: feed rows from Python, run one trigger at a time, read every batch.

Used by the ``stream`` fixture of the pytest plugin (``lineagestore.testing.plugin``) and by lineagestore's
own end-to-end suites. Each *run* of a query:
  * reads a file-source directory (JSON lines, one file written atomically per run, explicit schema),
  * executes with ``trigger(availableNow=True)`` and ``awaitTermination()``, so it processes the new file
    (plus any no-data batch Spark decides to run) and stops,
  * restarts from the same checkpoint next time.

Every micro-batch's output is collected through ``foreachBatch`` into ``StreamHarness.outputs`` keyed by
batch id, so a replayed batch overwrites rather than duplicates its rows (idempotent by batch id); each row
a dict, or a tuple in column order with ``rows_as=tuple``. ``schema`` is the schema of every ``source`` that
names none.

After every run the harness checks that the checkpoint was really written by the provider the test asked
for (the provider class in the offset log, and the state file names the provider writes), because the
provider can be switched per query through ``spark.conf`` in a single SparkSession. ``provider=None`` takes
the session's provider when the harness is created ("lineagestore" or "builtin"; other providers: no check).
``check_provider=False`` leaves the check out, for a checkpoint that changes provider on purpose (a migration
from Spark's providers) or that the harness cannot read (an ``s3a://`` checkpoint of a plain harness).

``S3StreamHarness`` is the same with its checkpoint on ``s3a://`` (a bucket of ``lineagestore.testing.s3``).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from lineagestore import PROVIDER_CLASS, check_checkpoint_location

BUILTIN_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
LINEAGE_PROVIDER = PROVIDER_CLASS
PROVIDER_CLASSES = {"builtin": BUILTIN_PROVIDER, "lineagestore": LINEAGE_PROVIDER}

# Checkpoint format V2 file names: <version>_<uniqueId>.<ext>
_V2_FILE = re.compile(r"^(\d+)_([^.]+)\.(changelog|delta|zip)$")
# Which extensions prove that a provider wrote the state directory, and which must never appear.
_EXPECTED_EXT = {"builtin": "changelog", "lineagestore": "delta"}
_FOREIGN_EXT = {"builtin": "delta", "lineagestore": "changelog"}

RUN_TIMEOUT_S = 120


@dataclass
class RunResult:
    """What one availableNow run did."""

    batch_ids: list[int]
    progress: list[dict[str, Any]] = field(default_factory=list)

    @property
    def last_progress(self) -> dict[str, Any]:
        assert self.progress, "the run reported no progress"
        return self.progress[-1]

    def state_rows_total(self) -> int:
        """numRowsTotal summed over all stateful operators after the last batch of the run."""
        return sum(op["numRowsTotal"] for op in self.last_progress.get("stateOperators", []))


class StreamFailed(AssertionError):
    """A streaming run failed; the message carries Spark's error and the head of the JVM stack trace."""


def _stack_head(stack: str, frames_per_exception: int = 8, max_lines: int = 60) -> str:
    """The exception lines of a JVM stack trace (first line + every "Caused by:") with a few frames each."""
    out: list[str] = []
    frames = 0
    for line in stack.splitlines():
        text = line.strip()
        if text.startswith("at "):
            if frames < frames_per_exception:
                out.append(line)
            frames += 1
        elif text.startswith("Caused by:") or text.startswith("Suppressed:"):
            out.append(line)
            frames = 0
        elif not out:
            out.append(line)
    return "\n".join(out[:max_lines])


def describe_failure(exc: BaseException) -> str:
    desc = getattr(exc, "_desc", None) or str(exc).split("\n\nJVM stacktrace:")[0]
    desc = desc.split("=== Streaming Query ===")[0].strip()
    stack = getattr(exc, "_stackTrace", None) or ""
    return f"{type(exc).__name__}: {desc}\n--- JVM stack trace (exceptions and top frames) ---\n{_stack_head(stack)}"


class StreamHarness:
    """Feeds file-source inputs and runs one query repeatedly against one checkpoint."""

    def __init__(
        self,
        spark,
        root: Path,
        provider: str | None = None,
        *,
        schema: str | None = None,
        rows_as: type = dict,
        check_provider: bool = True,
    ):
        if rows_as not in (dict, tuple):
            raise ValueError(f"rows_as must be dict or tuple, not {rows_as!r}")
        self.spark = spark
        self.root = Path(root)
        if provider is None:
            current = spark.conf.get("spark.sql.streaming.stateStore.providerClass", None)
            provider = {cls: name for name, cls in PROVIDER_CLASSES.items()}.get(current)
        self.provider = provider
        self.schema = schema
        self.rows_as = rows_as
        self.check_provider = check_provider
        self.checkpoint = self.root / "checkpoint"
        self.outputs: dict[int, list[dict[str, Any]]] = {}
        self.runs: list[RunResult] = []
        # Called as hook(df, batch_id) in foreachBatch once the batch ran, before its rows are kept.
        self.batch_hooks: list[Callable[[Any, int], None]] = []
        self._inputs: dict[str, Path] = {}
        self._file_seq = 0
        self._staging = self.root / "staging"
        self._staging.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ input
    def input_dir(self, name: str) -> Path:
        if name not in self._inputs:
            path = self.root / "input" / name
            path.mkdir(parents=True, exist_ok=True)
            self._inputs[name] = path
        return self._inputs[name]

    def source(self, name: str, schema: str | None = None):
        """A streaming DataFrame over input ``name`` (``schema``, else the harness's); one file per
        micro-batch."""
        schema = schema or self.schema
        if schema is None:
            raise ValueError(f"source({name!r}) needs a schema: give one, or the harness's schema=")
        return (
            self.spark.readStream.schema(schema)
            .option("maxFilesPerTrigger", 1)
            .json(str(self.input_dir(name)))
        )

    def sibling(self, name: str) -> StreamHarness:
        """Another harness (own inputs and checkpoint) next to this one, e.g. for a second query."""
        return type(self)(self.spark, self.root.parent / name, self.provider, **self._settings())

    def _settings(self) -> dict[str, Any]:
        """The keyword settings this harness was made with, for a sibling made the same way."""
        return {"schema": self.schema, "rows_as": self.rows_as, "check_provider": self.check_provider}

    def add(self, rows: Iterable[dict[str, Any]], source: str = "in") -> Path:
        """Add one batch of rows (dicts) to input ``source``: the next run reads them as one micro-batch."""
        return self.write(source, rows)

    def write(self, name: str, rows: Iterable[dict[str, Any]]) -> Path:
        """Atomically add one JSON-lines file to input ``name`` (temp file + rename)."""
        target_dir = self.input_dir(name)
        self._file_seq += 1
        final = target_dir / f"part-{self._file_seq:05d}.json"
        fd, tmp = tempfile.mkstemp(dir=self._staging, suffix=".json.tmp")
        with os.fdopen(fd, "w") as f:
            for row in rows:
                f.write(json.dumps(row, sort_keys=True) + "\n")
        os.replace(tmp, final)
        return final

    # ------------------------------------------------------------------- runs
    def _collect(self, df, batch_id: int) -> None:
        collected = df.collect()  # runs the batch: stores commit
        rows = [tuple(r) if self.rows_as is tuple else r.asDict(recursive=True) for r in collected]
        for hook in self.batch_hooks:
            hook(df, batch_id)
        self.outputs[batch_id] = rows

    def run(
        self,
        build: Callable[[StreamHarness], Any],
        output_mode: str = "append",
        query_name: str | None = None,
        trigger: str = "availableNow",
    ) -> RunResult:
        """Start the query built by ``build(self)``, wait for it to stop by itself, verify the provider.

        ``trigger="availableNow"`` (default) processes the new file plus the no-data batch Spark may add.
        ``trigger="once"`` runs exactly one batch; needed for transformWithState in ProcessingTime mode,
        whose ``shouldRunAnotherBatch`` is always true, so an availableNow run never stops (Spark 4.3).
        """
        df = build(self)
        writer = (
            df.writeStream.outputMode(output_mode)
            .option("checkpointLocation", str(self.checkpoint))
            .foreachBatch(self._collect)
        )
        if trigger == "availableNow":
            writer = writer.trigger(availableNow=True)
        elif trigger == "once":
            writer = writer.trigger(once=True)
        else:
            raise ValueError(f"unsupported trigger {trigger!r}")
        if query_name:
            writer = writer.queryName(query_name)
        check_checkpoint_location(self.spark, str(self.checkpoint))  # s3a:// without hadoop-aws: say so
        query = writer.start()
        try:
            finished = query.awaitTermination(RUN_TIMEOUT_S)
        except Exception as exc:  # StreamingQueryException and friends
            raise StreamFailed(f"run {len(self.runs)} failed\n{describe_failure(exc)}") from exc
        finally:
            if query.isActive:
                query.stop()
        if not finished:
            raise StreamFailed(f"run {len(self.runs)} did not finish within {RUN_TIMEOUT_S}s")
        progress = [json.loads(p.json) for p in query.recentProgress]
        result = RunResult(batch_ids=[p["batchId"] for p in progress], progress=progress)
        self.runs.append(result)
        self.verify_provider()
        return result

    # ---------------------------------------------------------------- outputs
    def rows(self, batch_ids: Iterable[int] | None = None) -> list[dict[str, Any]]:
        ids = sorted(self.outputs) if batch_ids is None else batch_ids
        return [row for bid in ids for row in self.outputs.get(bid, [])]

    def batch_outputs(self, key: Callable[[dict[str, Any]], tuple]) -> dict[int, list[tuple]]:
        """All collected outputs as ``{batch_id: sorted tuples}``, converting rows with ``key``."""
        return {bid: sorted(key(r) for r in rows) for bid, rows in sorted(self.outputs.items())}

    # ------------------------------------------------------- provider checks
    def offset_log_conf(self) -> dict[str, str]:
        offsets = self.checkpoint / "offsets"
        latest = max((int(p.name) for p in offsets.iterdir() if p.name.isdigit()), default=None)
        assert latest is not None, f"no offset log entries in {offsets}"
        lines = (offsets / str(latest)).read_text().splitlines()
        return json.loads(lines[1]).get("conf", {})

    def state_files(self) -> list[Path]:
        state = self.checkpoint / "state"
        if not state.exists():
            return []
        return [Path(d) / f for d, _, files in os.walk(state) for f in files if not f.startswith(".")]

    def verify_provider(self) -> None:
        """The checkpoint must have been written by the provider the test is parametrised with."""
        if not self.check_provider or self.provider not in PROVIDER_CLASSES:
            return  # not asked for, or a provider we know nothing about
        conf = self.offset_log_conf()
        expected = PROVIDER_CLASSES[self.provider]
        recorded = conf.get("spark.sql.streaming.stateStore.providerClass")
        assert recorded == expected, f"offset log records provider {recorded!r}, expected {expected!r}"
        names = [p.name for p in self.state_files()]
        if not names:  # stateless so far (e.g. nothing committed); nothing to check
            return
        exts = [m.group(3) for m in map(_V2_FILE.match, names) if m]
        want, foreign = _EXPECTED_EXT[self.provider], _FOREIGN_EXT[self.provider]
        assert want in exts, (
            f"{self.provider}: no '<version>_<uniqueId>.{want}' file under {self.checkpoint / 'state'}; "
            f"found {sorted(names)[:20]}"
        )
        assert foreign not in exts, (
            f"{self.provider}: unexpected '.{foreign}' files under {self.checkpoint / 'state'}: "
            f"{sorted(n for n in names if n.endswith('.' + foreign))[:10]}"
        )


def as_tuples(rows: Sequence[dict[str, Any]], cols: Sequence[str]) -> list[tuple]:
    return sorted(tuple(r[c] for c in cols) for r in rows)


def close_state_stores(spark: Any) -> None:
    """Closes every state store provider loaded in this driver's JVM, as an executor restart would (Spark's
    ``StateStore.unloadAll``): each lineagestore store uploads its frozen snapshots first, and none is left for
    a later maintenance pass to upload while a tool reads or cleans the checkpoint. An upload that a
    maintenance thread had already started may still land just after: list files once they have settled.
    Only for a driver that runs its own tasks (``local[N]``)."""
    state = spark._jvm.org.apache.spark.sql.execution.streaming.state
    getattr(getattr(state, "StateStore$"), "MODULE$").unloadAll()


def list_keys(client, bucket: str, prefix: str = "") -> list[str]:
    """Every object key under ``prefix`` (directory marker objects ending in ``/`` left out)."""
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", []) if not o["Key"].endswith("/")]
    return keys


class S3StreamHarness(StreamHarness):
    """A StreamHarness whose checkpoint is ``s3a://<bucket>/<prefix>``; inputs stay local.

    ``server`` is a ``lineagestore.testing.s3.S3Server`` whose settings for ``bucket`` are in the session's
    Hadoop configuration (the ``s3_bucket`` fixture does that). The provider checks read the offset log and
    list the state files through boto3.
    """

    def __init__(
        self, spark, root: Path, provider: str | None, server, bucket: str, prefix: str, **harness: Any
    ):
        super().__init__(spark, root, provider, **harness)
        self.server = server
        self.client = server.boto3_client()
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.checkpoint = f"s3a://{bucket}/{self.prefix}"  # type: ignore[assignment]

    def sibling(self, name: str) -> S3StreamHarness:
        root = self.root.parent / name
        prefix = f"{self.prefix}-{name}"
        return type(self)(
            self.spark, root, self.provider, self.server, self.bucket, prefix, **self._settings()
        )

    def keys(self, under: str = "") -> list[str]:
        """Keys of the checkpoint, relative to it (e.g. ``state/0/1/3_<id>.delta``)."""
        base = f"{self.prefix}/{under}".rstrip("/") + "/"
        return [k[len(self.prefix) + 1 :] for k in list_keys(self.client, self.bucket, base)]

    def read(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.bucket, Key=f"{self.prefix}/{key}")["Body"].read()

    def offset_log_conf(self) -> dict[str, Any]:
        batches = [int(k.split("/")[-1]) for k in self.keys("offsets") if k.split("/")[-1].isdigit()]
        assert batches, f"no offset log entries under {self.checkpoint}/offsets"
        lines = self.read(f"offsets/{max(batches)}").decode().splitlines()
        return json.loads(lines[1]).get("conf", {})

    def state_files(self) -> list[PurePosixPath]:  # type: ignore[override]
        return [PurePosixPath(k) for k in self.keys("state") if not PurePosixPath(k).name.startswith(".")]

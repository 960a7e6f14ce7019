"""The recovery procedures of docs/operations.md ("When a checkpoint needs a hand"), run as written.

Each test brings a real checkpoint into the state the section describes (a damaged delta; Spark's refused
offline repartition), checks the error the user sees, then runs the section's ``sh`` block with bash, with
``CKPT`` pointing at the checkpoint and the ``lineagestore`` command of this environment on ``PATH``, and
restarts the query, which must produce the oracle's answer. A doc that drifts from what works fails here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lineagestore.testing.harness import PROVIDER_CLASSES

DOC = Path(__file__).resolve().parent.parent / "docs" / "operations.md"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
MIN_DELTAS = "spark.sql.streaming.stateStore.minDeltasForSnapshot"


def doc_block(heading: str) -> str:
    """The first ``sh`` block after ``### <heading>`` in operations.md, without its ``CKPT=`` line."""
    text = DOC.read_text()
    start = text.index(f"### {heading}\n")
    block = re.search(r"^```sh\n(.*?)^```$", text[start:], re.S | re.M).group(1)
    return re.sub(r"^CKPT=.*\n", "", block, flags=re.M)


def run_doc_block(heading: str, checkpoint: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, CKPT=str(checkpoint))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # this env's `lineagestore`
    return subprocess.run(
        ["bash", "-c", doc_block(heading)], env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def lineage_session(spark):
    """The session on lineagestore, snapshots held back so every load replays the deltas (a damaged delta
    is then on every load's path)."""
    saved = {k: spark.conf.get(k) for k in (PROVIDER, MIN_DELTAS)}
    spark.conf.set(PROVIDER, PROVIDER_CLASSES["lineagestore"])
    spark.conf.set(MIN_DELTAS, "1000")
    yield spark
    for k, v in saved.items():
        spark.conf.set(k, v)


class Counts:
    """groupBy(k).count() over a JSON directory, complete mode through foreachBatch (as users' pipelines)."""

    def __init__(self, spark, root: Path):
        self.spark, self.source, self.checkpoint = spark, root / "in", root / "checkpoint"
        self.source.mkdir()
        self.latest: dict[str, int] = {}
        self.files = 0

    def add(self, *keys: str) -> None:
        tmp = self.source / f".{self.files}.tmp"
        tmp.write_text("".join(json.dumps({"k": k}) + "\n" for k in keys))
        tmp.rename(self.source / f"{self.files}.json")  # atomic: the source never sees half a file
        self.files += 1

    def run(self) -> None:
        def sink(df, _batch_id):
            self.latest = {r["k"]: r["count"] for r in df.collect()}

        counts = self.spark.readStream.schema("k string").json(str(self.source)).groupBy("k").count()
        query = (
            counts.writeStream.outputMode("complete")
            .foreachBatch(sink)
            .option("checkpointLocation", str(self.checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()


def test_restarting_from_an_older_checkpoint_as_documented(lineage_session, tmp_path):
    q = Counts(lineage_session, tmp_path)
    for b in range(5):  # batches 0..4, versions 1..5; one run per batch, as a scheduled job
        q.add("a", f"k{b}")
        q.run()
    delta = next((q.checkpoint / "state" / "0" / "0").glob("5_*.delta"))
    data = bytearray(delta.read_bytes())
    data[len(data) // 2] ^= 0x01
    delta.write_bytes(bytes(data))
    (delta.parent / f".{delta.name}.crc").unlink()

    q.add("a", "k5")
    with pytest.raises(Exception) as failure:
        q.run()
    text = str(failure.value)
    assert "FOREACH_BATCH_USER_FUNCTION_ERROR" in text and delta.name in text
    assert "docs/operations.md#restarting-from-an-older-checkpoint" in text  # the error says where to go

    done = run_doc_block("Restarting from an older checkpoint", q.checkpoint)
    # the block's first verify names the file and batch 4 (its B=4), the last one passes
    assert f"{delta.name}" in done.stdout and "needed by batch(es) 4" in done.stdout, done.stdout
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in (q.checkpoint / "commits").iterdir() if p.name.isdigit()) == list("0123")

    q.run()
    assert q.latest == {"a": 6, **{f"k{b}": 1 for b in range(6)}}


def test_refused_offline_repartition_recovers_as_documented(lineage_session, tmp_path):
    q = Counts(lineage_session, tmp_path)
    q.add("a", "b")
    q.run()
    q.add("a")
    q.run()  # batches 0 and 1
    with pytest.raises(Exception, match="UNSUPPORTED_PROVIDER"):
        lineage_session._streamingCheckpointManager.repartition(str(q.checkpoint), 3)
    assert (q.checkpoint / "offsets" / "2").exists() and not (q.checkpoint / "commits" / "2").exists()
    with pytest.raises(Exception, match="STREAMING_UNFINISHED_REPARTITION_DETECTED"):
        q.run()

    done = run_doc_block("Changing the number of partitions", q.checkpoint)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (q.checkpoint / "offsets" / "2").exists()
    q.add("b")
    q.run()
    assert q.latest == {"a": 2, "b": 2}

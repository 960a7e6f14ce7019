"""Every verb's text report fits an 80-column terminal and is plain text when stdout is not a terminal: no
line over 80 characters, no ANSI escape, no box drawing (docs/operations.md, "How it works").

One small streaming aggregation (2 partitions, a snapshot every 2 versions) gives a real checkpoint; inspect,
verify (on a damaged copy, so that its problem report is drawn), gc, clone and repartition run on it through
the command line in this process, inspect on an adjunct table maintained and looked up in the same session;
migrate's report (it needs a checkpoint of Spark's own providers and a session of its own) is rendered from
the result migrate returns.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from lineagestore.cli import EXIT_OK, EXIT_PROBLEMS
from lineagestore.testing.cli import run_cli
from lineagestore.testing.session import SNAPSHOT_OFTEN, local_session

WIDTH = 80
ANSI = re.compile(r"\x1b\[")
BOX = re.compile(r"[\u2500-\u257f]")


def assert_fits(text: str) -> None:
    assert text.strip(), "no report"
    # a path longer than the page stays whole on a line of its own (it could not be copied otherwise): only a
    # line with a space in it, i.e. one the renderer could have wrapped, counts as too long
    long = [line for line in text.splitlines() if len(line) > WIDTH and " " in line.strip()]
    assert not long, "\n".join(long)
    assert not ANSI.search(text) and not BOX.search(text), text


@pytest.fixture(scope="module")
def spark():
    session = local_session(app_name="lineagestore-cli-80-columns", conf=SNAPSHOT_OFTEN)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def checkpoint(spark, tmp_path_factory) -> Path:
    from pyspark.sql import functions as F

    work = tmp_path_factory.mktemp("w80")
    source, cp = work / "in", work / "cp"
    source.mkdir()
    query = (
        spark.readStream.schema("user string, n int")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .groupBy("user")
        .agg(F.sum("n").alias("clicks"))
        .writeStream.outputMode("update")
        .foreachBatch(lambda df, _: df.count())
        .option("checkpointLocation", str(cp))
        .start()
    )
    try:
        for b in range(4):
            rows = [{"user": f"u{u:02d}", "n": b + 1} for u in range(10)]
            (source / f"b{b}.json").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
            query.processAllAvailable()
        deadline = time.monotonic() + 60
        while not list((cp / "state" / "0" / "0").glob("*.zip")) and time.monotonic() < deadline:
            time.sleep(0.3)
    finally:
        query.stop()
    time.sleep(2)  # the stopped query's maintenance settles
    return cp


def run(monkeypatch, *argv: str) -> tuple[int, str]:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    result = run_cli(["--no-progress", *argv])
    assert not ANSI.search(result.err), result.err
    return result.code, result.out


def test_inspect_verify_gc_clone_and_repartition_fit_80_columns(checkpoint, monkeypatch, tmp_path):
    rc, out = run(monkeypatch, "inspect", str(checkpoint))
    assert rc == EXIT_OK, out
    assert_fits(out)
    assert "state/0/1" in out and "orphan blobs" in out  # the store table, its second column group too

    damaged = tmp_path / "damaged"
    shutil.copytree(checkpoint, damaged)
    delta = sorted((damaged / "state" / "0" / "0").glob("*.delta"))[-1]
    data = bytearray(delta.read_bytes())
    data[len(data) // 2] ^= 0x01
    delta.write_bytes(bytes(data))
    (delta.parent / f".{delta.name}.crc").unlink()
    rc, out = run(monkeypatch, "verify", str(damaged))
    assert rc == EXIT_PROBLEMS and delta.name in out and "PROBLEMS FOUND" in out, out
    assert_fits(out)

    stray = checkpoint / "state" / "0" / "0" / "shared" / "stray-upload.sst"
    stray.write_bytes(b"left by a crashed upload")
    try:
        rc, out = run(monkeypatch, "gc", str(checkpoint), "--retain", "1")
        assert rc == EXIT_OK and "keep    shared/stray-upload.sst" in out, out
        assert_fits(out)
    finally:
        stray.unlink()

    rc, out = run(monkeypatch, "clone", str(checkpoint), str(tmp_path / "clone"))
    assert rc == EXIT_OK and "hard-linked" in out, out
    assert_fits(out)

    rc, out = run(monkeypatch, "repartition", str(checkpoint), "--partitions", "3", "--dry-run")
    assert rc == EXIT_OK and "dry run: would write" in out, out
    assert_fits(out)


def test_inspect_of_an_adjunct_table_fits_80_columns(spark, monkeypatch, tmp_path):
    from lineagestore import adjunct

    table = str(tmp_path / "table")
    changes = spark.createDataFrame(
        [(k, "upsert", 1, f"name-{k}") for k in range(5)], "id int, op string, seq long, name string"
    )
    adjunct.maintain_batch(changes, 0, table, ["id"], "seq")
    adjunct.lookup(spark.createDataFrame([(1,), (7,)], "id int"), table).collect()  # a replica loads it
    rc, out = run(monkeypatch, "inspect", table)
    assert rc == EXIT_OK and "versions       1..1 (1 kept)" in out, out
    assert_fits(out)


def test_migrate_report_fits_80_columns(monkeypatch):
    from lineagestore.checkpoint.migration import SPARK_PROVIDERS
    from lineagestore.cli import migrate

    monkeypatch.setenv("COLUMNS", str(WIDTH))
    result = {  # what lineagestore.checkpoint.migrate returns
        "checkpoint": "file:/data/checkpoints/clicks-on-spark-rocksdb",
        "from": SPARK_PROVIDERS[1],  # the longest provider class name
        "lastBatch": 41,
        "newBatch": 42,
        "oldPartitions": 200,
        "newPartitions": 12,
        "rowsMoved": 1_234_567,
    }
    text = migrate.render(result)
    assert_fits(text)
    assert "moved 1234567 rows" in text and SPARK_PROVIDERS[1] in text

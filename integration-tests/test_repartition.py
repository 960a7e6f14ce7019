"""``lineagestore repartition`` end to end: a query runs, stops, is repartitioned, restarts and runs on; its
outputs must equal a plain-Python oracle's, its state must sit where Spark's own shuffle puts each key, and
``verify`` must find the checkpoint clean.

All tests share the session's SparkSession (local[2]) and use a few dozen rows: they prove placement and
bookkeeping, not scale (integration-tests/bench has the sizes).
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from lineagestore import repartition as rp
from lineagestore.checkpoint import CheckpointError, gc, inspect, load, verify
from lineagestore.jvm import connect
from lineagestore.testing.cli import hadoop_conf_args
from lineagestore.testing.harness import PROVIDER_CLASSES, RunResult, StreamHarness, close_state_stores

SCHEMA = "k string, g int, v long"


@pytest.fixture
def tools(spark):
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", PROVIDER_CLASSES["lineagestore"])
    with connect(in_session="ignore") as t:
        yield t
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", PROVIDER_CLASSES["builtin"])
    spark.conf.set("spark.sql.shuffle.partitions", "2")


@pytest.fixture(params=["tools-jvm", "spark-job"])
def rewriter(request, spark, tools):
    """What ``repartition`` is given: the tools (their JVM rewrites the stores on its threads) or the
    SparkSession (a Spark job, a task per group of new partitions); both must write the same state."""
    return tools if request.param == "tools-jvm" else spark


class Query(StreamHarness):
    """The harness with one query bound: ``run()`` starts ``build`` in output ``mode`` with ``trigger``.
    Every source reads SCHEMA, each batch's rows are tuples (the oracles' form), and the provider is not
    checked: these checkpoints move between providers (migrations) or live on s3a://."""

    def __init__(self, spark, root: Path, build, mode: str = "update", trigger: str = "availableNow"):
        super().__init__(spark, root, schema=SCHEMA, rows_as=tuple, check_provider=False)
        self.build, self.mode, self.trigger = build, mode, trigger

    def run(self, build=None, output_mode=None, query_name=None, trigger=None) -> RunResult:
        return super().run(build or self.build, output_mode or self.mode, query_name, trigger or self.trigger)


def _rows(rnd: random.Random, n: int, keys: int = 40) -> list[dict]:
    return [
        {"k": f"k{rnd.randrange(keys)}", "g": rnd.randrange(3), "v": rnd.randrange(1, 9)} for _ in range(n)
    ]


def _placement_matches_spark(spark, checkpoint: Path, n: int, key_cols: list[str], **options) -> None:
    """Every key in the state is in the partition Spark's shuffle sends it to: the state data source's
    partition_id against spark_partition_id() after repartition(n, key columns) of the same keys."""
    reader = spark.read.format("statestore")
    for k, v in options.items():
        reader = reader.option(k, v)
    # the key's fields by position (a join's state names them field0, field1, ...)
    state = reader.load(str(checkpoint)).select("partition_id", "key.*").toDF("partition_id", *key_cols)
    placed = {tuple(r[1:]): r[0] for r in state.collect()}
    assert placed, "the state is empty: nothing was checked"
    keys = spark.createDataFrame(list(placed), StructType(state.schema.fields[1:]))
    shuffled = keys.repartition(n, *key_cols).select(F.spark_partition_id().alias("p"), *key_cols).collect()
    expected = {tuple(r[1:]): r[0] for r in shuffled}
    assert placed == expected
    assert set(placed.values()) <= set(range(n))


def _settled_files(checkpoint: Path, quiet_s: float = 1.0, timeout_s: float = 60.0) -> set[Path]:
    """The checkpoint's files once the stores' background uploads are done: a store uploads its snapshot after
    the commit (partition 1 freezes at version 1), so a listing taken as the query ends can hold an in-flight
    temporary (`.<name>.<uuid>.tmp`) that is renamed a moment later. Waits until no temporary is left and the
    listing held still for `quiet_s`."""
    deadline = time.monotonic() + timeout_s
    last: set[Path] | None = None
    still_since = time.monotonic()
    while True:
        now = {p for p in checkpoint.rglob("*") if p.is_file()}
        if now != last or any(p.name.startswith(".") and p.name.endswith(".tmp") for p in now):
            last, still_since = now, time.monotonic()
        elif time.monotonic() - still_since >= quiet_s:
            return now
        assert time.monotonic() < deadline, (
            f"uploads under {checkpoint} did not settle in {timeout_s} s: {now}"
        )
        time.sleep(0.1)


def _verify_clean(tools, checkpoint: Path) -> None:
    result = verify(tools, load(tools, str(checkpoint)), None)
    assert result["ok"], json.dumps(result, indent=2)[:3000]


def test_dedup_then_aggregation_up_and_down(spark, tools, rewriter, tmp_path):
    """Two stateful operators (dropDuplicates, then groupBy count/sum): 3 -> 6 (a multiple: each old partition
    grows alone) -> 4 (neither a multiple nor a divisor: every key placed among all)."""

    def build(q):
        return q.source("in").dropDuplicates(["k", "g", "v"]).groupBy("k", "g").agg(F.count("*"), F.sum("v"))

    rnd = random.Random(5)
    q = Query(spark, tmp_path, build)
    seen: set[tuple] = set()
    totals: dict[tuple, tuple[int, int]] = {}
    expected: dict[int, list[tuple]] = {}
    batch = 0
    for step, partitions in enumerate([3, 6, None, 4, None]):
        if partitions is not None and step > 0:
            out = rp.repartition(rewriter, str(q.checkpoint), partitions)
            assert out["newPartitions"] == partitions and out["rowsMoved"] > 0
            assert out["ranAs"] == ("spark job" if rewriter is spark else "tools JVM")
            batch += 1  # the repartition is a batch of its own, without output
            _placement_matches_spark(spark, q.checkpoint, partitions, ["k", "g"], operatorId=0)  # aggregation
            _placement_matches_spark(
                spark, q.checkpoint, partitions, ["k", "g", "v"], operatorId=1
            )  # dropDuplicates
            _verify_clean(tools, q.checkpoint)
            continue
        spark.conf.set(
            "spark.sql.shuffle.partitions", str(partitions or 2)
        )  # ignored once a checkpoint exists
        rows = _rows(rnd, 30)
        q.write("in", rows)
        changed = set()
        for r in rows:
            t = (r["k"], r["g"], r["v"])
            if t in seen:
                continue
            seen.add(t)
            c, s = totals.get((r["k"], r["g"]), (0, 0))
            totals[(r["k"], r["g"])] = (c + 1, s + r["v"])
            changed.add((r["k"], r["g"]))
        expected[batch] = sorted((k, g, *totals[(k, g)]) for k, g in changed)
        q.run()
        batch += 1
    assert {b: sorted(rows) for b, rows in q.outputs.items()} == expected
    _verify_clean(tools, q.checkpoint)


def test_stream_stream_join_up_and_down(spark, tools, rewriter, tmp_path):
    """An inner join's four stores per partition (keys: join key, join key + index): 3 -> 4 -> 2 (a divisor:
    pairs of old partitions fold into one without placing a key)."""

    def build(q):
        left = q.source("left").select(F.col("k").alias("lk"), F.col("g").alias("lg"), F.col("v").alias("lv"))
        right = q.source("right").select(
            F.col("k").alias("rk"), F.col("g").alias("rg"), F.col("v").alias("rv")
        )
        return left.join(right, F.expr("lk = rk AND lg = rg"))

    spark.conf.set("spark.sql.shuffle.partitions", "3")
    rnd = random.Random(9)
    q = Query(spark, tmp_path, build, mode="append")
    lefts: list[dict] = []
    rights: list[dict] = []

    def run_a_batch():
        new_l, new_r = _rows(rnd, 12, keys=10), _rows(rnd, 12, keys=10)
        q.write("left", new_l)
        q.write("right", new_r)
        lefts.extend(new_l)
        rights.extend(new_r)
        q.run()

    def assert_joined_exactly():
        got = Counter(r for rows in q.outputs.values() for r in rows)
        want = Counter(
            (a["k"], a["g"], a["v"], b["k"], b["g"], b["v"])
            for a in lefts
            for b in rights
            if (a["k"], a["g"]) == (b["k"], b["g"])
        )
        assert got == want

    for step in range(3):
        if step > 0:
            n = 4 if step == 1 else 2
            rp.repartition(rewriter, str(q.checkpoint), n)
            _placement_matches_spark(spark, q.checkpoint, n, ["lk", "lg"], joinSide="left", operatorId=0)
            _verify_clean(tools, q.checkpoint)
        run_a_batch()
    assert_joined_exactly()
    _verify_clean(tools, q.checkpoint)

    # partitions 2 and 3 are gone since batch 3 (the repartition to 2); batch 2 was the last to name their
    # stores. gc keeps them while a retained batch (a restart point) needs them, then retires them whole.
    # Their providers are still loaded: partition 3 froze version 3 (its phase) and a maintenance pass uploads
    # it whenever the shared pool gets to it (in a full suite, after batch 4); closed, they upload it now, and
    # gc at a grace of 0 sees no unfinished upload of theirs.
    close_state_stores(spark)
    _settled_files(q.checkpoint)
    kept = gc(tools, load(tools, str(q.checkpoint)), 3, 0, False)  # batches 2..4 retained
    assert not [d for st in kept["stores"] for d in st["delete"] if d["reason"]["kind"] == "retiredStore"]
    done = gc(tools, load(tools, str(q.checkpoint)), 2, 0, True)  # batches 3..4: none names them
    retired = [st for st in done["stores"] if st["partitionId"] >= 2]
    assert len(retired) == 2 * 4  # two partitions, a join's four stores each
    for st in retired:
        files = [d for d in st["delete"] if not d["file"].startswith("shared/")]  # blobs: their own reason
        assert files and all(d["reason"]["kind"] == "retiredStore" for d in files), st["delete"]
    left = [f for part in (2, 3) for f in (q.checkpoint / "state" / "0" / str(part)).rglob("*.*")]
    assert not [f for f in left if f.suffix in (".delta", ".zip", ".sst")], left
    assert not done["errors"]
    # what gc retired is not damage: verify and inspect need nothing of those stores any more
    _verify_clean(tools, q.checkpoint)
    assert not inspect(tools, load(tools, str(q.checkpoint)))["problems"]
    # the live partitions lost nothing they need: the query runs on, exactly
    run_a_batch()
    assert_joined_exactly()


def test_refusals_name_the_cause(spark, tools, tmp_path):
    def build(q):
        return q.source("in").groupBy("k").count()

    spark.conf.set("spark.sql.shuffle.partitions", "2")
    q = Query(spark, tmp_path, build)
    q.write("in", _rows(random.Random(1), 5))
    q.run()
    cp = str(q.checkpoint)
    with pytest.raises(CheckpointError, match="at least 1"):
        rp.repartition(tools, cp, 0)
    with pytest.raises(CheckpointError, match="already has 2 partitions"):
        rp.repartition(tools, cp, 2)
    # a batch started and not committed: a running query (or one stopped mid-batch) holds the checkpoint
    offsets = q.checkpoint / "offsets"
    (offsets / "1").write_text((offsets / "0").read_text().replace('"logOffset":0', '"logOffset":1'))
    with pytest.raises(CheckpointError, match="no commit: a query is running it"):
        rp.repartition(tools, cp, 3)
    (offsets / "1").unlink()
    # a dry run writes nothing
    before = sorted(p.name for p in _settled_files(q.checkpoint))
    out = rp.repartition(tools, cp, 3, dry_run=True)
    assert out["dryRun"] and any("commits/1" in w for w in out["writes"])
    assert sorted(p.name for p in q.checkpoint.rglob("*") if p.is_file()) == before


def test_interrupted_repartition_is_recognised_then_finished_or_undone(spark, tools, tmp_path):
    """Spark's own tool (and a crash of ours after offsets/B+1) leaves an offset entry without commit:
    verify explains it, --undo removes only that entry, and a re-run finishes it."""
    q, rows = _summing_query(spark, tmp_path, 3)
    cp = str(q.checkpoint)
    entry = rp.repartitioned_offsets(tools, f"{load(tools, cp).uri}/offsets/0", 3)
    (q.checkpoint / "offsets" / "1").write_text(entry)
    c = load(tools, cp)
    note = rp.unfinished_repartition(tools, c.uri, c.batches, c.uncommitted)
    assert note and "unfinished repartition to 3 partitions" in note and "--undo" in note
    checked = verify(tools, c, None)
    assert not checked["ok"] and checked["problems"][-1]["error"] == note
    with pytest.raises(CheckpointError, match="finish it with --partitions 3"):
        rp.repartition(tools, cp, 4)
    rp.undo(tools, cp)
    assert not (q.checkpoint / "offsets" / "1").exists()
    (q.checkpoint / "offsets" / "1").write_text(entry)
    out = rp.repartition(tools, cp, 3)
    assert out["resume"]
    _verify_clean(tools, q.checkpoint)
    _resumes_exactly(q, rows, 4)


def _summing_query(spark, tmp_path, seed: int) -> tuple[Query, list[dict]]:
    """A ``groupBy(k).agg(sum(v))`` query on 2 partitions that ran one batch of 20 rows: the checkpoint the
    step and failure tests repartition. Returns the query and its rows."""

    def build(q):
        return q.source("in").groupBy("k").agg(F.sum("v"))

    spark.conf.set("spark.sql.shuffle.partitions", "2")
    q = Query(spark, tmp_path, build)
    rows = _rows(random.Random(seed), 20)
    q.write("in", rows)
    q.run()
    return q, rows


def _resumes_exactly(q: Query, rows: list[dict], seed: int) -> None:
    """After the repartition (batch 1), batch 2 of 10 more rows: its output is the running sums of its keys."""
    more = _rows(random.Random(seed), 10)
    q.write("in", more)
    q.run()
    totals: dict[str, int] = {}
    for r in rows + more:
        totals[r["k"]] = totals.get(r["k"], 0) + r["v"]
    assert sorted(q.outputs[2]) == sorted((k, totals[k]) for k in {r["k"] for r in more})


@pytest.mark.parametrize("step", rp.STEPS)
def test_crash_at_each_step_then_rerun_finishes(spark, tools, tmp_path, step):
    """A crash at each named step leaves the old checkpoint (plus unreferenced files) or an uncommitted
    repartition entry; the same command again finishes, nothing committed before is deleted, and the query
    resumes with exact results."""

    q, rows = _summing_query(spark, tmp_path, 6)
    cp = str(q.checkpoint)
    before = _settled_files(q.checkpoint)
    with pytest.raises(rp.InjectedCrash):
        rp.repartition(tools, cp, 3, crash_at=step)
    assert not (q.checkpoint / "commits" / "1").exists()
    assert (q.checkpoint / "offsets" / "1").exists() == (step == rp.STEP_AFTER_OFFSETS)
    out = rp.repartition(tools, cp, 3)
    assert out["resume"] == (step == rp.STEP_AFTER_OFFSETS)
    assert before <= {p for p in q.checkpoint.rglob("*") if p.is_file()}, (
        "a file of the old lineage was deleted"
    )
    _verify_clean(tools, q.checkpoint)
    _resumes_exactly(q, rows, 7)


def test_failed_job_leaves_the_checkpoint_then_a_rerun_finishes(spark, tools, tmp_path):
    """The Spark job's first task fails after writing its new stores; in local mode a task is not retried, so
    the job fails: nothing of Spark's files is written, nothing committed is deleted, the written stores are
    orphans, and the same call again finishes with exact results."""
    from lineagestore.jvm import ToolError

    q, rows = _summing_query(spark, tmp_path, 16)
    cp = str(q.checkpoint)
    before = _settled_files(q.checkpoint)
    with pytest.raises(ToolError, match="repartition.task-after-write"):
        rp.repartition(spark, cp, 4, crash_at=rp.STEP_TASK_AFTER_WRITE)
    assert not (q.checkpoint / "offsets" / "1").exists() and not (q.checkpoint / "commits" / "1").exists()
    orphans = {p for p in q.checkpoint.rglob("*.zip")} - before
    assert orphans, "the failed task wrote no store: the failure was not after its write"
    out = rp.repartition(spark, cp, 4)
    assert out["ranAs"] == "spark job" and len(out["tasks"]) == 2  # 2 -> 4: one task per old partition
    assert before <= {p for p in q.checkpoint.rglob("*") if p.is_file()}, "a committed file was deleted"
    _verify_clean(tools, q.checkpoint)
    _placement_matches_spark(spark, q.checkpoint, 4, ["k"], operatorId=0)
    _resumes_exactly(q, rows, 17)


def test_flat_map_groups_with_state(spark, tools, rewriter, tmp_path):
    """applyInPandasWithState (Spark's flatMapGroupsWithState operator): a running count per key, 2 -> 3."""
    import pandas as pd
    from pyspark.sql.streaming.state import GroupStateTimeout

    def count(key, pdfs, state):
        n = state.get[0] if state.exists else 0
        for pdf in pdfs:
            n += len(pdf)
        state.update((n,))
        yield pd.DataFrame({"k": [key[0]], "n": [n]})

    def build(q):
        return (
            q.source("in")
            .groupBy("k")
            .applyInPandasWithState(
                count, "k string, n long", "n long", "Update", GroupStateTimeout.NoTimeout
            )
        )

    spark.conf.set("spark.sql.shuffle.partitions", "2")
    q = Query(spark, tmp_path, build)
    rows = _rows(random.Random(8), 25, keys=12)
    q.write("in", rows)
    q.run()
    rp.repartition(rewriter, str(q.checkpoint), 3)
    _placement_matches_spark(spark, q.checkpoint, 3, ["k"], operatorId=0)
    more = _rows(random.Random(9), 15, keys=12)
    q.write("in", more)
    q.run()
    counts = Counter(r["k"] for r in rows + more)
    assert sorted(q.outputs[2]) == sorted((k, counts[k]) for k in {r["k"] for r in more})
    _verify_clean(tools, q.checkpoint)


def test_command_line_with_master_runs_a_spark_job(spark, tools, tmp_path):
    """``lineagestore repartition --master local[2]`` (its own process, as a user runs it): the rewrite runs
    as a Spark job on that master, the report says so, and the query resumes exactly."""
    import subprocess
    import sys

    q, rows = _summing_query(spark, tmp_path, 18)
    argv = [sys.executable, "-m", "lineagestore.cli", "repartition", str(q.checkpoint), "--partitions", "4"]
    done = subprocess.run([*argv, "--master", "local[2]"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    report = " ".join(done.stdout.split())
    assert "as a Spark job: 2 tasks on executors driver" in report, done.stdout
    _verify_clean(tools, q.checkpoint)
    _resumes_exactly(q, rows, 19)


def test_s3a_checkpoint_through_the_command_line(spark, tools, s3_server, s3_bucket, tmp_path, capsys):
    """The command line on an s3a:// checkpoint on the real local S3 server: 2 -> 3, then the query resumes."""
    from lineagestore import cli

    def build(q):
        return q.source("in").groupBy("k").agg(F.sum("v"))

    spark.conf.set("spark.sql.shuffle.partitions", "2")
    q = Query(spark, tmp_path, build)
    q.checkpoint = f"s3a://{s3_bucket}/repartition"  # type: ignore[assignment]
    rows = _rows(random.Random(12), 20)
    q.write("in", rows)
    q.run()
    hadoop_args = hadoop_conf_args(s3_server.hadoop_conf(s3_bucket))
    rc = cli.main([*hadoop_args, "repartition", q.checkpoint, "--partitions", "3", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert json.loads(out)["newPartitions"] == 3
    _placement_matches_spark(spark, q.checkpoint, 3, ["k"], operatorId=0)
    more = _rows(random.Random(13), 10)
    q.write("in", more)
    q.run()
    totals: dict[str, int] = {}
    for r in rows + more:
        totals[r["k"]] = totals.get(r["k"], 0) + r["v"]
    assert sorted(q.outputs[2]) == sorted((k, totals[k]) for k in {r["k"] for r in more})
    rc = cli.main([*hadoop_args, "verify", q.checkpoint])
    assert rc == 0, capsys.readouterr()


SPARK_PROVIDERS = {
    "rocksdb": PROVIDER_CLASSES["builtin"],
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
}


# Spark's HDFS provider writes checkpoint format version 1 only
@pytest.mark.parametrize(("provider", "format_version"), [("rocksdb", "1"), ("rocksdb", "2"), ("hdfs", "1")])
def test_migrate_from_spark_providers(spark, tools, tmp_path, provider, format_version):
    """dropDuplicates then an aggregation (one query, two operators) and a stream-stream join started on Spark's
    RocksDB provider (checkpoint format 1 or 2) or its HDFS provider, migrated onto lineagestore (the first
    query 2 -> 3 partitions, the join keeping
    2), resumed: results exact, the offset log names lineagestore, the state data source reads the new state
    where Spark's shuffle puts each key, verify is clean."""
    from lineagestore.migrate import migrate

    def agg(q):
        return q.source("in").dropDuplicates(["k", "g", "v"]).groupBy("k", "g").agg(F.sum("v"))

    def join(q):
        left = q.source("left").select(F.col("k").alias("lk"), F.col("v").alias("lv"))
        right = q.source("right").select(F.col("k").alias("rk"), F.col("v").alias("rv"))
        return left.join(right, F.expr("lk = rk"))

    spark.conf.set("spark.sql.streaming.stateStore.providerClass", SPARK_PROVIDERS[provider])
    spark.conf.set("spark.sql.streaming.stateStore.checkpointFormatVersion", format_version)
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    qa = Query(spark, tmp_path / "agg", agg)
    qj = Query(spark, tmp_path / "join", join, mode="append")
    rnd = random.Random(21)
    a1, l1, r1 = _rows(rnd, 25), _rows(rnd, 10, keys=8), _rows(rnd, 10, keys=8)
    qa.write("in", a1)
    qj.write("left", l1)
    qj.write("right", r1)
    try:
        qa.run()
        qj.run()
    finally:
        spark.conf.set("spark.sql.streaming.stateStore.providerClass", PROVIDER_CLASSES["lineagestore"])
        spark.conf.set("spark.sql.streaming.stateStore.checkpointFormatVersion", "2")
    # lineagestore's deltas are <version>_<unique id>.delta (the HDFS provider's are <version>.delta)
    assert not list(qa.checkpoint.rglob("*_*.delta")), "the query did not run on Spark's provider"
    moved = migrate(spark, str(qa.checkpoint), 3)
    assert moved["rowsMoved"] > 0 and moved["from"] == SPARK_PROVIDERS[provider]
    # a Spark job: 2 -> 3 is neither a multiple nor a divisor, so one task per store (dedup, aggregation)
    assert len(moved["tasks"]) == 2, moved["tasks"]
    assert migrate(spark, str(qj.checkpoint))["newPartitions"] == 2
    conf = rp.offset_conf(tools, f"{load(tools, str(qa.checkpoint)).uri}/offsets/1")
    assert conf["spark.sql.streaming.stateStore.providerClass"] == PROVIDER_CLASSES["lineagestore"]
    _placement_matches_spark(spark, qa.checkpoint, 3, ["k", "g"], operatorId=0)  # aggregation
    _placement_matches_spark(spark, qa.checkpoint, 3, ["k", "g", "v"], operatorId=1)  # dropDuplicates
    _placement_matches_spark(spark, qj.checkpoint, 2, ["lk"], operatorId=0, joinSide="left")
    a2, l2, r2 = _rows(rnd, 10), _rows(rnd, 6, keys=8), _rows(rnd, 6, keys=8)
    qa.write("in", a2)
    qj.write("left", l2)
    qj.write("right", r2)
    qa.run()
    qj.run()
    totals: dict[tuple, int] = {}
    for k, g, v in {(r["k"], r["g"], r["v"]) for r in a1 + a2}:  # dropDuplicates: each triple counts once
        totals[(k, g)] = totals.get((k, g), 0) + v
    first = {(r["k"], r["g"], r["v"]) for r in a1}
    changed = {
        (r["k"], r["g"]) for r in a2 if (r["k"], r["g"], r["v"]) not in first
    }  # duplicates emit nothing
    assert sorted(qa.outputs[2]) == sorted((k, g, totals[(k, g)]) for k, g in changed)
    got = Counter(r for rows in qj.outputs.values() for r in rows)
    want = Counter((a["k"], a["v"], b["k"], b["v"]) for a in l1 + l2 for b in r1 + r2 if a["k"] == b["k"])
    assert got == want
    assert any(p.name.endswith(".delta") for p in (qa.checkpoint / "state" / "0" / "2").iterdir())
    _verify_clean(tools, qa.checkpoint)
    _verify_clean(tools, qj.checkpoint)

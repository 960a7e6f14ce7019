"""A checkpoint written by Spark's RocksDB provider, restarted under ``lineagestore.configure``: Spark keeps
the recorded provider (a WARN only); lineagestore must say so plainly at query start, and ``lineagestore
inspect`` must name the provider the offset log records instead of blaming a missing ``configure``.

The query runs in a child process, whose driver log (stderr) is where the listener's ERROR appears."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
MARK = "this query does NOT run on lineagestore"

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import lineagestore
    from lineagestore.cli import main
    from lineagestore.testing.session import local_builder

    source, foreign, ours, rocksdb = sys.argv[1:5]
    spark = local_builder("local[1]", partitions=1).getOrCreate()
    provider = "spark.sql.streaming.stateStore.providerClass"
    version = "spark.sql.streaming.stateStore.checkpointFormatVersion"

    def run(checkpoint):
        counts = spark.readStream.schema("k string").json(source).groupBy("k").count()
        q = (counts.writeStream.outputMode("complete").format("noop")
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        q.awaitTermination()

    # as a user's earlier job without configure: Spark's provider, Spark's default format version
    spark.conf.set(provider, rocksdb)
    spark.conf.set(version, "1")
    run(foreign)
    run(foreign + "-deliberate")
    run(foreign + "-deliberate")  # restarted while the session asks for RocksDB too: nothing to say
    spark.conf.set(provider, lineagestore.PROVIDER_CLASS)
    spark.conf.set(version, "2")
    with open(source + "/2.json", "w") as f:  # new input, so the restart runs a batch
        f.write('{"k": "a"}\\n')
    run(foreign)  # the restart under configure: keeps RocksDB
    run(ours)
    run(ours)  # a lineagestore checkpoint restarted: nothing to say
    sys.stderr.flush()
    print("INSPECT", json.dumps(main(["inspect", foreign])), flush=True)
    """
)


def test_restart_of_another_providers_checkpoint_is_reported_at_start_and_by_inspect(tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    (source / "1.json").write_text('{"k": "a"}\n{"k": "b"}\n')
    foreign, ours = tmp_path / "foreign", tmp_path / "ours"
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(source), str(foreign), str(ours), ROCKSDB],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    # the restart's start names the checkpoint, the provider its offset log records and what to do
    reports = [line for line in proc.stderr.splitlines() if MARK in line]
    # the restart of `foreign` only: not its first run, not `ours`, not one the session puts on RocksDB itself
    assert len(reports) == 1, proc.stderr[-4000:]
    assert str(foreign) in reports[0] and ROCKSDB in reports[0] and "offsets/0" in reports[0]
    assert "lineagestore migrate" in reports[0] and "new checkpoint location" in reports[0]
    assert str(ours) not in proc.stderr.split(MARK)[-1].split("\n")[0]
    # the checkpoint really stayed on RocksDB: Spark's offset log still names it
    assert ROCKSDB in (foreign / "offsets" / "1").read_text()
    # inspect: exit 3, naming the recorded provider and the migration, not "configure was not used"
    rc = json.loads(proc.stdout.split("INSPECT", 1)[1])
    assert rc == 3, proc.stdout + proc.stderr[-3000:]
    err = next(line for line in proc.stderr.splitlines() if line.startswith("lineagestore inspect: error"))
    assert f"was written by {ROCKSDB}, not lineagestore" in err
    assert "offsets/1" in err and "lineagestore migrate" in err
    assert "lineagestore.configure sets" not in err

    # migrate (issue 49): quiet (Spark's log goes to a file, not the terminal), and the moved checkpoint is
    # refused a second time before Spark starts
    deliberate = f"{foreign}-deliberate"
    moved = subprocess.run(
        [sys.executable, "-m", "lineagestore.cli", "migrate", deliberate],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert moved.returncode == 0, moved.stderr[-4000:]
    assert moved.stderr == "", moved.stderr[-4000:]  # no start-up log, no StateStoreCoordinator warnings
    report = " ".join(moved.stdout.split())  # laid out for 80 columns
    assert f"{ROCKSDB} to lineagestore" in report and "restart the query" in report, moved.stdout
    again = subprocess.run(
        [sys.executable, "-m", "lineagestore.cli", "migrate", deliberate], capture_output=True, text=True
    )
    assert again.returncode == 3 and "already runs on lineagestore" in again.stderr, again.stderr

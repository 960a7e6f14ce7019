"""Chaos soak: a lineagestore stateful query on s3a:// through FaultyS3Proxy, under every kind of fault.

    python integration-tests/soak.py --batches 80 --seed 7 --fault-rate 0.02 [--json report.json]

The query (a child process, so it can be killed with SIGKILL like test_exactly_once does) reads one JSON file
per micro-batch, ``dropDuplicates(["id"])`` (state) then ``groupBy("k").agg(count, sum(v))`` (state, update
mode), and writes each batch's output once per batch id (a sink that always executes the batch, see
``test_idempotent_sink_rerun.py``). Its checkpoint is
``s3a://<bucket>/checkpoint`` on a real MinIO reached through the proxy.

The soak adds input in rounds of a few files. Each round runs the child until it has processed every file:

* the proxy injects faults on every request at ``--fault-rate`` per kind (500, 503 SlowDown, held connection
  before or after the server, truncated body);
* with probability ``--kill-prob`` the child is killed (SIGKILL, its process group) at a random moment after
  it committed a batch in that run, and restarted;
* a run that fails (a fault outlasted the s3a retries) is restarted with the faults off (a clean restart),
  then the faults come back.

After every round the output of every batch so far is compared with the plain-Python oracle (a batch's
output must equal the oracle's for that batch: divergences). What each batch read comes from the checkpoint's
commit, offset and source logs, which the soak reads every second while a run goes on, before Spark purges
them (``minBatchesToRetain``), so that every committed batch can be checked. At the end the faults go off, a last run keeps
the query alive for ``--linger`` seconds so maintenance (snapshots, clean-up, orphan sweep) runs, then
``lineagestore verify`` must find every retained batch loadable, and ``lineagestore gc --json`` (dry run) must
find no leaked blob: a shared blob no retained snapshot references although older than the grace period.

The report (stdout, and ``--json``): batches, rounds, child runs, faults injected by kind, requests by
method, kills, failed runs, early exits (a round's run that exited 0 without its ``availableNow`` query
ending), divergences, leaked blobs, verify problems, seconds. Exit code 0 when early exits, divergences,
leaked blobs and verify problems are all zero. ``run_soak(...)`` does the same from Python.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from soak_oracle import batch_files, compare, list_all, make_batches, read_outputs

HERE = Path(__file__).resolve()
GRACE_MS = 3000  # the store's orphanGracePeriodMs in the soak (docs/configuration.md)
MIN_BATCHES_TO_RETAIN = 10  # spark.sql.streaming.minBatchesToRetain in the child


# ------------------------------------------------------------------------------------- the child query
def child_main(args: argparse.Namespace) -> None:
    """The query process: processes every input file, then exits 0 (or lingers, then stops)."""
    from pyspark.sql import functions as F

    from lineagestore.testing.s3 import s3a_jars
    from lineagestore.testing.session import SNAPSHOT_OFTEN, local_session

    work = Path(args.work)
    hadoop = json.loads((work / "s3a.json").read_text())
    spark = local_session(
        "local[2,2]",  # a failed task is retried once: two attempts of a batch
        conf={
            "spark.driver.extraClassPath": os.pathsep.join(s3a_jars()),
            **SNAPSHOT_OFTEN,
            "spark.sql.streaming.minBatchesToRetain": str(MIN_BATCHES_TO_RETAIN),
            **{"spark.hadoop." + k: v for k, v in hadoop.items()},
        },
        orphanGracePeriodMs=GRACE_MS,
        orphanSweepEveryCleanups=2,
    )
    events = (
        spark.readStream.schema("id long, k string, v long")
        .option("maxFilesPerTrigger", 1)
        .json(str(work / "input"))
    )
    counts = events.dropDuplicates(["id"]).groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("s"))
    out = work / "out"

    def sink(df, batch_id: int) -> None:
        """Exactly once by batch id, and the batch always executes: a re-run batch must run its stateful
        operators (lineagestore.sinks.IdempotentBatchWriter skips it: test_idempotent_sink_rerun.py)."""
        rows = [r.asDict() for r in df.collect()]
        final = out / f"batch_id={batch_id}"
        if final.exists():
            return  # the same input and state give the same rows
        tmp = out / f"_tmp-{batch_id}-{uuid.uuid4().hex}"
        tmp.mkdir(parents=True)
        (tmp / "part-00000.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.replace(tmp, final)

    writer = counts.writeStream.outputMode("update").foreachBatch(sink)
    writer = writer.option("checkpointLocation", args.checkpoint)
    if args.linger:  # the last run: process the last files, then stay up while maintenance runs
        query = writer.trigger(processingTime="1 second").start()
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if query.exception() is not None:
                raise query.exception()
            progress = [json.loads(p.json) for p in query.recentProgress]
            ends = [_log_offset(p["sources"][0]["endOffset"]) for p in progress if p.get("sources")]
            if ends and max(ends) >= args.expect_batches - 1:  # every file read (one source log entry each)
                break
            time.sleep(0.5)
        else:
            raise TimeoutError(f"file {args.expect_batches - 1} was not read within 600 s")
        time.sleep(args.linger)  # maintenance: snapshots, clean-up, orphan sweeps
        query.stop()
    else:
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
        # evidence for the early exits in docs/reliability.md: a run that ends early never gets here
        last = (query.lastProgress or {}).get("sources") or [{}]
        print(
            f"soak child: query ended, {query.status}, end offset {last[0].get('endOffset')}", file=sys.stderr
        )
    spark.stop()


def _log_offset(offset: Any) -> int:
    if offset is None:
        return -1
    if isinstance(offset, str):
        offset = json.loads(offset)
    return int(offset["logOffset"])


# ------------------------------------------------------------------------------------------ the soak
def _write_input(input_dir: Path, n: int, rows: list[dict], t0: float) -> None:
    tmp = input_dir / f".f{n:05d}.tmp"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    final = input_dir / f"f{n:05d}.json"
    os.replace(tmp, final)
    os.utime(final, (t0 + n, t0 + n))  # the file source takes the oldest first: batch n reads file n


def _last_commit(client, bucket: str) -> int:
    """The newest committed batch id (-1: none). Not a count: Spark purges old commits beyond
    minBatchesToRetain, so the count stops growing (a count-based kill trigger stopped firing)."""
    resp = client.list_objects_v2(Bucket=bucket, Prefix="checkpoint/commits/")
    names = [o["Key"].rsplit("/", 1)[-1] for o in resp.get("Contents", [])]
    return max((int(n) for n in names if n.isdigit()), default=-1)


def _remember_logs(client, bucket: str, seen: dict[str, dict]) -> None:
    """Reads the committed batches' log entries into ``seen`` while the query runs (batch_files)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        batch_files(client, bucket, seen)
    except (BotoCoreError, ClientError, ValueError):
        pass  # an entry caught mid-purge or mid-write: the next look, or the check after the run, reads it


def tools_main(args: argparse.Namespace) -> None:
    """Runs ``lineagestore`` commands (a JSON list of argument lists) in a JVM that has the s3a jars.

    The command line's own bare JVM has only the lineagestore jar on its class path, so it cannot load
    S3AFileSystem; in a process with a SparkSession it reuses the session's JVM, which has them here.
    Prints a JSON list of {"exit", "stdout", "stderr"}.
    """
    from lineagestore.testing.cli import run_cli
    from lineagestore.testing.s3 import s3a_jars
    from lineagestore.testing.session import local_builder

    spark = local_builder(
        "local[1]", partitions=None, conf={"spark.driver.extraClassPath": os.pathsep.join(s3a_jars())}
    ).getOrCreate()
    results = []
    for argv in json.loads(Path(args.tools).read_text()):
        code, out, err = run_cli(argv)
        results.append({"exit": code, "stdout": out, "stderr": err})
    spark.stop()
    sys.stdout.write("\n" + json.dumps(results) + "\n")


def _cli_json(work: Path, hadoop: dict[str, str], commands: list[list[str]]) -> list[tuple[int, Any, str]]:
    """``lineagestore <command> --json`` for each command, in one tools process; (exit, JSON, stderr) each."""
    from lineagestore.testing.cli import hadoop_conf_args

    conf = hadoop_conf_args(hadoop)
    spec = work / "tools.json"
    spec.write_text(json.dumps([[*conf, "--no-progress", *c, "--json"] for c in commands]))
    proc = subprocess.run(
        [sys.executable, str(HERE), "--tools", str(spec)], capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the lineagestore tools process failed: {proc.stderr[-3000:]}")
    out = []
    for r in json.loads(proc.stdout.strip().splitlines()[-1]):
        try:
            out.append((r["exit"], json.loads(r["stdout"]), r["stderr"]))
        except json.JSONDecodeError:
            out.append((r["exit"], None, r["stderr"] + r["stdout"]))
    return out


def run_soak(
    batches: int = 100,
    seed: int = 1,
    fault_rate: float = 0.03,
    kill_prob: float = 0.5,
    files_per_round: tuple[int, int] = (3, 8),
    linger: float = 12.0,
    work: Path | None = None,
    log=print,
    timeout_rate: float | None = None,
) -> dict[str, Any]:
    """Runs the soak; returns the report (see the module docstring). ``timeout_rate``: the rate of held
    connections, each of which costs fs.s3a.connection.timeout (default a third of ``fault_rate``)."""
    from lineagestore.testing.s3 import S3Server, s3a_jars
    from lineagestore.testing.s3_proxy import FAULT_TEST_HOLD_S, FaultyS3Proxy, s3a_conf_via_proxy

    started = time.monotonic()
    rnd = random.Random(seed)
    timeout_rate = fault_rate / 3 if timeout_rate is None else timeout_rate
    final_batches = 2  # processed by the last, fault-free run that stays up for maintenance
    data = make_batches(seed, batches + final_batches)
    s3a_jars()  # fetched once, before any child needs them
    own_work = work is None
    work = Path(tempfile.mkdtemp(prefix="lineagestore-soak-")) if work is None else Path(work)
    (work / "input").mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "batches": batches,
        "seed": seed,
        "fault_rate": fault_rate,
        "timeout_rate": timeout_rate,
        "kill_prob": kill_prob,
        "rounds": 0,
        "child_runs": 0,
        "kills": 0,
        "failed_runs": 0,
        "hangs": 0,
        "early_exits": 0,
        "divergences": 0,
        "divergent_batches": [],
        "batches_checked": 0,
        "batches_unchecked": [],
    }
    checked: set[int] = set()
    faults = dict(
        error_5xx=fault_rate,
        throttle=fault_rate,
        truncate=fault_rate,
        timeout=timeout_rate,
        hold_s=FAULT_TEST_HOLD_S,
    )
    with S3Server() as s3, FaultyS3Proxy(s3.endpoint, seed=seed) as proxy:
        bucket = s3.bucket(f"soak-{uuid.uuid4().hex[:10]}")
        hadoop = s3a_conf_via_proxy(s3.hadoop_conf(bucket), proxy.endpoint, bucket)
        (work / "s3a.json").write_text(json.dumps(hadoop))
        direct = s3.boto3_client()
        logs_seen: dict[str, dict] = {"offsets": {}, "sources": {}}  # see batch_files: Spark purges logs
        checkpoint = f"s3a://{bucket}/checkpoint"
        env = dict(
            os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])
        )
        t0 = time.time() - 10 * batches - 100
        written = 0

        def run_child(tag: str, faults_on: bool, may_kill: bool, linger_s: float = 0.0) -> str:
            """One child run: "ok", "killed" or "failed"."""
            report["child_runs"] += 1
            if faults_on:
                proxy.set_faults(**faults)
            else:
                proxy.clear()
            log_path = work / f"run-{report['child_runs']:03d}-{tag}.log"
            cmd = [sys.executable, str(HERE), *child_argv(work, checkpoint, linger_s, written)]
            with open(log_path, "w") as err:
                proc = subprocess.Popen(
                    cmd, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True
                )
                start_commit = _last_commit(direct, bucket)
                kill_at = None
                hang_deadline = time.monotonic() + 900
                next_look = time.monotonic()
                while proc.poll() is None:
                    if time.monotonic() >= next_look:  # before Spark purges them (minBatchesToRetain)
                        _remember_logs(direct, bucket, logs_seen)
                        next_look = time.monotonic() + 1.0
                    if time.monotonic() > hang_deadline:
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
                        report["hangs"] += 1
                        return "failed"
                    if may_kill and kill_at is None and _last_commit(direct, bucket) > start_commit:
                        kill_at = time.monotonic() + rnd.uniform(0, 2.0)
                    if kill_at is not None and time.monotonic() >= kill_at:
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
                        return "killed"
                    time.sleep(0.2)
            proxy.clear()
            if proc.returncode != 0:
                return "failed"
            if not linger_s and "soak child: query ended" not in log_path.read_text(errors="replace"):
                report["early_exits"] += 1  # exit 0 without the availableNow query ending: never silent
                return "failed"
            return "ok"

        while written < batches:
            n = min(batches - written, rnd.randint(*files_per_round))
            for i in range(written, written + n):
                _write_input(work / "input", i, data[i], t0)
            written += n
            report["rounds"] += 1
            may_kill = rnd.random() < kill_prob
            faults_on = True
            for _attempt in range(20):
                outcome = run_child("faults" if faults_on else "clean", faults_on, may_kill)
                if outcome == "killed":
                    report["kills"] += 1
                    may_kill = False
                    continue
                if outcome == "failed":
                    report["failed_runs"] += 1
                    faults_on = False  # a clean restart must recover
                    continue
                break
            else:
                raise RuntimeError(f"round {report['rounds']}: the query never completed; see {work}")
            bad, details, unchecked = compare(direct, bucket, data, work / "out", logs_seen)
            checked |= set(logs_seen["offsets"]) - set(unchecked)
            new_bad = sorted(set(bad) - set(report["divergent_batches"]))
            report["divergent_batches"] += new_bad
            report["divergences"] = len(report["divergent_batches"])
            log(
                f"soak round {report['rounds']}: {written}/{batches} files, runs {report['child_runs']}, "
                f"kills {report['kills']}, failed runs {report['failed_runs']}, "
                f"divergences {report['divergences']}, batches checked {len(checked)} "
                f"(committed batches known {min(logs_seen['offsets'], default=-1)}.."
                f"{max(logs_seen['offsets'], default=-1)}, {len(logs_seen['offsets'])}), "
                f"faults {proxy.counts['faults']}"
            )
            if new_bad:
                log(f"  divergent: {json.dumps(details)[:3000]}")

        # Faults off: a last run that processes the last files and stays up so maintenance runs.
        for i in range(batches, batches + final_batches):
            _write_input(work / "input", i, data[i], t0)
        written = batches + final_batches
        outcome = run_child("linger", False, False, linger_s=linger)
        report["final_run"] = outcome
        if outcome != "ok":  # keep the evidence: the bucket's objects and the run logs
            report["final_run_error"] = _first_error(work / f"run-{report['child_runs']:03d}-linger.log")
            shutil.copytree(s3.data_dir, work / "minio-data", dirs_exist_ok=True)
            own_work = False
        bad, details, unchecked = compare(direct, bucket, data, work / "out", logs_seen)
        checked |= set(logs_seen["offsets"]) - set(unchecked)
        report["divergent_batches"] = sorted(set(report["divergent_batches"]) | set(bad))
        report["divergences"] = len(report["divergent_batches"])
        if bad:
            report["divergence_details"] = details
        report["files"] = written
        report["batches_run"] = len(read_outputs(work / "out"))
        report["batches_checked"] = len(checked)
        report["batches_unchecked"] = sorted(set(read_outputs(work / "out")) - checked)
        report["log_offsets"] = dict(sorted(logs_seen["offsets"].items()))
        report["faults"] = proxy.counts["faults"]
        report["requests"] = proxy.counts["requests"]
        direct_conf = s3.hadoop_conf(bucket)  # the tools talk to MinIO directly
        grace_s = max(10, int(linger) - 2)
        (code, verify, err), (_gc_code, gc, gc_err) = _cli_json(
            work,
            direct_conf,
            [
                ["verify", checkpoint],
                ["gc", checkpoint, "--retain", str(MIN_BATCHES_TO_RETAIN), "--grace", f"{grace_s}s"],
            ],
        )
        report["verify_exit"] = code
        report["verify_problems"] = len(verify.get("problems", [])) if isinstance(verify, dict) else -1
        if code != 0:
            report["verify_output"] = (json.dumps(verify) if verify else err)[-3000:]
        if not isinstance(gc, dict):
            gc = {"stores": []}
            report["gc_error"] = gc_err[-3000:]
        reasons: Counter[str] = Counter()
        leaked = []
        for store in gc["stores"]:
            for d in store["delete"]:
                if d["file"].startswith("shared/"):
                    kind = "orphan" if d["reason"]["kind"] == "unreferenced" else "dropped"
                    reasons[kind] += 1
                    if kind == "orphan":
                        leaked.append(f"{store['path']}/{d['file']}: {d['reason']}")
        report["leaked_blobs"] = len(leaked) if "gc_error" not in report else -1
        report["leaked"] = leaked[:20]
        report["blobs_of_dropped_snapshots_pending"] = reasons["dropped"]
        report["gc_grace_s"] = grace_s
        report["shared_blobs_total"] = sum(
            1 for o in list_all(direct, bucket, "checkpoint/state/") if "/shared/" in o
        )
    report["seconds"] = round(time.monotonic() - started, 1)
    report["work"] = str(work)
    if own_work and ok(report):
        shutil.rmtree(work, ignore_errors=True)
        report["work"] = None
    return report


def child_argv(work: Path, checkpoint: str, linger_s: float = 0.0, expect_batches: int = 0) -> list[str]:
    """The child's command line (after ``soak.py``). A round's run gets no ``--linger``: it runs the
    ``availableNow`` query to its end; only the last run (``linger_s``) runs the processing-time query that
    stays up for maintenance, then stops."""
    argv = ["--child", "--work", str(work), "--checkpoint", checkpoint]
    if linger_s:
        argv += ["--linger", str(linger_s), "--expect-batches", str(expect_batches)]
    return argv


def _first_error(log: Path) -> str:
    """The first exception line of a child's log (lineagestore's own errors first)."""
    lines = log.read_text(errors="replace").splitlines()
    for pattern in ("io.lineagestore", "Exception", "Error"):
        for line in lines:
            if pattern in line and not line.strip().startswith("at "):
                return line.strip()[:1000]
    return ""


def ok(report: dict[str, Any]) -> bool:
    return (
        report.get("final_run") == "ok"
        and report["divergences"] == 0
        and report["early_exits"] == 0
        and report.get("leaked_blobs") == 0
        and report.get("verify_exit") == 0
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", type=int, default=100)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--fault-rate", type=float, default=0.03, help="per fault kind, per request")
    p.add_argument("--kill-prob", type=float, default=0.5, help="chance that a round's run is SIGKILLed")
    # no default here: the child parses the same options, and a default would make every child linger
    p.add_argument("--linger", type=float, help="seconds the last run stays up for maintenance (default 12)")
    p.add_argument("--work", help="work directory (kept); default a temporary one, deleted when all is well")
    p.add_argument("--json", help="also write the report to this file")
    # the child query process
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--checkpoint", help=argparse.SUPPRESS)
    p.add_argument("--expect-batches", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--tools", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.tools:
        tools_main(args)
        return 0
    if args.child:
        child_main(args)
        return 0
    report = run_soak(
        args.batches,
        args.seed,
        args.fault_rate,
        args.kill_prob,
        linger=12.0 if args.linger is None else args.linger,
        work=Path(args.work) if args.work else None,
        log=lambda m: print(m, file=sys.stderr, flush=True),
    )
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0 if ok(report) else 1


if __name__ == "__main__":
    sys.exit(main())

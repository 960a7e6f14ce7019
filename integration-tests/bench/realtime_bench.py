"""Real-time mode (issue 48): end-to-end latency per record and the long batches' commit time, lineagestore
against Spark's RocksDB provider (checkpoint format V2, changelog checkpointing), same JVM, same run.

    PYTHONPATH=integration-tests python integration-tests/bench/realtime_bench.py \\
        --rounds 3 --warmup-s 10 --measure-s 30 --rate 200 --out docs/benchmarks/realtime

Per round, per workload, per provider (the providers' order alternates from round to round), one query on a
new checkpoint and a new source runs in real-time mode (``Trigger.RealTime(--batch)``): lineagestore through
its helper (``RealTimeQuery``, the route ``lineagestore.realtime.start`` takes), Spark's provider as Spark
documents it. A producer thread in the JVM feeds Spark's real-time test source (``LowLatencyMemoryStream``)
``--rate`` records a second, each stamped with ``System.nanoTime()`` when handed to the source; a
``ForeachWriter`` sink in the same JVM takes ``System.nanoTime()`` when the row reaches it (local mode: source,
operator and sink share the JVM, so one clock; RealTimeLatency.java). Records created in the first
``--warmup-s`` seconds are left out; latencies are those of records created in the next ``--measure-s``
seconds (the query runs on until each of them has its row in the sink: one row per record, for
dropDuplicates one per new id; at most ``--tail-timeout-s``, and the report shows rows measured against
records created). Workloads:

- ``aggregation``: ``groupBy(key).agg(count, max(created_ns))`` over ``--keys`` keys, update mode: a row per
  update, stamped with the newest record it counts (the record whose arrival it answers);
- ``dropDuplicates``: ``dropDuplicates(id)``, every ``--dup-every``-th record a duplicate (dropped, so not
  measured); a row per new id;
- ``stateless``: the source straight to the sink (no state store): the floor that the source's polling (its
  reader looks for a record every 10 ms) and the sink put under every figure; run once per round.

Reported per workload and provider: the medians over rounds of each round's p50 and p99 latency (ms), and the
p50/p95 commit time (``stateOperators[].commitTimeMs``, summed over the query's operators) of the real-time
batches that ended after the warm-up (until the query stopped), pooled over rounds; ratios lineagestore / Spark's provider.
Writes ``summary.json`` and ``summary.md`` (and ``latency.png`` if matplotlib is there) under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "python"))
sys.path.insert(0, str(HERE))

from environment import compile_realtime_latency, find_jar, machine, versions  # noqa: E402
from measure import progress_record  # noqa: E402
from report import _pct  # noqa: E402

BUILTIN = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
PROVIDERS = ("lineagestore", "builtin")
STATEFUL = ("aggregation", "dropDuplicates")
WORKLOADS = (*STATEFUL, "stateless")


def session(classes: Path, jar: Path, args: argparse.Namespace):
    from lineagestore.testing.session import local_builder

    conf = {
        "spark.driver.memory": "2g",
        # the bench's classes call lineagestore's (RealTimeQuery): both on the JVM's class path, so one loader
        # holds them (spark.jars alone would load lineagestore in a child loader the bench's classes cannot see)
        "spark.driver.extraClassPath": os.pathsep.join([str(classes), str(jar)]),
        # Spark's default minimum (5 s) would refuse the smoke's short batches
        "spark.sql.streaming.realTimeMode.minBatchDuration": "1000",
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    }
    # real-time mode runs a batch's stages at once (pipelined shuffle): every source task and every shuffle
    # partition holds a task slot for the whole batch
    slots = args.source_partitions + args.partitions
    builder = local_builder(
        f"local[{slots}]", app_name="realtime-bench", partitions=args.partitions, conf=conf
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def query_of(spark, workload: str, stream, args: argparse.Namespace):
    """The workload's DataFrame over ``stream`` (rows ``key, id, created_ns``), as a JVM Dataset."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    df = DataFrame(stream.toDF(), spark).toDF("key", "id", "created_ns")
    if workload == "aggregation":
        df = df.groupBy("key").agg(F.count(F.lit(1)).alias("n"), F.max("created_ns").alias("created_ns"))
    elif workload == "dropDuplicates":
        df = df.dropDuplicates(["id"]).select("key", "id", "created_ns")
    return df._jdf


def run_one(
    spark, rt, workload: str, provider: str, round_: int, work: Path, args: argparse.Namespace
) -> dict:
    """One query, one provider: its latencies (µs) and its measured batches' progress."""
    from pyspark.sql.streaming.query import StreamingQuery

    run = f"{workload}-{provider}-{round_}"
    checkpoint = str(work / run)
    stream = rt.source(spark._jsparkSession, args.source_partitions)
    jdf = query_of(spark, workload, stream, args)
    if provider == "lineagestore":
        jq = rt.startLineagestore(jdf, checkpoint, args.batch, run)
    else:
        jq = rt.startSpark(jdf, checkpoint, args.batch, run, PROVIDER_KEY, BUILTIN)
    q = StreamingQuery(jq)
    producer = rt.produce(stream, float(args.rate), args.keys, args.dup_every, 1000 + round_)
    try:
        time.sleep(args.warmup_s)
        begin, warm_batches = rt.now(), {p["batchId"] for p in q.recentProgress}
        time.sleep(args.measure_s)
        end = rt.now()
        # the query runs on until every measured record has its row in the sink (or --tail-timeout-s)
        created = producer.createdBetween(begin, end, workload == "dropDuplicates")
        deadline = time.monotonic() + args.tail_timeout_s

        def measured_batches() -> list[dict]:
            return [p for p in q.recentProgress if p["batchId"] not in warm_batches]

        # ... and a real-time batch has ended after the warm-up (so there is a commit time to report)
        while (
            rt.arrivedBetween(run, begin, end) < created or not measured_batches()
        ) and time.monotonic() < deadline:
            if q.exception() is not None:
                raise RuntimeError(f"{run} failed: {q.exception()}")
            time.sleep(0.1)
        if q.exception() is not None:
            raise RuntimeError(f"{run} failed: {q.exception()}")
        progress = q.recentProgress
        # the real-time batches that ended after the warm-up (reported since), until the stop
        batches = [progress_record(p) for p in progress if p["batchId"] not in warm_batches]
        first = min(progress, key=lambda p: p["batchId"]) if progress else None
    finally:
        sent = producer.stop()
        q.stop()
        stream.stop()
    text = rt.drain(run, begin, end)
    latencies = [int(v) for v in text.split(",")] if text else []
    record = {
        "workload": workload,
        "provider": provider,
        "round": round_,
        "sent": int(sent),
        "created": int(created),
        "rows": len(latencies),
        # the query's first real-time batch (lineagestore's follows its micro-batch first batch): in warm-up
        "first_batch": None
        if first is None
        else {
            "batchId": first["batchId"],
            "numInputRows": first.get("numInputRows"),
            "triggerExecutionMs": first.get("durationMs", {}).get("triggerExecution"),
        },
        "p50_ms": _ms(_pct(latencies, 0.50)),
        "p99_ms": _ms(_pct(latencies, 0.99)),
        "max_ms": _ms(max(latencies)) if latencies else None,
        "batches": [
            {
                "batchId": b["batchId"],
                "numInputRows": b["numInputRows"],
                "commitTimeMs": b["state"]["commitTimeMs"],
                "triggerExecutionMs": b["durationMs"].get("triggerExecution"),
                "operators": b["operators"],
            }
            for b in batches
        ],
    }
    print(
        json.dumps({k: v for k, v in record.items() if k != "batches"} | {"n_batches": len(batches)}),
        flush=True,
    )
    return record


def _ms(us: float | None) -> float | None:
    return None if us is None else round(us / 1000.0, 2)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else round(a / b, 2)


def summarize(records: list[dict], args: argparse.Namespace, meta: dict) -> dict[str, Any]:
    figures: dict[str, dict[str, Any]] = {}
    for workload in args.workloads:
        figures[workload] = {}
        for provider in PROVIDERS if workload in STATEFUL else ("none",):
            mine = [r for r in records if r["workload"] == workload and r["provider"] == provider]
            if not mine:
                continue
            commits = [b["commitTimeMs"] for r in mine for b in r["batches"]]
            figures[workload][provider] = {
                "rounds": len(mine),
                "rows_per_round": [r["rows"] for r in mine],
                "created_per_round": [r["created"] for r in mine],
                "first_batch_ms": _median([(r["first_batch"] or {}).get("triggerExecutionMs") for r in mine]),
                "p50_ms_per_round": [r["p50_ms"] for r in mine],
                "p99_ms_per_round": [r["p99_ms"] for r in mine],
                "p50_ms": _median([r["p50_ms"] for r in mine]),
                "p99_ms": _median([r["p99_ms"] for r in mine]),
                "batches": len(commits),
                "commit_p50_ms": _pct(commits, 0.50),
                "commit_p95_ms": _pct(commits, 0.95),
            }
        ls, spark = figures[workload].get("lineagestore"), figures[workload].get("builtin")
        if ls and spark:
            figures[workload]["ratio"] = {
                k: _ratio(ls[k], spark[k]) for k in ("p50_ms", "p99_ms", "commit_p50_ms", "commit_p95_ms")
            }
    return {
        "settings": {k: v for k, v in vars(args).items() if k != "out"},
        "meta": meta,
        "workloads": figures,
    }


def _median(values: list[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 2) if values else None


def _fmt(v: float | None, unit: str = " ms") -> str:
    return "-" if v is None else f"{v:g}{unit}"


def _load(averages: list[float]) -> str:
    return " / ".join(f"{v:.1f}" for v in averages)


def markdown(summary: dict[str, Any]) -> str:
    s, meta = summary["settings"], summary["meta"]
    lines = [
        f"Real-time mode, batches of {s['batch']}, {s['rate']} records/s, {s['keys']} keys, "
        f"{s['rounds']} round(s) of {s['measure_s']} s measured after {s['warmup_s']} s of warm-up; "
        f"load average {_load(meta['loadavg_start'])} at the start, {_load(meta['loadavg_end'])} at the end; "
        f"{meta['machine'].get('cpu', '?')}, {meta['machine']['nproc']} cores.",
        "",
        "| workload | provider | latency p50 (median of rounds) | p99 | p50 per round | p99 per round | "
        "rows measured / expected, per round | commit p50 | commit p95 (batches) | first real-time batch |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for workload, per in summary["workloads"].items():
        for provider, f in per.items():
            if provider == "ratio":
                continue
            lines.append(
                f"| {workload} | {provider} | {_fmt(f['p50_ms'])} | {_fmt(f['p99_ms'])} | "
                f"{', '.join(_fmt(v, '') for v in f['p50_ms_per_round'])} | "
                f"{', '.join(_fmt(v, '') for v in f['p99_ms_per_round'])} | "
                f"{', '.join(f'{n}/{c}' for n, c in zip(f['rows_per_round'], f['created_per_round'], strict=True))} | "
                f"{_fmt(f['commit_p50_ms'])} | {_fmt(f['commit_p95_ms'])} ({f['batches']}) | "
                f"{_fmt(f['first_batch_ms'])} |"
            )
    lines.append("")
    for workload, per in summary["workloads"].items():
        if "ratio" in per:
            r = per["ratio"]
            lines.append(
                f"- {workload}, lineagestore / Spark's provider: latency p50 {_fmt(r['p50_ms'], 'x')}, "
                f"p99 {_fmt(r['p99_ms'], 'x')}; commit p50 {_fmt(r['commit_p50_ms'], 'x')}, "
                f"p95 {_fmt(r['commit_p95_ms'], 'x')}"
            )
    return "\n".join(lines) + "\n"


def plot(summary: dict[str, Any], out: Path) -> str | None:
    """Latency p50 and p99 and commit p95 per workload and provider, one bar each; None without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from plots import COLORS

    short = {"dropDuplicates": "dedup", "aggregation": "agg"}
    bars = [
        (f"{short.get(w, w)}\n{p}", f, p)
        for w, per in summary["workloads"].items()
        for p, f in per.items()
        if p != "ratio"
    ]
    panels = (
        ("p50_ms", "latency p50 (ms)"),
        ("p99_ms", "latency p99 (ms)"),
        ("commit_p95_ms", "commit p95 (ms)"),
    )
    fig, axes = plt.subplots(1, len(panels), figsize=(13, 3.6))
    for ax, (key, title) in zip(axes, panels, strict=True):
        shown = [
            b for b in bars if key != "commit_p95_ms" or b[2] != "none"
        ]  # a stateless query commits nothing
        values = [b[1][key] or 0 for b in shown]
        colors = [COLORS.get("rocksdb_v2" if b[2] == "builtin" else b[2], "#999999") for b in shown]
        ax.bar(range(len(shown)), values, color=colors)
        ax.set_xticks(range(len(shown)), [b[0] for b in shown], fontsize=7)
        ax.set_title(title)
    fig.tight_layout()
    fig.savefig(out / "latency.png", dpi=80)
    plt.close(fig)
    return "latency.png"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup-s", type=float, default=10.0)
    ap.add_argument("--measure-s", type=float, default=30.0)
    ap.add_argument(
        "--tail-timeout-s",
        type=float,
        default=60.0,
        help="after the measured part, how long to wait at most for its records' rows",
    )
    ap.add_argument("--rate", type=float, default=200.0, help="records per second")
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--dup-every", type=int, default=4, help="every n-th record repeats the previous id")
    ap.add_argument("--batch", default="5 seconds", help="the real-time batch duration")
    ap.add_argument("--partitions", type=int, default=2, help="shuffle partitions (state stores)")
    ap.add_argument("--source-partitions", type=int, default=1)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--work-dir", type=Path, help="checkpoints (a new temporary directory by default)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/realtime-bench"))
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="a few seconds of records, aggregation on both providers, one round (test_bench_smoke.py)",
    )
    args = ap.parse_args(argv)
    if args.smoke:
        args.rounds, args.warmup_s, args.measure_s, args.rate, args.batch = 1, 1.0, 2.0, 50.0, "1 second"
        args.workloads, args.no_plots = "aggregation", True
    args.workloads = [w for w in args.workloads.split(",") if w]
    unknown = set(args.workloads) - set(WORKLOADS)
    if unknown:
        ap.error(f"unknown workload(s) {sorted(unknown)}; known: {', '.join(WORKLOADS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    jar = find_jar()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="realtime-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {"machine": machine(), "versions": versions(jar), "loadavg_start": os.getloadavg()}
    classes = compile_realtime_latency(work / "classes", jar)
    spark = session(classes, jar, args)
    rt = spark._jvm.io.lineagestore.bench.RealTimeLatency
    records = []
    try:
        for round_ in range(args.rounds):
            order = PROVIDERS if round_ % 2 == 0 else PROVIDERS[::-1]
            for workload in args.workloads:
                for provider in order if workload in STATEFUL else ("none",):
                    records.append(run_one(spark, rt, workload, provider, round_, work / "checkpoints", args))
    finally:
        spark.stop()
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    meta["loadavg_end"] = os.getloadavg()
    summary = summarize(records, args, meta)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(
        json.dumps({**summary, "runs": records}, indent=2, default=str) + "\n"
    )
    text = markdown(summary)
    (args.out / "summary.md").write_text(text)
    if not args.no_plots:
        plot(summary, args.out)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

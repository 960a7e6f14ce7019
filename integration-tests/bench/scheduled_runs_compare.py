"""The long scheduled-runs comparison of issue 17: N short availableNow runs of a count aggregation whose
maintenance never runs (like scheduled runs that each end first), lineagestore against Spark's RocksDB
provider (checkpoint format V2, changelog checkpointing), then one cold restore.

    PYTHONPATH=integration-tests .venv/bin/python integration-tests/bench/scheduled_runs_compare.py \\
        --runs 100 [--store s3] [--cluster 3] --out /tmp/scheduled-runs

``--store s3``: the checkpoints on a real S3 server (MinIO, started here) through ``s3a://``.
``--cluster W``: on a standalone cluster of W one-core Workers (lineagestore.testing.cluster), every run its
own driver process and application, so its executors start and end with it, as a scheduled job's do; the
Workers' hosts keep their lineagestore local directories between runs. Without it all runs share one
process (``local[2]``).

Prints, per provider: snapshot files and delta/changelog files at the end, bytes on storage, the newest
version minus the newest snapshot version per partition (what a cold restore replays), wall time, and the
cold restore: one more run in a new process with empty local directories (its batch time, and for
lineagestore the deltas it replayed).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE.parent / "python"))

from lineagestore import PROVIDER_CLASS  # noqa: E402

PROVIDERS = {
    "lineagestore": PROVIDER_CLASS,
    "builtin": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}
CONF = [
    "spark.sql.streaming.stateStore.minDeltasForSnapshot=5",
    "spark.sql.streaming.stateStore.checkpointFormatVersion=2",
]
NAME = re.compile(r"state/0/(\d+)/(?:.*/)?(\d+)(_[^./]*)?\.(zip|delta|changelog)$")


def footprint(files: list[tuple[str, int]]) -> dict:
    """Snapshots, deltas, bytes and per-partition cold-replay length from (path, size) pairs under state/."""
    snaps, deltas, size, versions = 0, 0, 0, {}
    for path, length in files:
        size += length
        m = NAME.search(path)
        if m:
            v = versions.setdefault(int(m.group(1)), {"snap": [0], "delta": [0]})
            kind = "snap" if m.group(4) == "zip" else "delta"
            v[kind].append(int(m.group(2)))
            snaps += kind == "snap"
            deltas += kind == "delta"
    lag = [max(v["delta"]) - max(v["snap"]) for _, v in sorted(versions.items())]
    return {"snapshots": snaps, "deltas": deltas, "bytes": size, "coldReplayPerPartition": lag}


def local_files(checkpoint: Path) -> list[tuple[str, int]]:
    return [
        (str(f.relative_to(checkpoint)), f.stat().st_size)
        for f in (checkpoint / "state").rglob("*")
        if f.is_file() and not f.name.startswith(".")
    ]


def s3_files(client, bucket: str, prefix: str) -> list[tuple[str, int]]:
    out = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/state/"):
        out += [(o["Key"][len(prefix) + 1 :], o["Size"]) for o in page.get("Contents", [])]
    return out


def run(
    root: Path, runs: int, cls: str, confs: list[str], checkpoint: str, first: int, env: dict
) -> list[dict]:
    args = [str(root), str(runs), cls, *confs, "--checkpoint", checkpoint, "--first-run", str(first)]
    out = subprocess.run(
        [sys.executable, str(HERE / "scheduled_runs.py"), *args], capture_output=True, text=True, env=env
    )
    if out.returncode != 0:
        sys.exit(f"scheduled_runs.py for {cls} failed:\n{out.stderr[-3000:]}")
    lines = [json.loads(x) for x in out.stdout.splitlines() if x[:1] in "[{"]
    return [{"metrics": lines[i], **lines[i + 1]} for i in range(0, len(lines), 2)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--out", type=Path, default=Path("/tmp/scheduled-runs"))
    ap.add_argument("--store", choices=["local", "s3"], default="local")
    ap.add_argument("--cluster", type=int, default=0, metavar="WORKERS")
    args = ap.parse_args()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH", "")]))
    base = list(CONF)
    s3 = cluster = None
    try:
        if args.store == "s3":
            from lineagestore.testing.s3 import S3Server, s3a_jars

            s3 = S3Server().start()
            bucket = s3.bucket(f"runs-{uuid.uuid4().hex[:8]}")
            base += [f"{k}={v}" for k, v in s3.spark_conf(bucket).items()]
            base.append("spark.jars=" + ",".join(s3a_jars()))
        if args.cluster:
            from lineagestore.testing.cluster import StandaloneCluster

            cluster = StandaloneCluster(workers=args.cluster, memory="1g").start()
            base += [f"{k}={v}" for k, v in cluster.spark_conf().items()]
        results = {}
        for name, cls in PROVIDERS.items():
            root = args.out / name
            checkpoint = f"s3a://{bucket}/{name}" if s3 else str(root / "checkpoint")
            start = time.time()
            if args.cluster:  # one application per run, as a scheduled job
                runs = [x for i in range(args.runs) for x in run(root, 1, cls, base, checkpoint, i, env)]
            else:
                runs = run(root, args.runs, cls, base, checkpoint, 0, env)
            seconds = time.time() - start
            files = s3_files(s3.boto3_client(), bucket, name) if s3 else local_files(Path(checkpoint))
            # cold restore: a new process (and, on a cluster, new executors) with empty local directories
            cold_dir = tempfile.mkdtemp(prefix="cold-")
            cold_conf = [*base, f"spark.sql.streaming.stateStore.lineagestore.localDir={cold_dir}"]
            cold = run(root, 1, cls, cold_conf, checkpoint, args.runs, env)[-1]
            m = cold["metrics"][-1] if cold["metrics"] else {}
            results[name] = {
                **footprint(files),
                "seconds": round(seconds, 1),
                "coldRestoreBatchMs": cold["addBatchMs"],
                "coldRestoreDeltasReplayed": m.get("lineagestoreDeltasReplayed"),
                # lineagestore's loads report it; Spark's provider has no such metric (None)
                "maxDeltasReplayedPerRun": max(
                    (
                        x["metrics"][-1]["lineagestoreDeltasReplayed"]
                        for x in runs
                        if x["metrics"] and "lineagestoreDeltasReplayed" in x["metrics"][-1]
                    ),
                    default=None,
                ),
            }
            print(name, json.dumps(results[name]), flush=True)
    finally:
        if cluster:
            cluster.stop()
        if s3:
            s3.stop()


if __name__ == "__main__":
    main()

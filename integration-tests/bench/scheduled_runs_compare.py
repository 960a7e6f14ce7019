"""The long scheduled-runs comparison of issue 17: N short availableNow runs of a count aggregation in one
process whose maintenance never runs (like scheduled runs that each end first), lineagestore against Spark's
RocksDB provider (checkpoint format V2, changelog checkpointing), on the local filesystem.

    PYTHONPATH=integration-tests .venv/bin/python integration-tests/bench/scheduled_runs_compare.py \\
        --runs 100 --out /tmp/scheduled-runs

Prints, per provider: snapshot files and delta/changelog files at the end, bytes on storage, the newest
version minus the newest snapshot version (what a cold restore replays), and the last run's state-load time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
PROVIDERS = {
    "lineagestore": "io.lineagestore.spark.LineageStateStoreProvider",
    "builtin": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}
CONF = [
    "spark.sql.streaming.stateStore.minDeltasForSnapshot=5",
    "spark.sql.streaming.stateStore.checkpointFormatVersion=2",
]


def footprint(state: Path) -> dict:
    snaps, deltas, size, lag = 0, 0, 0, []
    for part in sorted(p for p in state.iterdir() if p.name.isdigit()):
        versions = {"snap": [0], "delta": [0]}
        for f in part.rglob("*"):
            if f.is_file() and not f.name.startswith("."):
                size += f.stat().st_size
                m = re.match(r"(\d+)(_[^.]*)?\.(zip|delta|changelog)$", f.name)
                if m:
                    kind = "snap" if m.group(3) == "zip" else "delta"
                    versions[kind].append(int(m.group(1)))
        snaps += len(versions["snap"]) - 1
        deltas += len(versions["delta"]) - 1
        lag.append(max(versions["delta"]) - max(versions["snap"]))
    return {"snapshots": snaps, "deltas": deltas, "bytes": size, "coldReplayPerPartition": lag}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--out", type=Path, default=Path("/tmp/scheduled-runs"))
    args = ap.parse_args()
    results = {}
    for name, cls in PROVIDERS.items():
        root = args.out / name
        start = time.time()
        out = subprocess.run(
            [sys.executable, str(HERE / "scheduled_runs.py"), str(root), str(args.runs), cls, *CONF],
            capture_output=True,
            text=True,
            env=dict(os.environ),
        )
        if out.returncode != 0:
            sys.exit(f"{name} failed:\n{out.stderr[-3000:]}")
        runs = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("[")]
        last = runs[-1][-1] if runs and runs[-1] else {}
        results[name] = {
            **footprint(root / "checkpoint" / "state" / "0"),
            "seconds": round(time.time() - start, 1),
            "lastRunLoadMs": last.get("lineagestoreLoadMs", last.get("rocksdbCommitLoadLatency")),
        }
        print(name, json.dumps(results[name]), flush=True)


if __name__ == "__main__":
    main()

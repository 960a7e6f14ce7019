"""Exactly-once output under random kills of the whole query process (SIGKILL, no clean-up of any kind).

Invariant checked: every distinct event id appears exactly once in the dedup output, and the last count
written for each key equals the number of distinct events of that key, although the process was killed at
random moments (mid-batch, mid-commit, mid-snapshot) and restarted each time from its checkpoint.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
QUERY = HERE / "exactly_once" / "query.py"


def _write_inputs(directory: Path, rnd: random.Random, files: int) -> dict[int, str]:
    directory.mkdir(parents=True)
    truth: dict[int, str] = {}
    for f in range(files):
        rows = []
        for _ in range(20):
            event_id = rnd.randrange(150)  # ids repeat across files: dedup state must remember them
            key = f"k{event_id % 7}"
            truth[event_id] = key
            rows.append({"id": event_id, "key": key})
        tmp = directory / f".f{f}.tmp"
        tmp.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        os.replace(tmp, directory / f"f{f:03d}.json")
    return truth


def _commits(work: Path) -> int:
    return sum(len(list((work / q / "commits").glob("[0-9]*"))) for q in ("ck-distinct", "ck-counts"))


def _read_json_lines(root: Path) -> list[tuple[int, dict]]:
    out = []
    for batch_dir in sorted(root.glob("batch_id=*")):
        batch = int(batch_dir.name.split("=")[1])
        for part in batch_dir.glob("part-*"):
            out += [(batch, json.loads(line)) for line in part.read_text().splitlines() if line]
    return out


def test_exactly_once_under_random_process_kills(tmp_path):
    pytest.importorskip("lineagestore.jvm.jar").jar_path()  # the query process needs the bundled jar
    rnd = random.Random(2026)
    truth = _write_inputs(tmp_path / "input", rnd, files=8)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    kills = 0
    for attempt in range(12):
        proc = subprocess.Popen(
            [sys.executable, str(QUERY), str(tmp_path)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(tmp_path / f"run-{attempt}.log", "w"),  # noqa: SIM115
            start_new_session=True,  # one process group: the JVM dies with the Python driver
        )
        # kill only once the query made progress in this run, at a random moment after a batch committed
        start_commits = _commits(tmp_path)
        deadline = time.monotonic() + 300
        kill_at = None
        while proc.poll() is None and time.monotonic() < deadline:
            if kills < 3 and kill_at is None and _commits(tmp_path) > start_commits:
                kill_at = time.monotonic() + rnd.uniform(0, 1.5)
            if kill_at is not None and time.monotonic() >= kill_at:
                break
            time.sleep(0.1)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            kills += 1
            continue
        assert proc.returncode == 0, (tmp_path / f"run-{attempt}.log").read_text()[-3000:]
        break
    else:
        pytest.fail("the query never completed")

    distinct = _read_json_lines(tmp_path / "out-distinct")
    ids = Counter(row["id"] for _, row in distinct)
    assert set(ids) == set(truth), "every distinct event is in the output"
    assert max(ids.values()) == 1, f"duplicated events: {[i for i, n in ids.items() if n > 1]}"

    latest: dict[str, tuple[int, int]] = {}
    for batch, row in _read_json_lines(tmp_path / "out-counts"):
        if row["key"] not in latest or batch > latest[row["key"]][0]:
            latest[row["key"]] = (batch, row["n"])
    expected = Counter(truth.values())
    assert {k: n for k, (_, n) in latest.items()} == dict(expected)
    print(f"killed the query process {kills} times")

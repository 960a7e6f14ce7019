"""Spark Connect (issue 18): Spark's Connect server, started from the pyspark wheel's own script with
lineagestore's jar and settings (``lineagestore.server_conf()``, the command docs/operations.md shows), runs
stateful queries for a ``SparkSession.builder.remote(...)`` client; ``configure`` refuses a remote builder
with a message saying what to do instead.

One server for the module. The client runs in a process of its own (a Connect session puts pyspark into
Connect mode for its whole process, and this process keeps its classic session for the other tests).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import lineagestore
from lineagestore.testing.cli import run_cli
from lineagestore.testing.connect import ConnectServer

ROOT = Path(__file__).resolve().parents[1]
BATCHES = [
    [{"k": "a", "v": 1}, {"k": "b", "v": 2}, {"k": "a", "v": 1}],
    [{"k": "a", "v": 3}, {"k": "c", "v": 4}, {"k": "b", "v": 2}],
    [{"k": "c", "v": 4}, {"k": "d", "v": 5}, {"k": "a", "v": 1}],
]


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    with ConnectServer(base_dir=tmp_path_factory.mktemp("connect")) as server:
        yield server


def _oracle(batches: list[list[dict]]) -> list[dict]:
    """After each batch: every key's count and sum so far, and every distinct (k, v) pair so far, once."""
    counts: Counter = Counter()
    totals: Counter = Counter()
    seen: set = set()
    expected = []
    for rows in batches:
        for r in rows:
            counts[r["k"]] += 1
            totals[r["k"]] += r["v"]
        seen |= {(r["k"], r["v"]) for r in rows}
        expected.append(
            {"agg": sorted([k, counts[k], totals[k]] for k in counts), "dedup": sorted(map(list, seen))}
        )
    return expected


def test_stateful_queries_over_spark_connect(spark, connect_server, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "PYSPARK_GATEWAY_PORT")}
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "integration-tests" / "connect_client.py"),
            connect_server.url,
            str(tmp_path),
            json.dumps(BATCHES),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert run.returncode == 0, f"{run.stderr[-3000:]}\nserver log: {connect_server.log}"
    outputs = json.loads(run.stdout.strip().splitlines()[-1])
    assert [o["provider"] for o in outputs] == [lineagestore.PROVIDER_CLASS] * len(BATCHES)
    assert [{"agg": o["agg"], "dedup": o["dedup"]} for o in outputs] == _oracle(BATCHES)
    for name in ("agg", "dedup"):
        checkpoint = tmp_path / f"cp-{name}"
        deltas = list((checkpoint / "state").rglob("*.delta"))
        assert deltas, f"no lineagestore delta under {checkpoint}: the server did not use lineagestore"
        verified = run_cli(["verify", str(checkpoint)], json=True)
        assert verified.code == 0, verified.report


@pytest.mark.parametrize("how", ["remote", "spark.remote", "SPARK_REMOTE"])
def test_configure_refuses_a_remote_connect_builder(how, monkeypatch):
    url = "sc://spark.example.com:15002"
    builder = SparkSession.builder
    if how == "remote":
        builder = builder.remote(url)
    elif how == "spark.remote":
        builder = builder.config("spark.remote", url)
    else:
        monkeypatch.setenv("SPARK_REMOTE", url)
    with pytest.raises(lineagestore.RemoteSparkSession) as e:
        lineagestore.configure(builder)
    message = str(e.value)
    assert url in message
    assert "A jar cannot be added to a remote server" in message
    assert "docs/operations.md" in message and "server_conf()" in message
    assert "spark.jars" not in (getattr(builder, "_options", {}) or {}), "configure changed the builder"


def test_the_documented_server_command_has_every_setting_of_server_conf():
    """docs/operations.md's start command sets what ``server_conf()`` says a server needs, no more, no less."""
    text = (ROOT / "docs" / "operations.md").read_text()
    block = re.search(r"```sh\n([^`]*start-connect-server\.sh[^`]*)```", text)
    assert block, "docs/operations.md has no start-connect-server.sh command"
    documented = dict(re.findall(r"--conf (\S+?)=(\S+)", block.group(1).replace("\\\n", " ")))
    expected = {k: v for k, v in lineagestore.server_conf().items() if k != "spark.jars"}
    assert {k: documented.get(k) for k in expected} == expected
    assert "--jars" in block.group(1)

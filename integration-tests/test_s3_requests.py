"""What lineagestore asks of S3 in steady state, request by request (issue #6: no LIST).

The query's ``s3a://`` checkpoint goes through ``FaultyS3Proxy`` with no faults set: the proxy only records
every request (method and target). The benchmark's S3 counters cannot tell Spark's own metadata (commit and
offset logs, ``state/<op>/_metadata``) from the store's files; the proxy can.

Invariant: once a query runs (after each store's first clean-up, which lists its directory once to learn
what earlier processes left), no request lists anything under the store's files, across batches, snapshot
uploads and clean-ups: lineagestore finds its files from the lineage and its indexes, and s3a's existence
and overwrite probes, which list, are avoided (``HadoopBlobStore``). The next listing is the orphan sweep
after ``orphanSweepEveryCleanups`` clean-ups, far more than this test runs.
"""

from __future__ import annotations

import time
import urllib.parse

import pytest

from lineagestore.testing import oracle
from lineagestore.testing.harness import S3StreamHarness

PREFIX = "checkpoint"
STARTUP_BATCHES = 3
STEADY_BATCHES = 8


def _list_prefix(target: str) -> str | None:
    """The prefix a LIST request asks for (``GET /bucket?list-type=2&prefix=...``); None if not a LIST."""
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query, keep_blank_values=True)
    if not {"list-type", "prefix", "delimiter"} & query.keys():
        return None
    return (query.get("prefix") or [""])[0]


def _key(target: str, bucket: str) -> str:
    path = urllib.parse.unquote(urllib.parse.urlsplit(target).path)
    return path[len(bucket) + 2 :] if path.startswith(f"/{bucket}/") else ""


def _lists_store_files(prefix: str) -> bool:
    """Whether a LIST of ``prefix`` can return the store's files (under state/, not Spark's _metadata)."""
    state = f"{PREFIX}/state/"
    return (prefix.startswith(state) and "/_metadata" not in prefix) or state.startswith(prefix)


def _wait_for_maintenance(seconds: float) -> None:
    time.sleep(seconds)  # maintenance runs every second (conftest): snapshots and clean-ups happen here


def _wait_for_first_sweeps(proxy, bucket: str, timeout_s: float = 60) -> None:
    """Until every store that wrote a delta has listed its shared area once (its first clean-up's sweep,
    which waits for a moment with no upload of that store in flight)."""
    deadline = time.monotonic() + timeout_s
    while True:
        log = proxy.request_log
        stores = {
            k.rsplit("/", 1)[0] for m, t in log if m == "PUT" and (k := _key(t, bucket)).endswith(".delta")
        }
        lists = [p for _, t in log if (p := _list_prefix(t))]
        swept = {p.removesuffix("/shared/") for p in lists if p.endswith("/shared/")}
        if stores and stores <= swept:
            return
        assert time.monotonic() < deadline, f"stores {sorted(stores - swept)} never ran their first clean-up"
        time.sleep(0.5)


@pytest.mark.parametrize("provider", ["lineagestore"], indirect=True)
def test_steady_state_lists_nothing_under_the_store(spark, provider, s3_server, s3_faults, tmp_path):
    proxy = s3_faults.proxy
    runs = oracle.keyed_runs(31, STARTUP_BATCHES + STEADY_BATCHES, rows=30, keys=10)
    _, totals = oracle.running_aggregate(runs)
    h = S3StreamHarness(spark, tmp_path / "q", provider, s3_server, s3_faults.bucket, PREFIX)
    query = (
        oracle.running_aggregate_query(h)
        .writeStream.outputMode("update")
        .format("memory")
        .queryName("requests_probe")
        .option("checkpointLocation", h.checkpoint)
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        for i, rows in enumerate(runs):
            if i == STARTUP_BATCHES:
                _wait_for_first_sweeps(proxy, s3_faults.bucket)  # the one listing of each store is behind us
                proxy.reset_counts()
            h.write("in", rows)
            query.processAllAvailable()
        _wait_for_maintenance(4)
        log = proxy.request_log
    finally:
        query.stop()

    lists = [p for m, t in log if (p := _list_prefix(t)) is not None]
    store_lists = [p for p in lists if _lists_store_files(p)]
    writes = [k for m, t in log if m in ("PUT", "POST") and (k := _key(t, s3_faults.bucket))]
    print(f"steady state: requests {proxy.counts['requests']}; LIST prefixes {sorted(set(lists))}")

    assert any(k.endswith(".delta") for k in writes), "no delta written in the steady window: nothing tested"
    assert any(k.endswith(".zip") for k in writes), "no snapshot uploaded in the steady window"
    assert store_lists == [], f"LIST requests that reach the store's files in steady state: {store_lists}"
    final: dict[str, tuple[int, int]] = {}  # update mode: a row per key and batch; counts only grow
    for r in spark.table("requests_probe").collect():
        final[r["k"]] = max(final.get(r["k"], (0, 0)), (r["cnt"], r["total"]))
    assert final == totals

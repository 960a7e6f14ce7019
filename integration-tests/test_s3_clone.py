"""``lineagestore clone`` between two s3a:// locations on the real local S3 server: every file is copied
server-side (S3 CopyObject through hadoop-aws's own SDK client), none streams through the JVM, the source is
left byte-for-byte unchanged, and the query restarted on the clone continues with the right state.
"""

from __future__ import annotations

import json
import time

import pytest

from lineagestore import cli
from lineagestore.testing import oracle
from lineagestore.testing.cli import hadoop_conf_args
from lineagestore.testing.harness import S3StreamHarness, close_state_stores


def _etags(h, prefix: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for page in h.client.get_paginator("list_objects_v2").paginate(Bucket=h.bucket, Prefix=prefix + "/"):
        # directory markers (keys ending in "/") are s3a's, not files of the checkpoint
        out.update(
            {
                o["Key"][len(prefix) + 1 :]: o["ETag"]
                for o in page.get("Contents", [])
                if not o["Key"].endswith("/")
            }
        )
    return out


def _stable_etags(h, prefix: str, quiet_s: float = 2.0, timeout_s: float = 60.0) -> dict[str, str]:
    """The listing of ``prefix`` once two listings ``quiet_s`` apart agree."""
    deadline = time.monotonic() + timeout_s
    last = _etags(h, prefix)
    while True:
        time.sleep(quiet_s)
        now = _etags(h, prefix)
        if now == last:
            return now
        assert time.monotonic() < deadline, f"{prefix} kept changing for {timeout_s} s"
        last = now


@pytest.mark.parametrize("provider", ["lineagestore"], indirect=True)
def test_clone_on_s3_copies_server_side_and_the_clone_restarts(
    spark, provider, s3_server, s3_bucket, tmp_path, capsys
):
    runs = oracle.keyed_runs(5, 4, keys=7, max_v=49)
    expected, _ = oracle.running_aggregate(runs)
    h = S3StreamHarness(spark, tmp_path / "q", provider, s3_server, s3_bucket, "source")
    for rows in runs[:3]:
        h.write("in", rows)
        h.run(oracle.running_aggregate_query, "update")
    # close the source's stores (as an executor restart would), so its maintenance adds no snapshot later
    close_state_stores(spark)
    # a snapshot upload already running on the maintenance thread may still land after the close: take the
    # source's listing once it has stopped changing (clone copies what it lists; a later zip is optional)
    source_before = _stable_etags(h, "source")
    assert any(k.startswith("state/") and k.endswith(".delta") for k in source_before)

    hadoop_args = hadoop_conf_args(s3_server.hadoop_conf(s3_bucket))
    rc = cli.main([*hadoop_args, "clone", f"s3a://{s3_bucket}/source", f"s3a://{s3_bucket}/clone", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    report = json.loads(out)
    assert report["serverCopied"] == report["files"] == len(source_before), report
    assert report["copied"] == 0 and report["linked"] == 0, f"bytes streamed through the JVM: {report}"

    cloned = _etags(h, "clone")
    assert {k: v for k, v in cloned.items() if k != "metadata"} == {
        k: v for k, v in source_before.items() if k != "metadata"
    }, "a server-side copy keeps every object's content (same ETag)"

    # the query goes on from the clone; the source is untouched by it
    h.checkpoint = f"s3a://{s3_bucket}/clone"
    h.prefix = "clone"
    h.write("in", runs[3])
    result = h.run(oracle.running_aggregate_query, "update")
    assert result.batch_ids == [3]
    assert h.batch_outputs(lambda r: (r["k"], r["cnt"], r["total"])) == expected
    after = _etags(h, "source")
    # nothing of the source changed or went; the only additions allowed are the source's own late snapshot
    # uploads (zips and shared blobs of versions <= 3), never a file of the clone's batch (version 4)
    assert {k: after.get(k) for k in source_before} == source_before
    added = set(after) - set(source_before)
    assert all(
        ("/shared/" in k) or (k.endswith(".zip") and int(k.rsplit("/", 1)[1].split("_")[0]) <= 3)
        for k in added
    ), added

"""A real S3 server (MinIO on 127.0.0.1) for the end-to-end suites, and a harness whose checkpoint is on it.

conftest.py imports the fixtures below and asks ``session_classpath`` for the s3a jars when it builds the
SparkSession (the class path is fixed when the session starts). The jars (hadoop-aws 3.5.0 and the AWS SDK
v2 bundle, ~650 MB, fetched once into the cache) are added only when a collected test uses ``s3_server``,
so running other suites alone downloads nothing. How the server is obtained: docs/testing.md.

Fixtures:

* ``s3_server`` (session): a started ``lineagestore.testing.s3.S3Server``.
* ``s3_bucket``: a fresh bucket whose s3a settings (per-bucket ``fs.s3a.bucket.<name>.*`` keys) are set in
  the session's Hadoop configuration for the test, so ``s3a://<name>/...`` works in Spark.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from harness import StreamHarness

try:
    from lineagestore.testing.s3 import S3Server, s3a_jars
except ModuleNotFoundError:  # not installed: the source checkout's package
    sys.path.append(str(Path(__file__).resolve().parent.parent / "python"))
    from lineagestore.testing.s3 import S3Server, s3a_jars

S3_FIXTURE = "s3_server"
_jars_error: str | None = None


def session_classpath(session: pytest.Session) -> str:
    """The s3a jars as a ``spark.driver.extraClassPath`` value if a collected test uses S3, else "".

    On the driver's class path rather than in ``spark.jars``: the suite runs in local mode (executors in the
    driver JVM), and Spark copies every ``spark.jars`` entry into each session's work directory (650 MB for
    the AWS SDK bundle). A failure to fetch the jars does not fail the session: the ``s3_server`` fixture
    reports it, so only the S3 tests fail.
    """
    global _jars_error
    if not any(S3_FIXTURE in getattr(item, "fixturenames", ()) for item in session.items):
        return ""
    try:
        return os.pathsep.join(s3a_jars())
    except Exception as exc:
        _jars_error = f"{type(exc).__name__}: {exc}"
        return ""


@pytest.fixture(scope="session")
def s3_server(spark):  # after the session: its class path was chosen by session_classpath
    if _jars_error:
        pytest.fail(f"the s3a jars could not be fetched, so Spark cannot reach S3: {_jars_error}")
    with S3Server() as server:
        yield server


@pytest.fixture
def s3_bucket(spark, s3_server):
    """A fresh bucket, reachable as ``s3a://<name>/`` from the session for the duration of the test."""
    name = f"ls-{uuid.uuid4().hex[:16]}"
    s3_server.bucket(name)
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    settings = s3_server.hadoop_conf(name)
    for key, value in settings.items():
        hadoop_conf.set(key, value)
    yield name
    for key in settings:
        hadoop_conf.unset(key)


def list_keys(client, bucket: str, prefix: str = "") -> list[str]:
    """Every object key under ``prefix`` (directory marker objects ending in ``/`` left out)."""
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", []) if not o["Key"].endswith("/")]
    return keys


class S3StreamHarness(StreamHarness):
    """A StreamHarness whose checkpoint is ``s3a://<bucket>/<prefix>``; inputs stay local.

    The provider checks of StreamHarness read the offset log and list the state files through boto3.
    """

    def __init__(self, spark, root: Path, provider: str, server: S3Server, bucket: str, prefix: str):
        super().__init__(spark, root, provider)
        self.client = server.boto3_client()
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.checkpoint = f"s3a://{bucket}/{self.prefix}"  # type: ignore[assignment]

    def keys(self, under: str = "") -> list[str]:
        """Keys of the checkpoint, relative to it (e.g. ``state/0/1/3_<id>.delta``)."""
        base = f"{self.prefix}/{under}".rstrip("/") + "/"
        return [k[len(self.prefix) + 1 :] for k in list_keys(self.client, self.bucket, base)]

    def read(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.bucket, Key=f"{self.prefix}/{key}")["Body"].read()

    def offset_log_conf(self) -> dict[str, Any]:
        batches = [int(k.split("/")[-1]) for k in self.keys("offsets") if k.split("/")[-1].isdigit()]
        assert batches, f"no offset log entries under {self.checkpoint}/offsets"
        lines = self.read(f"offsets/{max(batches)}").decode().splitlines()
        return json.loads(lines[1]).get("conf", {})

    def state_files(self) -> list[PurePosixPath]:  # type: ignore[override]
        return [PurePosixPath(k) for k in self.keys("state") if not PurePosixPath(k).name.startswith(".")]

"""S3 bad input (issue #5): an unreachable endpoint, a bucket that does not exist, wrong credentials.

Each must fail with an error that names the location (bucket and key) and says what is wrong, and must
leave the committed state intact: a query that ran is restarted with the bad setting (clear failure), then
with the right one (it continues, and matches the plain-Python oracle). The errors come from whichever code
touches the checkpoint first: Spark's own (offset log, at query start), lineagestore's state store (when only
the state store's requests fail, e.g. the endpoint goes away in the middle of a batch) and the
``lineagestore`` command line. lineagestore's own errors are ``BlobStoreAccessException``s: they name the
operation, the full ``s3a://`` location, the endpoint setting and what to do.
"""

from __future__ import annotations

import re
import uuid

import pytest

from lineagestore.testing import oracle
from lineagestore.testing.cli import run_cli
from lineagestore.testing.harness import S3StreamHarness, StreamFailed
from lineagestore.testing.s3_proxy import FAULT_TEST_HOLD_S, FaultyS3Proxy, s3a_conf_via_proxy
from providers import PROVIDER_PARAMS_SPARK_IN_LONG_RUN

LOCAL_DIR_KEY = "spark.sql.streaming.stateStore.lineagestore.localDir"


def _outputs(h):
    return h.batch_outputs(lambda r: (r["k"], r["cnt"], r["total"]))


class _Bucket:
    """A fresh bucket behind a FaultyS3Proxy, its settings in the session's Hadoop configuration."""

    def __init__(self, spark, server):
        self.spark = spark
        self.server = server
        self.name = f"ls-b-{uuid.uuid4().hex[:12]}"
        server.bucket(self.name)
        self.proxy = FaultyS3Proxy(server.endpoint, seed=3).start()
        self.settings = s3a_conf_via_proxy(server.hadoop_conf(self.name), self.proxy.endpoint, self.name)
        self.apply(self.settings)

    def apply(self, settings: dict) -> None:
        """Set ``settings`` and drop the cached S3A filesystem of the bucket, so the next use reads them."""
        conf = self.spark.sparkContext._jsc.hadoopConfiguration()
        for key, value in settings.items():
            conf.set(key, value)
        jvm = self.spark.sparkContext._jvm
        jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI(f"s3a://{self.name}/"), conf).close()

    def close(self) -> None:
        self.proxy.stop()
        conf = self.spark.sparkContext._jsc.hadoopConfiguration()
        for key in self.settings:
            conf.unset(key)


@pytest.fixture
def bucket(spark, s3_server):
    b = _Bucket(spark, s3_server)
    yield b
    b.close()


def _start(spark, provider, s3_server, bucket, tmp_path, runs):
    h = S3StreamHarness(spark, tmp_path / "q", provider, s3_server, bucket.name, "checkpoint")
    for rows in runs:
        h.write("in", rows)
        h.run(oracle.running_aggregate_query, "update")
    return h


def _fails(h) -> str:
    """The run fails: at ``start()`` (Spark resolves the checkpoint location first) or in a batch."""
    with pytest.raises(Exception) as failed:  # noqa: B017 - Py4JJavaError at start, StreamFailed in a batch
        h.run(oracle.running_aggregate_query, "update")
    assert isinstance(failed.value, StreamFailed) or "Py4JJavaError" in type(failed.value).__name__, repr(
        failed.value
    )
    return str(failed.value)


def _continues(h, runs, expected_batch: int):
    """After the failure: the pending batch runs with the right settings, and everything matches the oracle."""
    assert h.run(oracle.running_aggregate_query, "update").batch_ids == [expected_batch]
    expected, totals = oracle.running_aggregate(runs)
    assert _outputs(h) == expected
    assert h.runs[-1].state_rows_total() == len(totals)


# ----------------------------------------------------------------------------------- queries (Spark first)
@pytest.mark.parametrize("provider", PROVIDER_PARAMS_SPARK_IN_LONG_RUN, indirect=True)
def test_wrong_credentials_fail_clearly_and_the_restart_continues(
    spark, provider, s3_server, bucket, tmp_path
):
    runs = oracle.keyed_runs(31, 3)
    h = _start(spark, provider, s3_server, bucket, tmp_path, runs[:2])
    key = f"fs.s3a.bucket.{bucket.name}.secret.key"
    h.write("in", runs[2])
    bucket.apply({key: "wrong-" + s3_server.secret_key[6:]})
    message = _fails(h)
    assert f"s3a://{bucket.name}/checkpoint" in message, message[:3000]
    assert re.search(r"AccessDenied|403|SignatureDoesNotMatch", message), message[:3000]
    bucket.apply({key: s3_server.secret_key})
    _continues(h, runs, 2)


@pytest.mark.parametrize("provider", PROVIDER_PARAMS_SPARK_IN_LONG_RUN, indirect=True)
def test_unreachable_endpoint_fails_clearly_and_the_restart_continues(
    spark, provider, s3_server, bucket, tmp_path
):
    runs = oracle.keyed_runs(32, 3)
    h = _start(spark, provider, s3_server, bucket, tmp_path, runs[:2])
    h.write("in", runs[2])
    bucket.proxy.stop()  # nothing listens on the endpoint's port any more
    message = _fails(h)
    assert f"s3a://{bucket.name}/checkpoint" in message or f"{bucket.name}" in message, message[:3000]
    assert re.search(r"Connection refused|ConnectException|Unable to execute HTTP request", message), message[
        :3000
    ]
    bucket.proxy.start()  # same port
    _continues(h, runs, 2)


@pytest.mark.parametrize("provider", PROVIDER_PARAMS_SPARK_IN_LONG_RUN, indirect=True)
def test_missing_bucket_fails_clearly(spark, provider, s3_server, tmp_path):
    name = f"ls-missing-{uuid.uuid4().hex[:10]}"  # never created
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    settings = s3_server.hadoop_conf(name)
    for key, value in settings.items():
        conf.set(key, value)
    try:
        h = S3StreamHarness(spark, tmp_path / "q", provider, s3_server, name, "checkpoint")
        h.write("in", oracle.keyed_runs(33, 1)[0])
        message = _fails(h)
    finally:
        for key in settings:
            conf.unset(key)
    assert name in message, message[:3000]
    assert re.search(r"does not exist|NoSuchBucket|UnknownStore", message), message[:3000]


# ------------------------------------------------------------------------- the state store's own errors
@pytest.mark.parametrize("fault", ["server_error", "timeout"])
def test_state_store_names_location_endpoint_and_remedy(spark, provider, s3_server, bucket, tmp_path, fault):
    """Only the state store's requests fail (the endpoint goes away, or stops answering, mid-batch)."""
    if provider != "lineagestore":
        pytest.skip("the message under test is lineagestore's")
    runs = oracle.keyed_runs(34, 3)
    h = _start(spark, provider, s3_server, bucket, tmp_path, runs[:2])
    h.write("in", runs[2])
    if fault == "server_error":
        bucket.proxy.set_faults(error_5xx=1.0, path_pattern=r"/state/0/\d+/\d+_[^/]*\.delta")
    else:
        # every attempt waits out connection.timeout: one attempt per operation instead of the fault tests'
        # eight (their retries are what test_s3_faults.py tests; the message is the same after any number)
        prefix = f"fs.s3a.bucket.{bucket.name}."
        bucket.apply({prefix + "attempts.maximum": "1", prefix + "retry.limit": "0"})
        bucket.proxy.set_faults(
            timeout=1.0, timeout_mode="before", hold_s=FAULT_TEST_HOLD_S, path_pattern=r"/state/0/\d+/\d+_"
        )
    message = _fails(h)
    bucket.proxy.clear()
    bucket.apply(bucket.settings)
    m = re.search(r"lineagestore could not (\w+) (s3a://\S+) at (\S+) \(([^)]+)\): ([^.]+)\.", message)
    assert m, message[:4000]
    operation, location, endpoint, setting, problem = m.groups()
    assert location.startswith(f"s3a://{bucket.name}/checkpoint/state/0/"), location
    assert endpoint == bucket.proxy.endpoint and setting == f"fs.s3a.bucket.{bucket.name}.endpoint"
    expected = {"server_error": "server errors", "timeout": "did not answer in time"}[fault]
    assert expected in problem, message[:4000]
    assert "committed state is intact" in message and "What to do:" in message
    _continues(h, runs, 2)


@pytest.mark.parametrize("provider", ["lineagestore"], indirect=True)
def test_a_damaged_state_file_on_s3_is_named_and_the_repaired_checkpoint_continues(
    spark, provider, s3_server, bucket, tmp_path
):
    """A delta on S3 corrupted, then the next one deleted (lineagestore.testing.faults on S3): each restore
    fails naming the object's s3a:// location; with the object put back, the batch runs and nothing was lost.
    Snapshots are off and each run starts on a fresh local directory, so every restore reads the deltas (a
    store that resumes from its own local directory reads nothing: docs/architecture.md)."""
    from lineagestore.testing import faults

    conf, key = spark.conf, "spark.sql.streaming.stateStore.minDeltasForSnapshot"
    before, local_dir = conf.get(key), conf.get(LOCAL_DIR_KEY, None)
    conf.set(key, "1000")
    try:
        runs = oracle.keyed_runs(35, 4)
        h = _start(spark, provider, s3_server, bucket, tmp_path, runs[:2])
        client = s3_server.boto3_client()
        for batch, damage in ((2, faults.corrupt), (3, faults.delete)):
            target = faults.state_files(h.checkpoint, "delta", partition=0, client=client)[-1]
            assert str(target).startswith(f"s3a://{bucket.name}/checkpoint/state/0/0/"), target
            original = target.read_bytes()
            damage(target)
            h.write("in", runs[batch])
            conf.set(LOCAL_DIR_KEY, str(tmp_path / f"local-{batch}-damaged"))
            message = _fails(h)
            assert target.name in message and f"s3a://{bucket.name}/" in message, message[:3000]
            target.write_bytes(original)
            conf.set(LOCAL_DIR_KEY, str(tmp_path / f"local-{batch}-repaired"))
            assert h.run(oracle.running_aggregate_query, "update").batch_ids == [batch]
        expected, totals = oracle.running_aggregate(runs)
        assert _outputs(h) == expected
        assert h.runs[-1].state_rows_total() == len(totals)
    finally:
        conf.set(key, before)
        conf.unset(LOCAL_DIR_KEY) if local_dir is None else conf.set(LOCAL_DIR_KEY, local_dir)


# --------------------------------------------------------------------------------------- command line
def test_command_line_names_location_and_remedy(spark, s3_server, bucket):
    cp = f"s3a://{bucket.name}/checkpoint"
    wrong = dict(bucket.settings, **{f"fs.s3a.bucket.{bucket.name}.secret.key": "wrong-secret"})
    # the CLI runs in this JVM: drop the cached filesystem before each case
    bucket.apply(wrong)
    code, _, err = run_cli(["verify", cp], hadoop_conf=wrong)
    assert code != 0 and f"lineagestore could not list {cp}" in err, err
    assert "refused the credentials" in err and "fs.s3a.access.key" in err, err
    bucket.apply(bucket.settings)
    bucket.proxy.stop()
    try:
        code, _, err = run_cli(["inspect", cp], hadoop_conf=bucket.settings)
    finally:
        bucket.proxy.start()
    assert code != 0 and f"lineagestore could not list {cp} at {bucket.proxy.endpoint}" in err, err
    assert "cannot be reached" in err, err
    missing = f"ls-missing-{uuid.uuid4().hex[:10]}"
    settings = s3_server.hadoop_conf(missing)
    code, _, err = run_cli(["gc", f"s3a://{missing}/checkpoint"], hadoop_conf=settings)
    assert code != 0 and f"s3a://{missing}/checkpoint" in err and "does not exist" in err, err

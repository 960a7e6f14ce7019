"""Checkpoints on a real S3-compatible server (MinIO on 127.0.0.1, see docs/testing.md) through s3a://.

* the server itself: loopback only, private credentials, conditional PUT, clean stop;
* every s3a setting we choose is a real hadoop-aws 3.5.0 key;
* a restarted groupBy aggregation with its checkpoint on ``s3a://`` against the plain-Python oracle, for
  lineagestore and for the built-in provider (control); for lineagestore the bucket is listed and must hold
  exactly the layout of docs/format.md (deltas, snapshot zips after maintenance, shared SSTs referenced by
  the zips' INDEX), and one more restart on a fresh local directory must restore the state from S3.
"""

from __future__ import annotations

import io
import os
import re
import sys
import time
import zipfile
from pathlib import Path, PurePosixPath

import botocore.exceptions
import pytest

from lineagestore.testing import oracle
from lineagestore.testing import s3 as s3mod
from lineagestore.testing.harness import S3StreamHarness, list_keys

REPO_ROOT = Path(__file__).resolve().parent.parent
LOCAL_DIR_KEY = "spark.sql.streaming.stateStore.lineagestore.localDir"

DELTA = re.compile(r"^(\d+)_([A-Za-z0-9-]{1,64})\.delta$")
ZIP = re.compile(r"^(\d+)_([A-Za-z0-9-]{1,64})\.zip$")
SST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\.sst$")


# ------------------------------------------------------------------------------------------- the server
def test_dev_script_only_calls_the_package_command():
    """The MinIO pins and build steps exist once, in lineagestore.testing.s3_setup (they were copied in
    dev/s3server.sh, and a test checked the copies agreed): the script now runs the installed command."""
    script = (REPO_ROOT / "dev" / "s3server.sh").read_text()
    assert "exec python -m lineagestore.testing prepare-s3" in script
    for pin in (s3mod.MINIO_RELEASE, s3mod.MINIO_MODULE_VERSION, s3mod.MINIO_COMMIT, "go install"):
        assert pin not in script, f"dev/s3server.sh repeats {pin!r}: keep it in lineagestore.testing.s3_setup"


def _listening_addresses(pid: int) -> set[str]:
    """host:port (hex, as /proc/net/tcp shows them) of the TCP sockets process ``pid`` listens on."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().as_posix()
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    listening = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                listening.add(fields[1])
    return listening


def test_server_listens_on_loopback_only_and_keeps_credentials_private(s3_server):
    assert s3_server.running
    assert s3_server.access_key not in repr(s3_server) and s3_server.secret_key not in repr(s3_server)
    if s3_server.backend != "process":
        pytest.skip("loopback and log checks apply to the local-process backend")
    assert s3_server.endpoint.startswith("http://127.0.0.1:")
    if sys.platform.startswith("linux"):
        addrs = _listening_addresses(s3_server.pid)
        assert addrs, "MinIO listens on nothing?"
        # loopback as /proc/net/tcp{,6} write it: 127.0.0.1 and ::1 (MinIO adds the IPv6 loopback itself)
        loopback = {"0100007F", "00000000000000000000000001000000"}
        assert {a.split(":")[0] for a in addrs} <= loopback, f"MinIO listens beyond loopback: {addrs}"
    log = (s3_server.data_dir.parent / "minio.log").read_text(errors="replace")
    assert s3_server.secret_key not in log and s3_server.access_key not in log


def test_server_honours_conditional_put(s3_server):
    """fs.s3a.create.conditional.enabled=true relies on the store refusing If-None-Match: * on a taken key."""
    client = s3_server.boto3_client()
    bucket = s3_server.bucket(f"ls-cond-{time.monotonic_ns()}")
    client.put_object(Bucket=bucket, Key="k", Body=b"1", IfNoneMatch="*")
    with pytest.raises(botocore.exceptions.ClientError) as err:
        client.put_object(Bucket=bucket, Key="k", Body=b"2", IfNoneMatch="*")
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert client.get_object(Bucket=bucket, Key="k")["Body"].read() == b"1"


def test_stop_ends_the_process_and_removes_the_data():
    server = s3mod.S3Server(backend="process")
    with server:
        pid, data_dir = server.pid, server.data_dir
        server.boto3_client().put_object(Bucket=server.bucket("data"), Key="k", Body=b"x")
        assert any(data_dir.rglob("*"))
    assert not server.running
    assert not data_dir.parent.exists()
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()


def _bytes_under(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def test_purge_deleted_frees_the_disk_of_deleted_objects_only():
    """MinIO keeps a deleted object's data in its trash for minutes; the bench frees it between cells."""
    server = s3mod.S3Server(backend="process")
    with server:
        client = server.boto3_client()
        bucket = server.bucket("purge")
        body = os.urandom(4 << 20)
        client.put_object(Bucket=bucket, Key="deleted", Body=body)
        client.put_object(Bucket=bucket, Key="kept", Body=b"kept")
        with_both = _bytes_under(server.data_dir)
        client.delete_object(Bucket=bucket, Key="deleted")
        server.purge_deleted()
        # freed by the time it returns, whether MinIO's own purge came first or not
        assert _bytes_under(server.data_dir) <= with_both - len(body)
        assert client.get_object(Bucket=bucket, Key="kept")["Body"].read() == b"kept"
        assert [o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]] == ["kept"]
    assert server.purge_deleted() == 0  # stopped: nothing to free, no error


def test_s3a_settings_are_hadoop_aws_keys(spark, s3_server):
    """Each key we set is a constant of hadoop-aws 3.5.0's org.apache.hadoop.fs.s3a.Constants."""
    jvm = spark.sparkContext._jvm
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    constants = jvm.java.lang.Class.forName("org.apache.hadoop.fs.s3a.Constants", True, loader)
    string_values = set()
    for field in constants.getFields():
        if field.getType().getName() == "java.lang.String":
            string_values.add(field.get(None))
    keys = [k.removeprefix("fs.s3a.") for k in s3_server.hadoop_conf()]
    unknown = [k for k in keys if f"fs.s3a.{k}" not in string_values]
    assert not unknown, f"not hadoop-aws 3.5.0 keys: {unknown}"
    package = jvm.java.lang.Class.forName("org.apache.hadoop.fs.s3a.S3AFileSystem", True, loader).getPackage()
    assert package.getImplementationVersion() in (None, s3mod.HADOOP_AWS_VERSION)


# ------------------------------------------------------------------------------------ Spark on s3a://


def _run(h, rows):
    h.write("in", rows)
    return h.run(oracle.running_aggregate_query, "update")


def _store_dirs(keys: list[str]) -> dict[str, list[str]]:
    """``state/<op>/<partition>`` -> names of the files in it (shared/ blobs as ``shared/<name>``)."""
    stores: dict[str, list[str]] = {}
    for key in keys:
        parts = PurePosixPath(key).parts
        assert parts[0] == "state" and len(parts) >= 4, f"unexpected key {key}"
        stores.setdefault("/".join(parts[:3]), []).append("/".join(parts[3:]))
    return stores


def _spark_metadata(key: str) -> bool:
    """Spark's own files in the state tree (``state/0/_metadata/...``, ``state/0/0/_metadata/schema``)."""
    return any(part.startswith("_") for part in PurePosixPath(key).parts)


def _wait_for_snapshots(h, partitions: int, timeout: float = 90.0) -> dict[str, list[str]]:
    """Maintenance uploads snapshots in the background: wait until every store has a zip."""
    deadline = time.monotonic() + timeout
    while True:
        stores = _store_dirs([k for k in h.keys("state") if not _spark_metadata(k)])
        with_zip = [d for d, names in stores.items() if any(ZIP.match(n) for n in names)]
        if len(with_zip) == partitions or time.monotonic() > deadline:
            return stores
        time.sleep(1)


def _check_lineagestore_layout(h, partitions: int) -> None:
    stores = _wait_for_snapshots(h, partitions)
    assert sorted(stores) == [f"state/0/{p}" for p in range(partitions)], sorted(stores)
    for store, names in sorted(stores.items()):
        deltas = [n for n in names if DELTA.match(n)]
        zips = [n for n in names if ZIP.match(n)]
        shared = [n.removeprefix("shared/") for n in names if n.startswith("shared/")]
        others = sorted(set(names) - set(deltas) - set(zips) - {f"shared/{s}" for s in shared})
        assert not others, f"{store}: files outside the lineagestore layout: {others}"
        assert deltas, f"{store}: no <version>_<uniqueId>.delta"
        assert zips, f"{store}: no snapshot zip after maintenance (maintenanceInterval=1s): {sorted(names)}"
        assert shared and all(SST.match(s) for s in shared), f"{store}: shared/ holds {shared}"
        # Every blob a snapshot INDEX references exists in shared/, and every zip is a lineagestore snapshot.
        for z in zips:
            with zipfile.ZipFile(io.BytesIO(h.read(f"{store}/{z}"))) as archive:
                assert archive.namelist()[0] == "INDEX"
                index = archive.read("INDEX").decode().splitlines()
            assert index[0] == "lineagestore-snapshot-index 3", f"{store}/{z}: {index[:1]}"
            version, unique_id = ZIP.match(z).groups()
            assert f"checkpoint {version} {unique_id}" in index
            # file <name> <size> <identity> <crc32c> <blob or -> (docs/format.md); a new SST is known by
            # RocksDB's ID, the small files by their content
            files = [line.split() for line in index if line.startswith("file ")]
            assert all(len(f) == 6 and re.fullmatch(r"[0-9a-f]{8}", f[4]) for f in files), files
            assert all(re.fullmatch(r"sst-[0-9a-f]{64}", f[3]) for f in files if f[5] != "-"), files
            assert all(re.fullmatch(r"[0-9a-f]{64}", f[3]) for f in files if f[5] == "-"), files
            blobs = [f[5] for f in files]
            referenced = [b for b in blobs if b != "-"]
            missing = sorted(set(referenced) - set(shared))
            assert not missing, f"{store}/{z} references missing shared blobs {missing}"


def test_aggregation_on_s3a_checkpoint(spark, provider, s3_server, s3_bucket, tmp_path):
    runs_before_restart = 4
    runs = oracle.keyed_runs(11, runs_before_restart + 1, rows=16)
    expected, totals = oracle.running_aggregate(runs)
    h = S3StreamHarness(spark, tmp_path / "q", provider, s3_server, s3_bucket, "checkpoint")
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))

    results = [_run(h, rows) for rows in runs[:runs_before_restart]]
    assert [r.batch_ids for r in results] == [[i] for i in range(runs_before_restart)]
    assert h.batch_outputs(lambda r: (r["k"], r["cnt"], r["total"])) == {
        b: expected[b] for b in range(runs_before_restart)
    }
    # Nothing of the checkpoint is local: the harness' local root holds only the inputs.
    assert not (tmp_path / "q" / "checkpoint").exists()
    assert list_keys(h.client, s3_bucket, "checkpoint/commits/")

    if provider == "builtin":  # control: Spark's own provider on the same server and settings
        assert any(k.endswith(".changelog") for k in h.keys("state"))
        return

    _check_lineagestore_layout(h, partitions)

    # One more restart on a fresh local directory: the provider can only get its state from S3.
    fresh = tmp_path / "fresh-local-dir"
    fresh.mkdir()
    local_dir = spark.conf.get(LOCAL_DIR_KEY, None)
    spark.conf.set(LOCAL_DIR_KEY, str(fresh))
    try:
        result = _run(h, runs[runs_before_restart])
    finally:
        spark.conf.unset(LOCAL_DIR_KEY) if local_dir is None else spark.conf.set(LOCAL_DIR_KEY, local_dir)
    assert result.batch_ids == [runs_before_restart]
    assert h.batch_outputs(lambda r: (r["k"], r["cnt"], r["total"])) == expected
    assert result.state_rows_total() == len(totals)
    assert (fresh / "lineagestore").is_dir() and any((fresh / "lineagestore").iterdir()), (
        f"the restarted query did not use {LOCAL_DIR_KEY}={fresh}"
    )
    metrics = result.progress[0]["stateOperators"][0]["customMetrics"]
    restored = metrics.get("lineagestoreFilesDownloaded", 0) + metrics.get("lineagestoreDeltasReplayed", 0)
    assert restored > 0, f"the restart restored nothing from S3: {metrics}"

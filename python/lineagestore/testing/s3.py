"""A real S3-compatible server for tests, and the jars Spark needs to reach it through ``s3a://``.

``S3Server`` starts MinIO on 127.0.0.1 and stops it again::

    from lineagestore.testing.s3 import S3Server, s3a_jars

    with S3Server() as s3:
        bucket = s3.bucket("checkpoints")
        spark = (
            SparkSession.builder.master("local[2]")
            # local mode; on a cluster use spark.jars (Spark then copies the ~650 MB per session)
            .config("spark.driver.extraClassPath", os.pathsep.join(s3a_jars()))
            .config(map=s3.spark_conf(bucket))
            .getOrCreate()
        )
        ...  # use s3a://checkpoints/...

Where the server comes from (``backend``, or the ``LINEAGESTORE_S3_BACKEND`` environment variable):

* ``"docker"``: MinIO through testcontainers (``pip install testcontainers[minio]``);
* ``"process"``: a MinIO binary started as a local process. The binary is ``$LINEAGESTORE_MINIO`` if set,
  else the one cached under ``$LINEAGESTORE_CACHE/minio/<release>/minio`` (default cache
  ``~/.cache/lineagestore``), else it is built once with ``go install`` from the Go module proxy (minutes,
  with progress on the terminal; ``lineagestore-testing prepare-s3`` builds it ahead of time);
* ``"auto"`` (default): ``docker`` when ``docker info`` answers and testcontainers is installed, else
  ``process``.

The root credentials are random per server, handed to MinIO through its environment (never its command
line) and never printed: ``repr`` and the error messages of this module leave them out, and the server's
own output is kept in a log file whose excerpts are redacted.

The s3a settings (``hadoop_conf`` / ``spark_conf``) and why each is chosen are documented in
``docs/testing.md``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path
from typing import Any

from lineagestore._extras import require
from lineagestore.testing.s3_setup import (  # noqa: F401  (re-exported: the public names of this module)
    ANALYTICS_ACCELERATOR_VERSION,
    AWS_SDK_BUNDLE_VERSION,
    DEFAULT_REGION,
    HADOOP_AWS_VERSION,
    MAVEN_CENTRAL,
    MINIO_COMMIT,
    MINIO_IMAGE,
    MINIO_MODULE_VERSION,
    MINIO_RELEASE,
    S3A_ARTIFACTS,
    S3ServerError,
    build_minio,
    cache_dir,
    choose_backend,
    docker_available,
    minio_binary,
    minio_cache_path,
    s3a_dir,
    s3a_jars,
)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """preexec_fn: MinIO gets SIGTERM when the thread that started it ends (e.g. pytest killed hard)."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(Exception):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class S3Server:
    """A real S3-compatible server (MinIO) on 127.0.0.1 with random root credentials.

    Use as a context manager, or call ``start()`` / ``stop()``. ``stop()`` ends the server and deletes its
    data; it is also run at interpreter exit for a server left running.
    """

    def __init__(
        self,
        backend: str | None = None,
        region: str = DEFAULT_REGION,
        startup_timeout: float = 60.0,
        binary: str | os.PathLike[str] | None = None,
    ):
        self.backend = choose_backend(backend)
        self.region = region
        self.startup_timeout = startup_timeout
        self._binary = Path(binary) if binary else None
        self._access_key = "ls" + os.urandom(8).hex()
        self._secret_key = os.urandom(24).hex()
        self._endpoint: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._container: Any = None
        self._workdir: Path | None = None
        self._log_file: Any = None
        self._finalizer: weakref.finalize | None = None

    # ------------------------------------------------------------------------------------- properties
    @property
    def endpoint(self) -> str:
        if self._endpoint is None:
            raise S3ServerError("the S3 server is not running")
        return self._endpoint

    @property
    def access_key(self) -> str:
        return self._access_key

    @property
    def secret_key(self) -> str:
        return self._secret_key

    @property
    def pid(self) -> int | None:
        """The server's process id (local-process backend only)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def data_dir(self) -> Path | None:
        """The directory holding the server's objects (local-process backend only); deleted by stop()."""
        return self._workdir / "data" if self._workdir is not None else None

    @property
    def running(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        return self._container is not None

    def __repr__(self) -> str:  # never the credentials
        return f"S3Server(backend={self.backend!r}, endpoint={self._endpoint!r}, region={self.region!r})"

    # -------------------------------------------------------------------------------------- lifecycle
    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> S3Server:
        if self._endpoint is not None:
            return self
        # before the server starts: without boto3 its credential check below would fail with a misleading
        # "refused its root credentials: No module named 'boto3'"
        require("boto3", "lineagestore.testing.s3.S3Server")
        if self.backend == "docker":
            self._start_container()
        else:
            self._start_process()
        self._finalizer = weakref.finalize(self, _cleanup, self._proc, self._container, self._workdir)
        try:
            self._check_credentials()
        except Exception as exc:
            self.stop()
            raise S3ServerError(f"{self!r} started but refused its root credentials: {exc}") from None
        return self

    def _check_credentials(self) -> None:
        """A ListBuckets with the root credentials: they work, not only the health endpoint. MinIO answers
        its health endpoint before its object layer is up, and ListBuckets then fails with
        ``XMinioServerNotInitialized`` (seen on a loaded 2-core machine, past boto3's three retries): that
        answer is waited out until ``startup_timeout``; any other error is final at once."""
        from botocore.exceptions import ClientError

        client = self.boto3_client()
        deadline = time.monotonic() + self.startup_timeout
        while True:
            try:
                client.list_buckets()
                return
            except ClientError as e:
                code = e.response.get("Error", {}).get("Code", "")
                if code != "XMinioServerNotInitialized" or time.monotonic() >= deadline:
                    raise
            time.sleep(0.5)

    def _start_process(self) -> None:
        binary = self._binary or minio_binary()
        self._workdir = Path(tempfile.mkdtemp(prefix="lineagestore-s3-"))
        (self._workdir / "data").mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIO_", "AWS_"))}
        env.update(
            MINIO_ROOT_USER=self._access_key,
            MINIO_ROOT_PASSWORD=self._secret_key,
            MINIO_SITE_REGION=self.region,
            MINIO_BROWSER="off",  # no web console
            MINIO_UPDATE="off",  # no update check (and no network beyond loopback)
            MINIO_CI_CD="on",  # a test deployment: no root-drive checks
        )
        last_error = ""
        for _attempt in range(3):  # a free port can be taken between probing and binding
            port, console_port = _free_port(), _free_port()
            log_path = self._workdir / "minio.log"
            self._log_file = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
            cmd = [
                str(binary),
                "server",
                "--quiet",  # no startup banner
                "--address",
                f"127.0.0.1:{port}",
                "--console-address",
                f"127.0.0.1:{console_port}",
                "--certs-dir",
                str(self._workdir / "certs"),
                str(self._workdir / "data"),
            ]
            self._proc = subprocess.Popen(
                cmd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )
            endpoint = f"http://127.0.0.1:{port}"
            if self._wait_ready(endpoint):
                self._endpoint = endpoint
                return
            last_error = self.log_tail()
            self._stop_process()
            if "address already in use" not in last_error.lower():
                break
        workdir, self._workdir = self._workdir, None
        shutil.rmtree(workdir, ignore_errors=True)
        raise S3ServerError(f"MinIO ({binary}) did not become ready:\n{last_error}")

    def _wait_ready(self, endpoint: str) -> bool:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"{endpoint}/minio/health/ready", timeout=2) as resp:
                    if resp.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        return False

    def _start_container(self) -> None:
        from testcontainers.minio import MinioContainer

        container = MinioContainer(
            image=MINIO_IMAGE, access_key=self._access_key, secret_key=self._secret_key
        )
        container.start()
        self._container = container
        host = container.get_container_host_ip()
        self._endpoint = f"http://{host}:{container.get_exposed_port(9000)}"

    def log_tail(self, lines: int = 40) -> str:
        """The end of the server's own output, with the credentials redacted."""
        if self._workdir is None or not (self._workdir / "minio.log").is_file():
            return ""
        text = (self._workdir / "minio.log").read_text(errors="replace")
        text = "\n".join(text.splitlines()[-lines:])
        return text.replace(self._secret_key, "***").replace(self._access_key, "***")

    def purge_deleted(self) -> int:
        """Frees the disk of objects already deleted on this server; returns how many trash entries it removed
        (local-process backend; 0 otherwise). MinIO moves a deleted object's data into its trash and removes it
        in the background, minutes later: a benchmark's emptied 28 GB bucket stayed on disk through the next
        cell, whose provider then failed a PutObject. Only what MinIO has already unlinked from every bucket
        is there, so no object is touched; an entry MinIO removes meanwhile is gone either way."""
        trash = self.data_dir / ".minio.sys" / "tmp" / ".trash" if self.data_dir is not None else None
        if trash is None or not trash.is_dir():
            return 0
        entries = list(trash.iterdir())
        for entry in entries:
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
        return len(entries)

    def _stop_process(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            _terminate(proc)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def stop(self) -> None:
        """Stop the server and delete its data. Idempotent."""
        self._stop_process()
        container, self._container = self._container, None
        if container is not None:
            container.stop()
        workdir, self._workdir = self._workdir, None
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
        self._endpoint = None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None

    # ---------------------------------------------------------------------------------------- clients
    def boto3_client(self):
        """A boto3 S3 client for this server (path-style, SigV4, checksums only where S3 requires them)."""
        boto3 = require("boto3", "S3Server.boto3_client")
        Config = require("botocore.config", "S3Server.boto3_client").Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self._access_key,
            aws_secret_access_key=self._secret_key,
            region_name=self.region,
            config=Config(
                signature_version="s3v4",
                s3={"addressing_style": "path"},
                retries={"max_attempts": 3, "mode": "standard"},
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            ),
        )

    def bucket(self, name: str) -> str:
        """Create bucket ``name`` if it does not exist; return its name."""
        client = self.boto3_client()
        try:
            client.create_bucket(Bucket=name)
        except client.exceptions.BucketAlreadyOwnedByYou:
            pass
        return name

    def hadoop_conf(self, bucket: str | None = None) -> dict[str, str]:
        """The s3a settings for this server, as Hadoop configuration keys.

        With ``bucket``, every key is per bucket (``fs.s3a.bucket.<bucket>.*``): other buckets keep their
        own settings. Every value is set explicitly, also where it equals Hadoop 3.5.0's default, so that a
        changed default cannot silently change what the tests exercise. See docs/testing.md for the reasons.
        """
        settings = {
            "endpoint": self.endpoint,
            "endpoint.region": self.region,
            "path.style.access": "true",
            "connection.ssl.enabled": "false",
            "aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
            "access.key": self._access_key,
            "secret.key": self._secret_key,
            # AWS SDK >= 2.30 checksums: calculate request checksums only where S3 requires them
            # (RequestChecksumCalculation.WHEN_REQUIRED), with no extra object checksum algorithm, and do
            # not ask for / validate response checksums (WHEN_REQUIRED). lineagestore checks its own files
            # (CRC32C, SHA-256) end to end.
            "checksum.generation": "false",
            "create.checksum.algorithm": "NONE",
            "checksum.validation": "false",
            # Content-MD5 on the requests that need an integrity header (DeleteObjects): the header MinIO
            # and other third-party stores understand, instead of only the SDK's x-amz-checksum-crc32.
            "request.md5.header": "true",
            # MinIO honours If-None-Match: * on PUT; createFile(...) with conditional overwrite uses it.
            "create.conditional.enabled": "true",
        }
        prefix = f"fs.s3a.bucket.{bucket}." if bucket else "fs.s3a."
        return {prefix + k: v for k, v in settings.items()}

    def spark_conf(self, bucket: str | None = None) -> dict[str, str]:
        """``hadoop_conf`` as Spark settings (``spark.hadoop.`` prefix), for a SparkSession builder."""
        return {"spark.hadoop." + k: v for k, v in self.hadoop_conf(bucket).items()}


def _terminate(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)


def _cleanup(proc: Any, container: Any, workdir: Path | None) -> None:  # at exit, for a forgotten server
    with contextlib.suppress(Exception):
        if proc is not None:
            _terminate(proc)
        if container is not None:
            container.stop()
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)

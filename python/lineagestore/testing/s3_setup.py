"""What an S3 test server needs before it starts: the MinIO binary, the backend, the s3a jars.

* the MinIO release pinned for both backends, and ``minio_binary()``: ``$LINEAGESTORE_MINIO``, the cached
  build, or a build with ``go install`` from the Go module proxy (``dev/s3server.sh``);
* ``choose_backend()``: testcontainers when a Docker engine answers, else a local process;
* ``s3a_jars()``: hadoop-aws and the AWS SDK v2 bundle Spark needs for ``s3a://``, fetched once.

``lineagestore.testing.s3`` (the server itself) re-exports all of these; docs/testing.md explains the choices.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from lineagestore.jvm.jars import AWS_SDK_BUNDLE_VERSION, HADOOP_AWS_VERSION

# MinIO release, the Go module version the proxy resolves it to, and its commit. Keep in sync with
# dev/s3server.sh (integration-tests/test_s3.py checks that they agree).
MINIO_RELEASE = "RELEASE.2025-09-07T16-13-09Z"
MINIO_MODULE_VERSION = "v0.0.0-20250907161309-07c3a429bfed"
MINIO_COMMIT = "07c3a429bfed433e49018cb0f78a52145d4bedeb"
MINIO_IMAGE = f"minio/minio:{MINIO_RELEASE}"  # the same release for the testcontainers backend

# hadoop-aws for the Hadoop Spark 4.3.0 ships (hadoop-client-api/runtime 3.5.0), and the versions its pom
# asks for: the AWS SDK v2 bundle (hadoop-project 3.5.0: aws-java-sdk-v2.version) and the analytics
# accelerator (a compile-scope dependency of hadoop-aws 3.5.0, loaded only for fs.s3a.input.stream.type
# = analytics, but on the classpath as Maven would put it).
# HADOOP_AWS_VERSION and AWS_SDK_BUNDLE_VERSION come from lineagestore.jvm.jars, whose advice for s3a://
# names them too.
ANALYTICS_ACCELERATOR_VERSION = "1.3.1"
S3A_ARTIFACTS = (
    ("org.apache.hadoop", "hadoop-aws", HADOOP_AWS_VERSION),
    ("software.amazon.awssdk", "bundle", AWS_SDK_BUNDLE_VERSION),
    ("software.amazon.s3.analyticsaccelerator", "analyticsaccelerator-s3", ANALYTICS_ACCELERATOR_VERSION),
)
MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2"
_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

DEFAULT_REGION = "us-east-1"  # MinIO's default region
_REPO_ROOT = Path(__file__).resolve().parents[3]  # a source checkout: <repo>/python/lineagestore/testing


class S3ServerError(RuntimeError):
    """The S3 server could not be obtained or started; the message says why and what to do."""


def cache_dir() -> Path:
    """``$LINEAGESTORE_CACHE``, default ``~/.cache/lineagestore`` (shared with dev/ scripts)."""
    return Path(os.environ.get("LINEAGESTORE_CACHE") or Path.home() / ".cache" / "lineagestore")


# ------------------------------------------------------------------------------------------------ MinIO
def minio_binary(build: bool = True) -> Path:
    """The MinIO server binary: ``$LINEAGESTORE_MINIO``, else the cached build, else built now (minutes)."""
    env = os.environ.get("LINEAGESTORE_MINIO")
    if env:
        path = Path(env)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise S3ServerError(f"LINEAGESTORE_MINIO={env} is not an executable file")
        return path
    cached = cache_dir() / "minio" / MINIO_RELEASE / "minio"
    if cached.is_file() and os.access(cached, os.X_OK):
        return cached
    if not build:
        raise S3ServerError(f"no MinIO binary at {cached}; run dev/s3server.sh or set LINEAGESTORE_MINIO")
    script = _REPO_ROOT / "dev" / "s3server.sh"
    if script.is_file():
        cmd = ["bash", str(script)]
    else:  # an installed package: the same build as dev/s3server.sh
        cmd = ["bash", "-c", _GO_INSTALL_SCRIPT, "s3server", str(cached.parent)]
    env_vars = {
        **os.environ,
        "MINIO_RELEASE": MINIO_RELEASE,
        "MINIO_MODULE_VERSION": MINIO_MODULE_VERSION,
        "MINIO_COMMIT": MINIO_COMMIT,
    }
    print(f"lineagestore.testing.s3: building MinIO {MINIO_RELEASE} (once; minutes)", file=sys.stderr)
    # The build's progress and errors go to stderr as they happen.
    proc = subprocess.run(cmd, env=env_vars, stdout=subprocess.DEVNULL)
    if proc.returncode != 0 or not cached.is_file():
        raise S3ServerError(
            f"building MinIO {MINIO_RELEASE} failed (exit {proc.returncode}, output above); it needs Go >= 1.24 "
            "and the Go module proxy"
        )
    return cached


# Used only when dev/s3server.sh is not there (an installed package); mirrors that script.
_GO_INSTALL_SCRIPT = r"""
set -euo pipefail
dir="$1"; mkdir -p "$dir"; tmp="$(mktemp -d "$dir/.build.XXXXXX")"; trap 'rm -rf "$tmp"' EXIT
t="${MINIO_RELEASE#RELEASE.}"; t="${t:0:13}:${t:14:2}:${t:17}"; p=github.com/minio/minio/cmd
GOBIN="$tmp" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w -X $p.Version=$t \
  -X $p.ReleaseTag=$MINIO_RELEASE -X $p.CommitID=$MINIO_COMMIT -X $p.ShortCommitID=${MINIO_COMMIT:0:12} \
  -X $p.CopyrightYear=${t:0:4}" \
  "github.com/minio/minio@$MINIO_MODULE_VERSION"
"$tmp/minio" --version >/dev/null; mv -f "$tmp/minio" "$dir/minio"
"""


def docker_available(timeout: float = 10.0) -> bool:
    """True if a Docker engine answers ``docker info``."""
    if not shutil.which("docker"):
        return False
    try:
        return (
            subprocess.run(
                ["docker", "info"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


def _testcontainers_available() -> bool:
    try:
        import testcontainers.minio  # noqa: F401
    except ImportError:
        return False
    return True


def choose_backend(backend: str | None = None) -> str:
    backend = backend or os.environ.get("LINEAGESTORE_S3_BACKEND") or "auto"
    if backend not in ("auto", "docker", "process"):
        raise S3ServerError(f"S3 backend {backend!r}: expected auto, docker or process")
    if backend == "auto":
        return "docker" if _testcontainers_available() and docker_available() else "process"
    return backend


# ---------------------------------------------------------------------------------------- s3a jars
def s3a_jars(fetch: bool = True) -> list[str]:
    """Local paths of hadoop-aws 3.5.0, the AWS SDK v2 bundle and the analytics accelerator it needs.

    Fetched once from Maven Central into ``$LINEAGESTORE_CACHE/s3a/hadoop-aws-<version>/`` (with
    ``mvn dependency:copy`` when Maven is installed, else over HTTPS with the SHA-1 Maven Central
    publishes); the bundle is about 650 MB. Put them on ``spark.jars`` before the session starts.
    """
    target = cache_dir() / "s3a" / f"hadoop-aws-{HADOOP_AWS_VERSION}"
    paths = []
    for group, artifact, version in S3A_ARTIFACTS:
        path = target / f"{artifact}-{version}.jar"
        if not path.is_file():
            if not fetch:
                raise S3ServerError(f"{path} is missing; call s3a_jars() to fetch it from Maven Central")
            _fetch_jar(group, artifact, version, path)
        paths.append(str(path))
    return paths


def _fetch_jar(group: str, artifact: str, version: str, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    coords = f"{group}:{artifact}:{version}"
    print(f"lineagestore.testing.s3: fetching {coords} from Maven Central (once)", file=sys.stderr)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".fetch-") as tmp:
        mvn = shutil.which("mvn")
        if mvn:
            cmd = [
                mvn,
                "-q",
                "-B",
                f"{_DEPENDENCY_PLUGIN}:copy",
                f"-Dartifact={coords}",
                f"-DoutputDirectory={tmp}",
            ]
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if proc.returncode != 0:
                raise S3ServerError(f"mvn could not fetch {coords}:\n{proc.stdout[-3000:]}")
        else:
            _download(group, artifact, version, Path(tmp) / dest.name)
        os.replace(Path(tmp) / dest.name, dest)  # atomic: a concurrent fetch never sees a partial jar


def _download(group: str, artifact: str, version: str, dest: Path) -> None:
    url = f"{MAVEN_CENTRAL}/{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.jar"
    try:
        with urllib.request.urlopen(url + ".sha1", timeout=60) as resp:
            want = resp.read().decode().split()[0].strip()
        sha1 = hashlib.sha1()
        with urllib.request.urlopen(url, timeout=60) as resp, open(dest, "wb") as out:
            while chunk := resp.read(1 << 20):
                sha1.update(chunk)
                out.write(chunk)
    except (urllib.error.URLError, OSError) as exc:
        raise S3ServerError(f"could not download {url}: {exc}") from exc
    if sha1.hexdigest() != want:
        raise S3ServerError(f"{url}: SHA-1 {sha1.hexdigest()} does not match the published {want}")

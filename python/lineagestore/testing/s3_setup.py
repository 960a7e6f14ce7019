"""What an S3 test server needs before it starts: the MinIO binary, the backend, the s3a jars.

* the MinIO release pinned for both backends, and ``minio_binary()``: ``$LINEAGESTORE_MINIO``, the cached
  build, or a build with ``go install`` from the Go module proxy (``build_minio``, the only place the build
  steps are spelled out);
* ``choose_backend()``: testcontainers when a Docker engine answers, else a local process;
* ``s3a_jars()``: hadoop-aws and the AWS SDK v2 bundle Spark needs for ``s3a://``, fetched once.

A fetch or a build says what it gets, from where, how big, where it goes, and then how far it is, on the
terminal (``lineagestore.testing.progress``, past pytest's capture). ``lineagestore-testing prepare-s3``
(``lineagestore.testing.prepare``) does all of it ahead of time. ``lineagestore.testing.s3`` (the server
itself) re-exports these names; docs/testing.md explains the choices.
"""

from __future__ import annotations

import collections
import hashlib
import os
import queue
import re
import shutil
import subprocess
import tempfile
import threading
import urllib.error
import urllib.request
from pathlib import Path

from lineagestore.jvm.jars import AWS_SDK_BUNDLE_VERSION, HADOOP_AWS_VERSION
from lineagestore.testing.progress import PREFIX, Ticker, duration, megabytes, say

# MinIO release, the Go module version the proxy resolves it to, and its commit (docs/testing.md says why
# this release: the newest the Go module proxy serves).
MINIO_RELEASE = "RELEASE.2025-09-07T16-13-09Z"
MINIO_MODULE = "github.com/minio/minio"
MINIO_MODULE_VERSION = "v0.0.0-20250907161309-07c3a429bfed"
MINIO_COMMIT = "07c3a429bfed433e49018cb0f78a52145d4bedeb"
MINIO_IMAGE = f"minio/minio:{MINIO_RELEASE}"  # the same release for the testcontainers backend
# What a cold build costs (measured, docs/testing.md): said before it starts.
MINIO_BUILD_COST = (
    "a cold build downloads 1.2 GB of Go modules and compiles for about 5 minutes on 2 idle cores (far longer "
    "on a busy machine; under a minute with Go's caches warm)"
)
MINIO_BINARY_MB = 112
GO_MINIMUM = (1, 21)  # GOTOOLCHAIN=auto: an older go cannot fetch the Go 1.24 MinIO's go.mod asks for
_GO_NEEDED = f"Go >= {GO_MINIMUM[0]}.{GO_MINIMUM[1]}"

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
# Their sizes on Maven Central, in bytes, said before a fetch starts (the HTTPS fetch then reads the real
# Content-Length). Change with the versions above.
S3A_SIZES = {"hadoop-aws": 938_071, "bundle": 686_119_507, "analyticsaccelerator-s3": 2_473_459}
MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2"
_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

DEFAULT_REGION = "us-east-1"  # MinIO's default region

# The command of the installed package that fetches and builds all of this ahead of time.
PREPARE_COMMAND = "lineagestore-testing prepare-s3"
PREPARE_HINT = f"`{PREPARE_COMMAND}` (or `python -m lineagestore.testing prepare-s3`)"


class S3ServerError(RuntimeError):
    """The S3 server could not be obtained or started; the message says why and what to do."""


def cache_dir() -> Path:
    """``$LINEAGESTORE_CACHE``, default ``~/.cache/lineagestore``."""
    return Path(os.environ.get("LINEAGESTORE_CACHE") or Path.home() / ".cache" / "lineagestore")


# ------------------------------------------------------------------------------------------------ MinIO
def minio_cache_path() -> Path:
    """Where the MinIO build of ``MINIO_RELEASE`` is kept."""
    return cache_dir() / "minio" / MINIO_RELEASE / "minio"


def minio_binary(build: bool = True) -> Path:
    """The MinIO server binary: ``$LINEAGESTORE_MINIO``, else the cached build, else built now (minutes)."""
    env = os.environ.get("LINEAGESTORE_MINIO")
    if env:
        path = Path(env)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise S3ServerError(f"LINEAGESTORE_MINIO={env} is not an executable file")
        return path
    cached = minio_cache_path()
    if cached.is_file() and os.access(cached, os.X_OK):
        return cached
    if not build:
        raise S3ServerError(
            f"no MinIO binary at {cached}; build it with {PREPARE_HINT}, or set LINEAGESTORE_MINIO to a "
            "MinIO server binary"
        )
    build_minio(cached)
    return cached


def find_go() -> tuple[str, str]:
    """``go``'s path and version (``go1.26.8``), or S3ServerError saying what to install instead."""
    go = shutil.which("go")
    if go is None:
        raise S3ServerError(
            f"building MinIO {MINIO_RELEASE} needs Go, which is not on PATH. Install {_GO_NEEDED} "
            "(https://go.dev/dl/ or your distribution's golang package), or run a Docker engine and "
            "`pip install 'testcontainers[minio]'` (the docker backend needs no build), or set "
            "LINEAGESTORE_MINIO to a MinIO server binary you have"
        )
    try:
        version = subprocess.run(
            [go, "env", "GOVERSION"], capture_output=True, text=True, timeout=60, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise S3ServerError(f"{go} does not run (`go env GOVERSION`: {exc}); install {_GO_NEEDED}") from None
    found = re.match(r"go(\d+)\.(\d+)", version)
    if found and (int(found[1]), int(found[2])) < GO_MINIMUM:
        raise S3ServerError(
            f"{go} is {version}; building MinIO {MINIO_RELEASE} needs {_GO_NEEDED} (which fetches the Go 1.24 "
            "MinIO asks for by itself): install a newer Go (https://go.dev/dl/)"
        )
    return go, version


def _go_env(go: str, *names: str) -> list[str]:
    out = subprocess.run([go, "env", *names], capture_output=True, text=True, timeout=60).stdout
    return (out.splitlines() + [""] * len(names))[: len(names)]


def _minio_ldflags() -> str:
    """The version variables MinIO's own release build sets (buildscripts/gen-ldflags.go), so that
    ``minio --version`` and the server's logs name the release instead of DEVELOPMENT."""
    tag = MINIO_RELEASE.removeprefix("RELEASE.")  # 2025-09-07T16-13-09Z
    when = f"{tag[:13]}:{tag[14:16]}:{tag[17:]}"  # 2025-09-07T16:13:09Z
    pkg = f"{MINIO_MODULE}/cmd"
    return " ".join(
        [
            "-s -w",
            f"-X {pkg}.Version={when}",
            f"-X {pkg}.ReleaseTag={MINIO_RELEASE}",
            f"-X {pkg}.CommitID={MINIO_COMMIT}",
            f"-X {pkg}.ShortCommitID={MINIO_COMMIT[:12]}",
            f"-X {pkg}.CopyrightYear={when[:4]}",
        ]
    )


def build_minio(dest: Path | None = None, *, hint_ahead: bool = True) -> Path:
    """Build MinIO ``MINIO_RELEASE`` with ``go install`` from the Go module proxy into ``dest`` (default
    ``minio_cache_path()``), saying what it does and how far it is (and, with ``hint_ahead``, which command
    does it ahead of time); returns ``dest``.

    ``go install module@version`` works for MinIO because its go.mod has no replace directives. The build
    goes to a private directory first and is renamed into place, so a concurrent or interrupted build never
    leaves a half-written binary at ``dest``; Go's own caches (GOMODCACHE, GOCACHE) keep what was
    downloaded and compiled, so a second attempt is faster.
    """
    dest = dest or minio_cache_path()
    go, go_version = find_go()
    modcache, goproxy = _go_env(go, "GOMODCACHE", "GOPROXY")
    target = f"{MINIO_MODULE}@{MINIO_MODULE_VERSION}"
    say(
        f"{PREFIX}: building MinIO {MINIO_RELEASE} (the S3 test server; once): `go install {target}` with "
        f"{go_version}, modules from {goproxy or 'the Go module proxy'} into {modcache or 'GOMODCACHE'}"
    )
    say(f"{PREFIX}: {MINIO_BUILD_COST}; the binary (about {MINIO_BINARY_MB} MB) goes to {dest}")
    if hint_ahead:
        say(f"{PREFIX}: to do this ahead of time, run {PREPARE_HINT}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".build-"))
    try:
        cmd = [go, "install", "-v", "-trimpath", "-ldflags", _minio_ldflags(), target]
        env = {**os.environ, "GOBIN": str(tmp), "CGO_ENABLED": "0"}
        ticker = Ticker(f"building MinIO {MINIO_RELEASE}", every=15.0)
        code, tail = _run_go(cmd, env, ticker)
        built = tmp / "minio"
        if code < 0:
            raise S3ServerError(
                f"building MinIO {MINIO_RELEASE} was stopped (signal {-code}) after {duration(ticker.elapsed)};"
                f" nothing was kept at {dest} (Go's module cache keeps what was downloaded). Build it ahead "
                f"of the tests with {PREPARE_HINT}"
            )
        if code != 0 or not built.is_file():
            last = "\n".join(tail)
            raise S3ServerError(
                f"building MinIO {MINIO_RELEASE} with `go install {target}` failed (exit {code}) after "
                f"{duration(ticker.elapsed)}; go's last lines:\n{last}\nIt needs {_GO_NEEDED} and the Go "
                f"module proxy ({goproxy}) reachable"
            )
        check = subprocess.run([str(built), "--version"], capture_output=True, text=True, timeout=60)
        if check.returncode != 0:
            raise S3ServerError(
                f"the MinIO just built does not run (`minio --version`): {check.stderr[-2000:]}"
            )
        os.replace(built, dest)
        say(f"{PREFIX}: built MinIO {MINIO_RELEASE} in {duration(ticker.elapsed)}: {dest}")
        return dest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run_go(cmd: list[str], env: dict[str, str], ticker: Ticker) -> tuple[int, list[str]]:
    """Run a ``go install -v``; a line every ``ticker.every`` seconds counts the modules downloaded (``go:
    downloading ...``) and the packages compiled (``-v`` prints each); returns the exit code and go's
    last 30 lines. The lines are read on a thread and reported from this one, pytest's."""
    proc = subprocess.Popen(
        cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    tail: collections.deque[str] = collections.deque(maxlen=30)
    downloaded = compiled = 0
    try:
        while True:
            try:
                line = lines.get(timeout=1.0)
            except queue.Empty:
                line = ""
            if line is None:
                break
            if line:
                tail.append(line)
                if line.startswith("go: downloading"):
                    downloaded += 1
                elif " " not in line:  # -v: one import path per package compiled
                    compiled += 1
            ticker.tick(f"{downloaded} Go modules downloaded, {compiled} packages compiled")
        return proc.wait(), list(tail)
    finally:
        if proc.poll() is None:  # interrupted (Ctrl-C, a timeout): do not leave go running
            proc.kill()
            proc.wait()


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
def s3a_dir() -> Path:
    """Where the s3a jars are kept: ``$LINEAGESTORE_CACHE/s3a/hadoop-aws-<version>/``."""
    return cache_dir() / "s3a" / f"hadoop-aws-{HADOOP_AWS_VERSION}"


def s3a_jar_path(artifact: str, version: str) -> Path:
    return s3a_dir() / f"{artifact}-{version}.jar"


def s3a_jars(fetch: bool = True, *, hint_ahead: bool = True) -> list[str]:
    """Local paths of hadoop-aws 3.5.0, the AWS SDK v2 bundle and the analytics accelerator it needs.

    Fetched once from Maven Central into ``s3a_dir()`` (with ``mvn dependency:copy`` when Maven is
    installed, so its settings and ~/.m2 serve; else over HTTPS, checked against the SHA-1 Maven Central
    publishes); the bundle is 686 MB, and a fetch says so first (naming the command that fetches ahead of
    time unless ``hint_ahead`` is False). Put them on ``spark.jars`` before the session starts.
    """
    missing = [a for a in S3A_ARTIFACTS if not s3a_jar_path(a[1], a[2]).is_file()]
    if missing and not fetch:
        path = s3a_jar_path(missing[0][1], missing[0][2])
        raise S3ServerError(f"{path} is missing; fetch the s3a jars from Maven Central with {PREPARE_HINT}")
    if missing:
        _announce_fetch(missing, hint_ahead)
        for group, artifact, version in missing:
            _fetch_jar(group, artifact, version, s3a_jar_path(artifact, version))
    return [str(s3a_jar_path(artifact, version)) for _, artifact, version in S3A_ARTIFACTS]


def _announce_fetch(missing: list[tuple[str, str, str]], hint_ahead: bool) -> None:
    total = sum(S3A_SIZES.get(artifact, 0) for _, artifact, _ in missing)
    names = ", ".join(f"{g}:{a}:{v} ({megabytes(S3A_SIZES.get(a, 0))})" for g, a, v in missing)
    how = (
        "with mvn (your Maven settings and ~/.m2 serve)"
        if shutil.which("mvn")
        else f"over HTTPS from {MAVEN_CENTRAL}"
    )
    say(f"{PREFIX}: fetching the jars Spark needs for s3a:// (once), {megabytes(total)} {how}: {names}")
    say(
        f"{PREFIX}: they go to {s3a_dir()}; about {duration(total / 40e6)} at 40 MB/s, minutes on a slow "
        f"link.{f' To do this ahead of time, run {PREPARE_HINT}' if hint_ahead else ''}"
    )


def _fetch_jar(group: str, artifact: str, version: str, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    coords = f"{group}:{artifact}:{version}"
    ticker = Ticker(f"fetching {dest.name}", every=5.0)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".fetch-") as tmp:
        if shutil.which("mvn"):
            _mvn_copy(coords, Path(tmp), ticker)
        else:
            _download(group, artifact, version, Path(tmp) / dest.name, ticker)
        os.replace(Path(tmp) / dest.name, dest)  # atomic: a concurrent fetch never sees a partial jar
    say(f"{PREFIX}: fetched {coords} ({megabytes(dest.stat().st_size)}) in {duration(ticker.elapsed)}")


def _mvn_copy(coords: str, out_dir: Path, ticker: Ticker) -> None:
    """``mvn dependency:copy`` of ``coords`` into ``out_dir``; Maven shows no byte count in batch mode, so
    the ticker says the bytes of the artifact's files growing in the default local repository (or that
    the jar is already there and Maven is starting)."""
    group, artifact, version = coords.split(":")
    local = Path.home() / ".m2" / "repository" / group.replace(".", "/") / artifact / version
    in_local_repo = (local / f"{artifact}-{version}.jar").is_file()
    cmd = [
        shutil.which("mvn") or "mvn",
        "-q",
        "-B",
        f"{_DEPENDENCY_PLUGIN}:copy",
        f"-Dartifact={coords}",
        f"-DoutputDirectory={out_dir}",
    ]
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, text=True
        )
        try:
            while proc.poll() is None:
                try:
                    proc.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    pass
                if in_local_repo:
                    ticker.tick(f"copying from {local} (most of it Maven's start-up)")
                    continue
                so_far = sum(
                    p.stat().st_size for p in local.glob(f"{artifact}-{version}.jar*") if p.is_file()
                )
                total = S3A_SIZES.get(artifact)
                ticker.tick(f"{megabytes(so_far)} of about {megabytes(total)}" if total else "")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if proc.returncode != 0:
            log.seek(0)
            raise S3ServerError(
                f"mvn could not fetch {coords} (exit {proc.returncode}):\n{log.read()[-3000:]}"
            )


def _download(group: str, artifact: str, version: str, dest: Path, ticker: Ticker) -> None:
    url = f"{MAVEN_CENTRAL}/{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.jar"
    try:
        with urllib.request.urlopen(url + ".sha1", timeout=60) as resp:
            want = resp.read().decode().split()[0].strip()
        sha1 = hashlib.sha1()
        with urllib.request.urlopen(url, timeout=60) as resp, open(dest, "wb") as out:
            total = int(resp.headers.get("Content-Length") or 0)
            so_far = 0
            while chunk := resp.read(1 << 20):
                sha1.update(chunk)
                out.write(chunk)
                so_far += len(chunk)
                of = f" of {megabytes(total)} ({100 * so_far // total}%)" if total else ""
                ticker.tick(f"{megabytes(so_far)}{of}")
    except (urllib.error.URLError, OSError) as exc:
        raise S3ServerError(f"could not download {url}: {exc}") from exc
    if sha1.hexdigest() != want:
        raise S3ServerError(f"{url}: SHA-1 {sha1.hexdigest()} does not match the published {want}")

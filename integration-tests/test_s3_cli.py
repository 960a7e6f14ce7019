"""The ``lineagestore`` command started on its own (a subprocess with its own gateway JVM, no SparkSession)
on an ``s3a://`` checkpoint a real query wrote into the real local S3 server.

That JVM has Spark's jars and lineagestore's only; s3a:// needs hadoop-aws and the AWS SDK v2 bundle, given
with ``--jars`` or ``--packages`` (or ``LINEAGESTORE_JARS`` / ``LINEAGESTORE_PACKAGES``). Without them the
command stops before touching the store and names the missing classes and the options that add them.

``--packages`` is resolved by Spark's Ivy: once from Maven Central as a user would (the first run on a
machine downloads about 1.3 GB into our cache), and otherwise, to stay offline and small, from a
Maven repository in a temporary directory (the cached hadoop-aws and analytics-accelerator jars, linked, with
POMs written here) through an Ivy settings file that names only that repository; the 650 MB SDK bundle comes
from ``LINEAGESTORE_JARS`` in the same run (Ivy would copy it into its cache and its retrieve directory).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from lineagestore.jvm.jars import AWS_SDK_S3_CLASS, HADOOP_AWS_VERSION, S3A_FILESYSTEM_CLASS
from lineagestore.testing import oracle
from lineagestore.testing.cli import hadoop_conf_args
from lineagestore.testing.harness import PROVIDER_CLASSES, S3StreamHarness, close_state_stores
from lineagestore.testing.s3 import s3a_jars

EXE = Path(sys.executable).parent / "lineagestore"
HADOOP_AWS = f"org.apache.hadoop:hadoop-aws:{HADOOP_AWS_VERSION}"


@pytest.fixture(scope="module")
def checkpoint(spark, s3_server, tmp_path_factory):
    """``s3a://<bucket>/source``: 3 batches of a running aggregation on lineagestore, its stores closed."""
    from providers import LINEAGE_JAR, LINEAGE_JAR_SOURCE

    if not LINEAGE_JAR:
        pytest.skip(f"lineagestore jar not found: {LINEAGE_JAR_SOURCE}")
    bucket = f"ls-cli-{uuid.uuid4().hex[:12]}"
    s3_server.bucket(bucket)
    settings = s3_server.hadoop_conf(bucket)
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in settings.items():
        hadoop_conf.set(key, value)
    provider_key = "spark.sql.streaming.stateStore.providerClass"
    before = spark.conf.get(provider_key)
    spark.conf.set(provider_key, PROVIDER_CLASSES["lineagestore"])
    try:
        h = S3StreamHarness(
            spark, tmp_path_factory.mktemp("cli"), "lineagestore", s3_server, bucket, "source"
        )
        for rows in oracle.keyed_runs(11, 3, keys=5):
            h.write("in", rows)
            h.run(oracle.running_aggregate_query, "update")
        # close the stores (as an executor restart would): no late snapshot upload while the command reads
        close_state_stores(spark)
        yield h, hadoop_conf_args(settings)
    finally:
        spark.conf.set(provider_key, before)
        for key in settings:
            hadoop_conf.unset(key)


def lineagestore(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Runs the installed console script with a clean environment (no jars or packages from outside)."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LINEAGESTORE_JARS", "LINEAGESTORE_PACKAGES", "LINEAGESTORE_REPOSITORIES"))
        and k not in ("PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")
    }
    return subprocess.run(
        [str(EXE), *args], env={**clean, **(env or {})}, capture_output=True, text=True, timeout=300
    )


def test_inspect_and_verify_with_jars(checkpoint):
    h, hadoop_args = checkpoint
    uri = f"s3a://{h.bucket}/source"
    jars = s3a_jars()

    out = lineagestore("--jars", ",".join(jars), *hadoop_args, "inspect", uri, "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["uri"] == uri
    assert report["commitLog"] == {"batches": 3, "first": 0, "last": 2, "uncommitted": []}
    assert report["operators"] == [
        {
            "operatorId": 0,
            "storeNames": ["default"],
            "partitions": 2,
            "operatorName": "stateStoreSave",  # read from s3a:// too
            "kind": "aggregation",
        }
    ]
    for s in report["stores"]:
        assert [p["version"] for p in s["chosenPath"]] == [3, 2, 1], s
        assert not s["errors"] and not s["conflicts"]
        assert s["totals"]["deltas"] == 3

    # a directory of jars works as well as a list
    out = lineagestore("--jars", str(Path(jars[0]).parent), *hadoop_args, "verify", uri, "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["ok"] and result["batches"] == [0, 1, 2] and result["stores"] == 2, result
    assert result["filesVerified"] >= 6 and result["bytesVerified"] > 0


def test_without_the_s3a_jars_the_error_names_the_classes_and_the_options(checkpoint):
    h, hadoop_args = checkpoint
    uri = f"s3a://{h.bucket}/source"
    out = lineagestore(*hadoop_args, "verify", uri)
    assert out.returncode == 4, out.stdout + out.stderr
    err = out.stderr
    assert err.startswith(f"lineagestore verify: error: {uri} needs hadoop-aws and the AWS SDK"), err
    assert S3A_FILESYSTEM_CLASS in err and AWS_SDK_S3_CLASS in err
    assert f"--packages {HADOOP_AWS}" in err
    assert f"--jars /path/to/hadoop-aws-{HADOOP_AWS_VERSION}.jar,/path/to/bundle-" in err
    assert "Traceback" not in err

    # hadoop-aws alone: only the SDK is missing, and only its jar is asked for
    hadoop_aws = next(j for j in s3a_jars() if "hadoop-aws" in Path(j).name)
    out = lineagestore("--jars", hadoop_aws, *hadoop_args, "inspect", uri)
    assert out.returncode == 4 and AWS_SDK_S3_CLASS in out.stderr, out.stderr
    assert S3A_FILESYSTEM_CLASS not in out.stderr and "--jars /path/to/bundle-" in out.stderr


POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>{group}</groupId>
  <artifactId>{artifact}</artifactId>
  <version>{version}</version>
  <dependencies>{deps}</dependencies>
</project>
"""

IVY_SETTINGS = """<ivysettings>
  <settings defaultResolver="test-repo"/>
  <caches useOrigin="true"/>
  <resolvers>
    <filesystem name="test-repo" m2compatible="true">
      <ivy pattern="{repo}/[organisation]/[module]/[revision]/[module]-[revision].pom"/>
      <artifact pattern="{repo}/[organisation]/[module]/[revision]/[artifact]-[revision](-[classifier]).[ext]"/>
    </filesystem>
  </resolvers>
</ivysettings>
"""


def _maven_repo(root: Path) -> Path:
    """hadoop-aws (depending on the analytics accelerator, as its real POM does) in a Maven layout."""
    jars = {Path(j).name: j for j in s3a_jars()}
    accelerator = next(n for n in jars if n.startswith("analyticsaccelerator-s3-"))
    acc_version = accelerator.removeprefix("analyticsaccelerator-s3-").removesuffix(".jar")
    entries = [
        ("org.apache.hadoop", "hadoop-aws", HADOOP_AWS_VERSION, "software.amazon.s3.analyticsaccelerator"),
        ("software.amazon.s3.analyticsaccelerator", "analyticsaccelerator-s3", acc_version, None),
    ]
    for group, artifact, version, dep_group in entries:
        d = root / group.replace(".", "/") / artifact / version
        d.mkdir(parents=True)
        (d / f"{artifact}-{version}.jar").symlink_to(jars[f"{artifact}-{version}.jar"])
        deps = (
            f"<dependency><groupId>{dep_group}</groupId><artifactId>analyticsaccelerator-s3</artifactId>"
            f"<version>{acc_version}</version></dependency>"
            if dep_group
            else ""
        )
        (d / f"{artifact}-{version}.pom").write_text(
            POM.format(group=group, artifact=artifact, version=version, deps=deps)
        )
    return root


def test_clone_with_packages_copies_server_side(checkpoint, tmp_path):
    """--packages (resolved by Ivy) and LINEAGESTORE_JARS land in one class loader with lineagestore's jar:
    the clone between two s3a:// locations links against hadoop-aws and the SDK for its server-side copy."""
    h, hadoop_args = checkpoint
    repo = _maven_repo(tmp_path / "repo")
    settings = tmp_path / "ivysettings.xml"
    settings.write_text(IVY_SETTINGS.replace("{repo}", str(repo)))
    ivy_home = tmp_path / "ivy"
    bundle = next(j for j in s3a_jars() if Path(j).name.startswith("bundle-"))
    clone = f"s3a://{h.bucket}/clone-{uuid.uuid4().hex[:8]}"
    out = lineagestore(
        "--packages",
        HADOOP_AWS,
        *hadoop_args,
        "clone",
        f"s3a://{h.bucket}/source",
        clone,
        "--json",
        env={
            "LINEAGESTORE_JARS": bundle,
            "PYSPARK_SUBMIT_ARGS": f"--conf spark.jars.ivySettings={settings} "
            f"--conf spark.jars.ivy={ivy_home} pyspark-shell",
        },
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["files"] > 0 and report["serverCopied"] == report["files"], report
    retrieved = sorted(p.name for p in (ivy_home / "jars").iterdir())
    assert retrieved == [
        f"org.apache.hadoop_hadoop-aws-{HADOOP_AWS_VERSION}.jar",
        next(
            f"software.amazon.s3.analyticsaccelerator_{Path(j).name}"
            for j in s3a_jars()
            if "analyticsaccelerator" in j
        ),
    ], retrieved


# The long run only: a fresh machine downloads about 1.3 GB from Maven Central here, and what our code does with
# --packages (Ivy's resolution into the command's class loader) is test_clone_with_packages_copies_server_side's.
@pytest.mark.long_run
def test_packages_resolve_from_maven_central(checkpoint):
    """What a user types: ``--packages org.apache.hadoop:hadoop-aws:3.5.0`` with Spark's default resolvers.

    The JVM's ``user.home`` is a directory of our cache, so no ``~/.m2`` or ``~/.ivy2.5.2`` of this machine
    takes part: the first run on a machine fetches hadoop-aws, the SDK bundle and their dependencies from
    Maven Central (about 1.3 GB, kept for the next runs in ``$LINEAGESTORE_CACHE/maven-central-home``)."""
    from lineagestore.testing.s3_setup import cache_dir

    h, hadoop_args = checkpoint
    home = cache_dir() / "maven-central-home"
    home.mkdir(parents=True, exist_ok=True)
    out = lineagestore(
        "--packages",
        HADOOP_AWS,
        *hadoop_args,
        "verify",
        f"s3a://{h.bucket}/source",
        "--json",
        env={"JAVA_TOOL_OPTIONS": f"-Duser.home={home}"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout)["ok"]
    retrieved = {p.name for p in (home / ".ivy2.5.2" / "jars").iterdir()}
    assert f"org.apache.hadoop_hadoop-aws-{HADOOP_AWS_VERSION}.jar" in retrieved, retrieved
    assert any(n.startswith("software.amazon.awssdk_bundle-") for n in retrieved), retrieved


def test_unresolvable_packages_are_named(tmp_path):
    settings = tmp_path / "ivysettings.xml"
    settings.write_text(IVY_SETTINGS.replace("{repo}", str(tmp_path / "empty-repo")))
    (tmp_path / "ckpt").mkdir()  # a path that exists: a missing one is refused before any JVM starts
    out = lineagestore(
        "--packages",
        "org.example:no-such-thing:1.0",
        "inspect",
        str(tmp_path / "ckpt"),
        env={
            "PYSPARK_SUBMIT_ARGS": f"--conf spark.jars.ivySettings={settings} "
            f"--conf spark.jars.ivy={tmp_path / 'ivy'} pyspark-shell"
        },
    )
    assert out.returncode == 4, out.stderr
    assert "could not resolve --packages org.example:no-such-thing:1.0" in out.stderr, out.stderr
    assert "org.example#no-such-thing;1.0" in out.stderr, out.stderr
    log = out.stderr.rsplit("JVM output: ", 1)[1].strip()
    assert Path(log).is_file()  # kept for the user, named in the message
    Path(log).unlink()

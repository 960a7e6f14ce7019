"""What jars the tools' JVM takes, and what to say when it lacks one.

The command line's ``--jars``/``--packages``/``--repositories`` (and their environment variables) as
spark-submit takes them, the settings the gateway JVM starts with, the error for ``s3a://`` on a JVM without
hadoop-aws or the AWS SDK bundle, and what Spark's Ivy could not resolve. No JVM here:
:mod:`lineagestore.jvm.tools` starts and talks to it.
"""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path

# What s3a:// needs besides Spark: hadoop-aws of the Hadoop Spark 4.3.0 ships (its client jars are 3.5.0) and
# the AWS SDK v2 bundle hadoop-aws 3.5.0 is built with (a compile-scope dependency in its POM, so --packages
# brings it). lineagestore.testing.s3_setup fetches these versions for the tests.
HADOOP_AWS_VERSION = "3.5.0"
AWS_SDK_BUNDLE_VERSION = "2.35.4"
S3A_FILESYSTEM_CLASS = "org.apache.hadoop.fs.s3a.S3AFileSystem"
AWS_SDK_S3_CLASS = "software.amazon.awssdk.services.s3.S3Client"

# Environment variables the command line reads, comma-separated like spark-submit's --jars/--packages.
ENV_JARS = "LINEAGESTORE_JARS"
ENV_PACKAGES = "LINEAGESTORE_PACKAGES"
ENV_REPOSITORIES = "LINEAGESTORE_REPOSITORIES"

_COORDINATE = re.compile(r"^[^:/\s]+:[^:/\s]+:[^:/\s]+$")


def s3a_advice(uri: str, missing: list[tuple[str, str]], hadoop_version: str, launched: bool) -> str:
    """The error for ``s3a://`` on a JVM that lacks ``missing`` ((class, what provides it) pairs): which
    classes, and the exact option that adds them: to the command (``launched``, a JVM of its own) or to this
    process's SparkSession (the tools on it, ``lineagestore.check_checkpoint_location``)."""
    lacks = " and ".join(f"{cls} (from {what})" for cls, what in missing)
    package = f"org.apache.hadoop:hadoop-aws:{hadoop_version}"
    if not launched:
        return (
            f"{uri} needs hadoop-aws and the AWS SDK v2 bundle, but the JVM of this process's SparkSession "
            f"lacks {lacks}. Start that session with spark.jars.packages={package} "
            "(or with those jars in spark.jars)."
        )
    whats = {what for _, what in missing}
    hadoop_aws_jar = f"/path/to/hadoop-aws-{hadoop_version}.jar"
    bundle_jar = f"/path/to/bundle-{AWS_SDK_BUNDLE_VERSION}.jar"
    env = f"(before the command name; or set {ENV_PACKAGES} / {ENV_JARS} to the same value)"
    if whats == {"the AWS SDK v2 bundle"}:  # hadoop-aws came as a jar
        todo = (
            f"Add --jars {bundle_jar} (the AWS SDK bundle hadoop-aws {hadoop_version} is built with), or give "
            f"hadoop-aws as --packages {package} instead, which brings the bundle {env}."
        )
    elif whats == {"hadoop-aws"}:
        todo = f"Add --jars {hadoop_aws_jar} or --packages {package} {env}."
    else:
        todo = (
            f"Add --packages {package} (Spark's Ivy fetches it and the AWS SDK bundle it depends on from Maven "
            f"Central the first time, about 650 MB, into ~/.ivy2.5.2) or --jars {hadoop_aws_jar},{bundle_jar} "
            f"{env}."
        )
    return (
        f"{uri} needs hadoop-aws and the AWS SDK v2 bundle, but the JVM the command started lacks {lacks}. "
        + todo
    )


def split_list(*texts: str | None) -> list[str]:
    """Comma-separated lists (option values, environment variables) as one list, blanks dropped."""
    return [x.strip() for text in texts if text for x in text.split(",") if x.strip()]


def expand_jars(items: list[str]) -> list[str]:
    """Absolute local paths for ``--jars`` items: a jar file, a directory (its ``*.jar``) or a glob.

    Raises ``ValueError`` naming an item that gives no jar, so a typo fails here and not later as a missing
    class.
    """
    out: list[str] = []
    for item in items:
        path = os.path.expanduser(item[len("file://") :] if item.startswith("file:///") else item)
        if os.path.isdir(path):
            found = sorted(glob.glob(os.path.join(glob.escape(path), "*.jar")))
            if not found:
                raise ValueError(f"{item} is a directory without any .jar file")
        elif glob.has_magic(path):
            found = sorted(p for p in glob.glob(path) if os.path.isfile(p))
            if not found:
                raise ValueError(f"{item} matches no file")
        elif os.path.isfile(path):
            found = [path]
        else:
            raise ValueError(f"{item} does not exist")
        out.extend(os.path.abspath(p) for p in found)
    return list(dict.fromkeys(out))


def check_packages(items: list[str]) -> list[str]:
    """``--packages`` items as spark-submit takes them; ``ValueError`` for one not group:artifact:version."""
    for item in items:
        if not _COORDINATE.match(item):
            raise ValueError(f"'{item}' is not a Maven coordinate group:artifact:version")
    return list(dict.fromkeys(items))


def gateway_conf(jar: str, jars: list[str], packages: list[str], repositories: list[str]) -> dict[str, str]:
    """The Spark settings the gateway JVM is started with (``spark-submit --conf``)."""
    conf = {
        "spark.ui.enabled": "false",
        # one class loader for all of them (see the module's doc); spark-submit takes plain local paths
        "spark.jars": ",".join(dict.fromkeys([jar, *jars])),
    }
    if packages:
        conf["spark.jars.packages"] = ",".join(packages)
    if repositories:
        conf["spark.jars.repositories"] = ",".join(repositories)
    return conf


def ivy_failure(log_path: str, packages: list[str], repositories: list[str]) -> str | None:
    """What Ivy could not resolve or download, from the JVM's output (spark-submit exits with
    ``[unresolved dependency: g#a;v: not found]`` or ``[download failed: g#a;v!a.jar]``), and what to do."""
    try:
        with open(log_path, errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    head = f"could not resolve --packages {','.join(packages)}:"
    unresolved = list(dict.fromkeys(re.findall(r"unresolved dependency: ([^,\]\n]+)", text)))
    if unresolved:
        where = "Maven Central" + (f" and {','.join(repositories)}" if repositories else "")
        return (
            f"{head} Spark's Ivy found no {'; '.join(x.strip() for x in unresolved)}. Check the coordinates "
            f"(group:artifact:version) and that {where} can be reached from here (a mirror or a private "
            "repository: --repositories URL)."
        )
    failed = list(dict.fromkeys(re.findall(r"download failed: ([^,\]\n]+)", text)))
    if not failed:
        return None
    notes = []
    for artifact in failed:
        m = re.match(r"([^#]+)#([^;]+);([^!]+)!", artifact.strip())
        m2 = Path.home() / ".m2" / "repository"
        d = m2.joinpath(*m.group(1).split("."), m.group(2), m.group(3)) if m else None
        if d is not None and d.is_dir() and not list(d.glob("*.jar")):
            notes.append(
                f"{d} holds its POM without the jar, and Ivy's local-m2-cache resolver takes the POM from "
                "there and then finds no jar: delete that directory (Ivy then fetches both from Maven Central)"
            )
    return f"{head} Spark's Ivy could not download {'; '.join(x.strip() for x in failed)}. " + (
        "; ".join(notes) + ", or give the jars with --jars." if notes else "Check that it can be reached."
    )


def tail(path: str, lines: int = 20) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no output)"

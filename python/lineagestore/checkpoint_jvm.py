"""Reach lineagestore's Scala tools (``io.lineagestore.tools.CheckpointTools``) through py4j.

The on-storage format is implemented once, in Scala; the command line calls it through PySpark's py4j
gateway. Two ways to get a JVM:

* inside a process that already runs a SparkSession configured with :func:`lineagestore.configure`, its
  JVM is reused (no start-up cost at all);
* otherwise :func:`pyspark.java_gateway.launch_gateway` starts a bare py4j gateway JVM with the bundled jar
  on its class path. That is the fastest way to a JVM PySpark offers: it starts no SparkContext, so no
  scheduler, block manager, UI or executors (measured here: about half the time of a ``local[1]``
  SparkSession, whose context start dominates). Its output goes to a log file, shown only on failure.

The gateway JVM is started by ``spark-submit``, so it takes the jars a filesystem needs the way Spark does:
local jars (``spark.jars``) and Maven coordinates resolved by Spark's Ivy (``spark.jars.packages``, with
``spark.jars.repositories``). All of them, the lineagestore jar included, go through ``spark.jars`` into
one class loader: lineagestore's server-side S3 copy links against hadoop-aws and the AWS SDK directly,
which it could not do from the JVM's own class path with hadoop-aws in Spark's loader.
"""

from __future__ import annotations

import glob
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from lineagestore._jar import jar_path
from lineagestore._jvm_start import StartOptions

TOOLS_CLASS = "io.lineagestore.tools.CheckpointTools"

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


class ToolsUnavailable(RuntimeError):
    """The JVM side could not be reached (no Java, jar missing, gateway failed to start)."""


class MissingFilesystem(ToolsUnavailable):
    """The JVM lacks the classes of the filesystem a checkpoint URI needs (s3a:// without hadoop-aws)."""


class ToolError(RuntimeError):
    """A call into the Scala tools failed; the message is the Java exception's (it names the file)."""


class JvmTools:
    """Typed access to ``CheckpointTools``: every call returns parsed JSON (or text) and turns a Java
    exception into :class:`ToolError` with the Java message."""

    def __init__(self, jvm: Any, gateway: Any = None, log_path: str | None = None, start: Any = None):
        self._jvm = jvm
        self._gateway = gateway
        self._start = start  # the launch's StartOptions: publishes a class-data archive once the JVM exits
        self.log_path = log_path
        self.launched = gateway is not None  # a JVM of its own (else this process's SparkSession's)
        from py4j.java_gateway import JavaClass

        # py4j answers a class it cannot find with a JavaPackage: check what came back
        self._tools = jvm.io.lineagestore.tools.CheckpointTools
        if not isinstance(self._tools, JavaClass):
            raise ToolsUnavailable(
                f"the JVM does not have {TOOLS_CLASS}: the lineagestore jar is not on its class path. Configure "
                "the SparkSession with lineagestore.configure(...) (which adds the jar) before using the tools."
            )

    # -- plumbing ---------------------------------------------------------------------------------------------

    def _call(self, name: str, *args: Any) -> Any:
        from py4j.protocol import Py4JError, Py4JJavaError

        try:
            return getattr(self._tools, name)(*args)
        except Py4JJavaError as e:
            raise ToolError(_java_message(e)) from None
        except Py4JError as e:
            raise ToolsUnavailable(
                f"lost the connection to the JVM running the lineagestore tools: {e}"
            ) from e

    def _json(self, name: str, *args: Any) -> Any:
        out = self._call(name, *args)
        return None if out is None else json.loads(out)

    def close(self) -> None:
        if self._gateway is not None:
            try:
                self._gateway.shutdown()
            finally:
                proc = getattr(self._gateway, "proc", None)
                exited = False
                if proc is not None:
                    try:
                        proc.stdin.close()
                        proc.wait(timeout=20)  # a first run writes the class-data archive (a few s)
                        exited = True
                    except Exception:
                        proc.kill()
                if self._start is not None:
                    self._start.finish(exited)
                self._gateway = None
                if self.log_path:
                    try:
                        os.unlink(self.log_path)
                    except OSError:
                        pass

    def __enter__(self) -> JvmTools:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- class path checks ----------------------------------------------------------------------------------------

    def require_filesystem(self, uri: str) -> None:
        """Raise :class:`MissingFilesystem`, saying exactly what to add, if ``uri`` is ``s3a://`` and the JVM
        lacks hadoop-aws or the AWS SDK bundle (Hadoop would fail later with a bare ClassNotFoundException)."""
        if urlparse(uri).scheme.lower() != "s3a":
            return
        from py4j.protocol import Py4JError

        try:
            # the class loader FileSystem.get uses: the tools' Hadoop configuration's
            conf = self._jvm.io.lineagestore.tools.ToolEnv.hadoopConf()
            impl = conf.get("fs.s3a.impl") or S3A_FILESYSTEM_CLASS
            hadoop_version = str(self._jvm.org.apache.hadoop.util.VersionInfo.getVersion())
        except Py4JError as e:
            raise ToolsUnavailable(
                f"lost the connection to the JVM running the lineagestore tools: {e}"
            ) from e
        missing = [
            (cls, what)
            for cls, what in ((impl, "hadoop-aws"), (AWS_SDK_S3_CLASS, "the AWS SDK v2 bundle"))
            if not _has_class(conf, cls)
        ]
        if missing:
            raise MissingFilesystem(s3a_advice(uri, missing, hadoop_version, self.launched))

    # -- CheckpointTools ----------------------------------------------------------------------------------------

    def set_hadoop_conf(self, key: str, value: str) -> None:
        self._call("setHadoopConf", key, value)

    def list(self, uri: str) -> list[dict] | None:
        return self._json("list", uri)

    def list_tree(self, uri: str) -> list[dict] | None:
        return self._json("listTree", uri)

    def read_text(self, uri: str) -> str | None:
        return self._call("readText", uri)

    def write_text(self, uri: str, text: str, overwrite: bool) -> None:
        self._call("writeText", uri, text, overwrite)

    def inspect_adjunct_table(self, uri: str) -> dict:
        return self._json("inspectAdjunctTable", uri)

    def existing_batches(self, store: Any, commit_log: str) -> list[int]:
        return self._json(
            "existingBatches", store.uri, store.operator_id, store.partition_id, store.store_name, commit_log
        )

    def inspect_store(self, store: Any, commit_log: str) -> dict:
        return self._json(
            "inspectStore", store.uri, store.operator_id, store.partition_id, store.store_name, commit_log
        )

    def verify_store(self, store: Any, targets: str, scratch_dir: str = "") -> dict:
        return self._json(
            "verifyStore",
            store.uri,
            store.operator_id,
            store.partition_id,
            store.store_name,
            targets,
            scratch_dir,
        )

    def gc_store(
        self,
        store: Any,
        commit_log: str,
        retain: int,
        grace_ms: int,
        apply: bool,
        current_partitions: int = 0,
        latest_batch: int = -1,
    ) -> dict:
        """``current_partitions``: the operator's partition count in the newest committed batch (0: unknown),
        so that a store above it is retired once ``retain`` batches no longer name it (CleanupPlanner)."""
        return self._json(
            "gcStore",
            store.uri,
            store.operator_id,
            store.partition_id,
            store.store_name,
            commit_log,
            retain,
            grace_ms,
            apply,
            current_partitions,
            latest_batch,
        )

    def clone_files(self, src: str, dst: str, rel_dir: str, names: list[str]) -> dict:
        return self._json("cloneFiles", src, dst, rel_dir, "\n".join(names))

    def delete(self, uri: str) -> None:
        self._call("delete", uri)

    def key_placement(
        self, key_schema: str, value_schema: str, prefix_cols: int, partition_cols: int, partitions: int
    ) -> Any:
        """Spark's own placement of a state key (``SparkKeyPlacement``, in the Spark glue), as a JVM object."""
        from py4j.protocol import Py4JJavaError

        cls = self._jvm.org.apache.spark.sql.execution.streaming.state.lineagestore.SparkKeyPlacement
        try:
            return cls.of(key_schema, value_schema, prefix_cols, partition_cols, partitions)
        except Py4JJavaError as e:
            raise ToolError(_java_message(e)) from None

    def tws_placement(
        self,
        operator_name: str,
        store_name: str,
        schema_files: list[str],
        properties: str,
        encoding: str,
        partitions: int,
    ) -> Any:
        """Spark's own placement of every column family of a transformWithState store (``TwsKeyPlacement``)."""
        from py4j.protocol import Py4JJavaError

        cls = self._jvm.org.apache.spark.sql.execution.streaming.state.lineagestore.TwsKeyPlacement
        try:
            return cls.of(
                operator_name, store_name, "\n".join(schema_files), properties, encoding, partitions
            )
        except Py4JJavaError as e:
            raise ToolError(_java_message(e)) from None

    def repartition_store(
        self,
        operator_dir: str,
        operator_id: int,
        store_name: str,
        sources: str,
        empty_version: int,
        placement: Any,
        general_path_only: bool = False,
    ) -> dict:
        return self._json(
            "repartitionStore",
            operator_dir,
            operator_id,
            store_name,
            sources,
            empty_version,
            placement,
            general_path_only,
        )


def _java_message(e: Any) -> str:
    try:
        jex = e.java_exception
        msg = jex.getMessage()
        name = jex.getClass().getName()
        return f"{msg}" if msg else name
    except Exception:
        return str(e)


def _active_jvm() -> Any:
    """The JVM of a SparkContext already running in this process, if any."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return None
    sc = SparkContext._active_spark_context
    return sc._jvm if sc is not None else None


def _has_class(conf: Any, name: str) -> bool:
    """True if the class loader of Hadoop configuration ``conf`` (a py4j object), the one ``FileSystem.get``
    loads the filesystem with, has class ``name``'s class file. Not loaded: S3AFileSystem fails to load
    without the SDK, and the question here is which jar is missing."""
    from py4j.protocol import Py4JError

    try:
        return conf.getClassLoader().getResource(name.replace(".", "/") + ".class") is not None
    except Py4JError:
        return False


def s3a_advice(uri: str, missing: list[tuple[str, str]], hadoop_version: str, launched: bool) -> str:
    """The error for ``s3a://`` on a JVM that lacks ``missing`` ((class, what provides it) pairs): which
    classes, and the exact option that adds them."""
    lacks = " and ".join(f"{cls} (from {what})" for cls, what in missing)
    package = f"org.apache.hadoop:hadoop-aws:{hadoop_version}"
    if not launched:
        return (
            f"{uri} needs hadoop-aws and the AWS SDK v2 bundle, but the JVM of this process's SparkSession "
            f"(which the tools use) lacks {lacks}. Start that session with spark.jars.packages={package} "
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


def connect(
    hadoop_conf: dict[str, str] | None = None,
    jars: list[str] | None = None,
    packages: list[str] | None = None,
    repositories: list[str] | None = None,
    in_session: str = "refuse",
    short_lived: bool = False,
) -> JvmTools:
    """Return :class:`JvmTools` on this process's SparkContext's JVM if one runs, else on a new py4j gateway
    JVM with the bundled jar (closed by :meth:`JvmTools.close`).

    A new JVM also gets ``jars`` (local paths) and ``packages`` (Maven coordinates that Spark's Ivy resolves,
    with their dependencies, from Maven Central, ``~/.m2`` and ``repositories``): e.g. hadoop-aws and the
    AWS SDK bundle for ``s3a://``. A running SparkSession's JVM cannot take more jars: asking for them then
    raises :class:`ToolsUnavailable`, unless ``in_session="ignore"``. ``short_lived`` (a command that reads
    little, like ``inspect``) starts it with the C1 compiler only (see ``lineagestore._jvm_start``).
    """
    jvm = _active_jvm()
    if jvm is not None:
        if (jars or packages) and in_session != "ignore":
            raise ToolsUnavailable(
                "--jars/--packages go to the JVM the command starts, but this process runs a SparkSession "
                "whose JVM the tools use: give them to that session instead (spark.jars / spark.jars.packages)"
            )
        tools = JvmTools(jvm)
    else:
        tools = _launch(jars or [], packages or [], repositories or [], short_lived)
    for k, v in (hadoop_conf or {}).items():
        tools.set_hadoop_conf(k, v)
    return tools


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


def _launch(jars: list[str], packages: list[str], repositories: list[str], short_lived: bool) -> JvmTools:
    try:
        jar = jar_path()
    except FileNotFoundError as e:
        raise ToolsUnavailable(str(e)) from e
    try:
        from pyspark import SparkConf
        from pyspark.java_gateway import launch_gateway
    except ImportError as e:
        raise ToolsUnavailable(f"pyspark is not installed ({e}); pip install lineagestore installs it") from e

    log_fd, log_path = tempfile.mkstemp(prefix="lineagestore-jvm-", suffix=".log")
    conf = SparkConf(loadDefaults=False)
    for key, value in gateway_conf(jar, jars, packages, repositories).items():
        conf.set(key, value)
    start = StartOptions(jar, jars, packages, short_lived)
    if start.java_options:  # spark-submit passes them to the gateway JVM (client mode)
        conf.set("spark.driver.extraJavaOptions", start.java_options)
    try:
        with os.fdopen(log_fd, "wb") as log:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
    except Exception as e:
        start.finish(False)
        failure = _ivy_failure(log_path, packages, repositories) if packages else None
        if failure:
            raise ToolsUnavailable(f"{failure} JVM output: {log_path}") from e
        tail = _tail(log_path)
        raise ToolsUnavailable(
            f"could not start the JVM for the lineagestore tools ({e}). Java 17 must be on PATH (or JAVA_HOME "
            f"set). JVM output ({log_path}):\n{tail}"
        ) from e
    try:
        return JvmTools(gateway.jvm, gateway, log_path, start)
    except ToolsUnavailable:
        gateway.shutdown()
        raise


def _ivy_failure(log_path: str, packages: list[str], repositories: list[str]) -> str | None:
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


def _tail(path: str, lines: int = 20) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no output)"

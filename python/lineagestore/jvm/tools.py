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

import json
import os
import tempfile
from typing import Any
from urllib.parse import urlparse

from lineagestore.jvm.jar import jar_path
from lineagestore.jvm.jars import (
    AWS_SDK_S3_CLASS,
    S3A_FILESYSTEM_CLASS,
    gateway_conf,
    ivy_failure,
    s3a_advice,
)
from lineagestore.jvm.jars import tail as log_tail
from lineagestore.jvm.start import StartOptions

TOOLS_CLASS = "io.lineagestore.tools.CheckpointTools"


class ToolsUnavailable(RuntimeError):
    """The JVM side could not be reached (no Java, jar missing, gateway failed to start)."""


class MissingFilesystem(ToolsUnavailable):
    """The JVM lacks the classes of the filesystem a checkpoint URI needs (s3a:// without hadoop-aws)."""


class ToolError(RuntimeError):
    """A call into the Scala tools failed; the message is the Java exception's (it names the file)."""


class FilesystemUnreachable(ToolError):
    """A call failed because the checkpoint's filesystem cannot be reached (an unknown host, a refused or timed
    out connection): nothing was read, so nothing is known about the checkpoint."""


# Java exceptions (and their subclasses) that mean the filesystem's server was not reached; Hadoop wraps them
# (hdfs:// an UnknownHostException in an IllegalArgumentException, s3a:// in an SDK exception), so the whole
# cause chain is looked at.
_UNREACHABLE = (
    "java.net.UnknownHostException",
    "java.net.SocketException",
    "java.net.SocketTimeoutException",
)


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
        return self.guarded(getattr(self._tools, name), *args)

    def guarded(self, method: Any, *args: Any) -> Any:
        """``method(*args)``, a py4j call (``CheckpointTools``', or a Spark-glue object's such as the
        repartition job's builder), with a Java failure turned into :class:`ToolError` (or
        :class:`FilesystemUnreachable`) and a lost JVM into :class:`ToolsUnavailable`."""
        from py4j.protocol import Py4JError, Py4JJavaError

        try:
            return method(*args)
        except Py4JJavaError as e:
            unreachable = _unreachable_cause(e)
            if unreachable:
                raise FilesystemUnreachable(
                    f"cannot reach the checkpoint's filesystem ({unreachable}): check the URI's host and port, "
                    f"the network and the --hadoop-conf settings. {_java_message(e)}"
                ) from None
            raise ToolError(_java_message(e)) from None
        except Py4JError as e:
            raise ToolsUnavailable(
                f"lost the connection to the JVM running the lineagestore tools: {e}"
            ) from e

    def _json(self, name: str, *args: Any) -> Any:
        out = self._call(name, *args)
        return None if out is None else json.loads(out)

    def _store_json(self, name: str, store: Any, *args: Any) -> Any:
        """A CheckpointTools call on one store: its directory and identity, then ``args``."""
        return self._json(name, store.uri, store.operator_id, store.partition_id, store.store_name, *args)

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
        require_s3a_classes(conf, uri, impl, hadoop_version, self.launched)

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

    def retained_batches(self, store: Any, commit_log: str, current_partitions: int = 0) -> dict:
        """``{"retained": [...], "beyondRetention": [...]}``: the batches of ``commit_log`` retention still
        holds in this store, and the older ones a clean-up removed (the store's own retention decides).
        ``current_partitions`` as for ``gc_store``: a store above it that gc retired whole holds nothing."""
        return self._store_json("retainedBatches", store, commit_log, current_partitions)

    def inspect_store(self, store: Any, commit_log: str, current_partitions: int = 0) -> dict:
        return self._store_json("inspectStore", store, commit_log, current_partitions)

    def verify_store(self, store: Any, targets: str, scratch_dir: str = "") -> dict:
        return self._store_json("verifyStore", store, targets, scratch_dir)

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
        return self._store_json(
            "gcStore", store, commit_log, retain, grace_ms, apply, current_partitions, latest_batch
        )

    def clone_files(self, src: str, dst: str, rel_dir: str, names: list[str]) -> dict:
        return self._json("cloneFiles", src, dst, rel_dir, "\n".join(names))

    def file_sink_log_rules(self) -> Any:
        """Spark's rules of its file sink's log, ``CompactibleFileStreamLog`` (``isCompactionBatch``,
        ``deriveCompactInterval``), as a JVM class: which batch compacts is Spark's decision."""
        return self._jvm.org.apache.spark.sql.execution.streaming.runtime.CompactibleFileStreamLog

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
            conf = self._jvm.io.lineagestore.tools.ToolEnv.hadoopConf()
            return cls.of(
                operator_name, store_name, "\n".join(schema_files), properties, encoding, partitions, conf
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


def _unreachable_cause(e: Any) -> str | None:
    """``class: message`` of the first exception in ``e``'s Java cause chain that means the filesystem was not
    reached (``_UNREACHABLE`` or a subclass), else None."""
    try:
        cause, seen = e.java_exception, 0
        while cause is not None and seen < 20:
            cls = cause.getClass()
            while cls is not None:
                if cls.getName() in _UNREACHABLE:
                    return f"{cause.getClass().getName()}: {cause.getMessage()}"
                cls = cls.getSuperclass()
            cause, seen = cause.getCause(), seen + 1
    except Exception:
        return None
    return None


def _active_jvm() -> Any:
    """The JVM of a SparkContext already running in this process, if any."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return None
    sc = SparkContext._active_spark_context
    return sc._jvm if sc is not None else None


def require_s3a_classes(conf: Any, uri: str, impl: str, hadoop_version: str, launched: bool) -> None:
    """Raise :class:`MissingFilesystem` (``s3a_advice``'s text) if the class loader of Hadoop configuration
    ``conf`` lacks the s3a filesystem ``impl`` or the AWS SDK bundle: the one check, for the tools' JVM and for
    a SparkSession's (``lineagestore.check_checkpoint_location``)."""
    missing = [
        (cls, what)
        for cls, what in ((impl, "hadoop-aws"), (AWS_SDK_S3_CLASS, "the AWS SDK v2 bundle"))
        if not _has_class(conf, cls)
    ]
    if missing:
        raise MissingFilesystem(s3a_advice(uri, missing, hadoop_version, launched))


def _has_class(conf: Any, name: str) -> bool:
    """True if the class loader of Hadoop configuration ``conf`` (a py4j object), the one ``FileSystem.get``
    loads the filesystem with, has class ``name``'s class file. Not loaded: S3AFileSystem fails to load
    without the SDK, and the question here is which jar is missing."""
    from py4j.protocol import Py4JError

    try:
        return conf.getClassLoader().getResource(name.replace(".", "/") + ".class") is not None
    except Py4JError:
        return False


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
    little, like ``inspect``) starts it with the C1 compiler only (see ``lineagestore.jvm.start``).
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
        failure = ivy_failure(log_path, packages, repositories) if packages else None
        if failure:
            raise ToolsUnavailable(f"{failure} JVM output: {log_path}") from e
        tail = log_tail(log_path)
        raise ToolsUnavailable(
            f"could not start the JVM for the lineagestore tools ({e}). Java 17 must be on PATH (or JAVA_HOME "
            f"set). JVM output ({log_path}):\n{tail}"
        ) from e
    try:
        return JvmTools(gateway.jvm, gateway, log_path, start)
    except ToolsUnavailable:
        gateway.shutdown()
        raise

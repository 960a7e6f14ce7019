"""Reach lineagestore's Scala tools (``io.lineagestore.tools.CheckpointTools``) through py4j.

The on-storage format is implemented once, in Scala; the command line calls it through PySpark's py4j
gateway. Two ways to get a JVM:

* inside a process that already runs a SparkSession configured with :func:`lineagestore.configure`, its
  JVM is reused (no start-up cost at all);
* otherwise :func:`pyspark.java_gateway.launch_gateway` starts a bare py4j gateway JVM with the bundled jar
  on its class path. That is the fastest way to a JVM PySpark offers: it starts no SparkContext, so no
  scheduler, block manager, UI or executors (measured here: about half the time of a ``local[1]``
  SparkSession, whose context start dominates). Its output goes to a log file, shown only on failure.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from lineagestore._jar import jar_path

TOOLS_CLASS = "io.lineagestore.tools.CheckpointTools"


class ToolsUnavailable(RuntimeError):
    """The JVM side could not be reached (no Java, jar missing, gateway failed to start)."""


class ToolError(RuntimeError):
    """A call into the Scala tools failed; the message is the Java exception's (it names the file)."""


class JvmTools:
    """Typed access to ``CheckpointTools``: every call returns parsed JSON (or text) and turns a Java
    exception into :class:`ToolError` with the Java message."""

    def __init__(self, jvm: Any, gateway: Any = None, log_path: str | None = None):
        self._jvm = jvm
        self._gateway = gateway
        self.log_path = log_path
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
                if proc is not None:
                    try:
                        proc.stdin.close()
                        proc.wait(timeout=20)
                    except Exception:
                        proc.kill()
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

    def gc_store(self, store: Any, commit_log: str, retain: int, grace_ms: int, apply: bool) -> dict:
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
        )

    def clone_files(self, src: str, dst: str, rel_dir: str, names: list[str]) -> dict:
        return self._json("cloneFiles", src, dst, rel_dir, "\n".join(names))


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


def connect(hadoop_conf: dict[str, str] | None = None) -> JvmTools:
    """Return :class:`JvmTools` on this process's SparkContext's JVM if one runs, else on a new py4j gateway
    JVM with the bundled jar (closed by :meth:`JvmTools.close`)."""
    jvm = _active_jvm()
    if jvm is not None:
        tools = JvmTools(jvm)
    else:
        tools = _launch()
    for k, v in (hadoop_conf or {}).items():
        tools.set_hadoop_conf(k, v)
    return tools


def _launch() -> JvmTools:
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
    conf = (
        SparkConf(loadDefaults=False).set("spark.driver.extraClassPath", jar).set("spark.ui.enabled", "false")
    )
    try:
        with os.fdopen(log_fd, "wb") as log:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
    except Exception as e:
        tail = _tail(log_path)
        raise ToolsUnavailable(
            f"could not start the JVM for the lineagestore tools ({e}). Java 17 must be on PATH (or JAVA_HOME "
            f"set). JVM output ({log_path}):\n{tail}"
        ) from e
    try:
        return JvmTools(gateway.jvm, gateway, log_path)
    except ToolsUnavailable:
        gateway.shutdown()
        raise


def _tail(path: str, lines: int = 20) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no output)"

"""A real multi-executor Spark for tests: a standalone Master and Workers started as local processes.

Each Worker binds its own loopback address (127.0.0.2, .3, ...), so Spark's scheduler sees separate hosts
(it never runs a speculative copy of a task on the host of the original attempt, which is why
``local-cluster[...]``, whose executors share one host, cannot show a speculative attempt on another
executor). Each Worker, and so each executor it launches, has its own ``java.io.tmpdir``, where lineagestore
keeps its local RocksDB directories by default: executors do not share local state, as on separate hosts.

    with StandaloneCluster(workers=3) as cluster:
        spark = cluster.configure(SparkSession.builder).getOrCreate()
        cluster.await_executors(spark)
        ...
        cluster.kill_executor("127.0.0.3")

Everything binds to loopback addresses only. ``stop()`` (or leaving the ``with``) ends the Master, the
Workers and every executor they launched.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any


class ClusterError(RuntimeError):
    """The cluster could not start, or lost a process it needs; the message names the log to read."""


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class StandaloneCluster:
    """A standalone Spark Master on 127.0.0.1 and ``workers`` Workers on 127.0.0.2, 127.0.0.3, ...

    ``cores`` and ``memory`` are per Worker (one executor each with the defaults of :meth:`configure`).
    ``base_dir`` holds the logs, the Workers' work and local directories and their temporary directories
    (a new temporary directory when None, deleted by :meth:`stop`).
    """

    def __init__(
        self,
        workers: int = 3,
        cores: int = 1,
        memory: str = "1g",
        base_dir: str | os.PathLike | None = None,
        start_timeout_s: float = 120.0,
    ):
        if not 1 <= workers <= 250:
            raise ValueError(f"workers must be between 1 and 250, got {workers}")
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self._own_dir = base_dir is None
        self.base_dir = Path(base_dir or tempfile.mkdtemp(prefix="lineagestore-cluster-"))
        self.start_timeout_s = start_timeout_s
        self.hosts = [f"127.0.0.{2 + i}" for i in range(workers)]
        self.master_port = 0
        self.ui_port = 0
        self._procs: list[tuple[str, subprocess.Popen, Path]] = []

    # ---- life cycle ---------------------------------------------------------------------------------------

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def start(self) -> StandaloneCluster:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.master_port, self.ui_port = _free_port(), _free_port()
        self._launch(
            "master",
            "127.0.0.1",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.master_port),
                "--webui-port",
                str(self.ui_port),
            ],
        )
        self._wait(lambda s: s is not None, "the Master to answer")
        for i, host in enumerate(self.hosts):
            home = self.base_dir / f"worker-{i + 1}"
            for sub in ("work", "local", "tmp"):
                (home / sub).mkdir(parents=True, exist_ok=True)
            self._launch(
                f"worker-{i + 1}",
                host,
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    host,
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--work-dir",
                    str(home / "work"),
                    "--webui-port",
                    "0",
                    self.master_url,
                ],
                env={
                    "SPARK_LOCAL_DIRS": str(home / "local"),
                    # inherited by the executors this Worker launches: their own java.io.tmpdir, so their
                    # lineagestore local directories are apart, as on separate hosts
                    "_JAVA_OPTIONS": f"-Djava.io.tmpdir={home / 'tmp'}",
                },
            )
        self._wait(
            lambda s: s is not None and s.get("aliveworkers", 0) >= self.workers,
            f"{self.workers} Workers to register",
        )
        return self

    def stop(self) -> None:
        """Ends every process of the cluster (the executors are in their Worker's process group)."""
        for _, proc, _ in reversed(self._procs):
            _kill_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for _, proc, _ in self._procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _kill_group(proc, signal.SIGKILL)
        for pid in self.executor_pids().values():  # an executor that outlived its Worker
            _kill_pid(pid, signal.SIGKILL)
        self._procs.clear()
        if self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> StandaloneCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ---- using it -----------------------------------------------------------------------------------------

    def spark_conf(self) -> dict[str, str]:
        """Settings a SparkSession needs to run on this cluster: the master, the driver on 127.0.0.1, one
        executor per Worker."""
        return {
            "spark.master": self.master_url,
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.cores": str(self.cores),
            "spark.executor.memory": _executor_memory(self.memory),
            "spark.cores.max": str(self.cores * self.workers),
            # Spark's own dynamic allocation is off: the tests count on one executor per Worker
            "spark.dynamicAllocation.enabled": "false",
        }

    def configure(self, builder: Any) -> Any:
        for key, value in self.spark_conf().items():
            builder = builder.config(key, value)
        return builder

    def await_executors(self, spark: Any) -> None:
        """Waits until the application of ``spark`` (a SparkSession on this cluster) has an executor on every
        Worker's host. Standalone mode schedules a job as soon as one executor registered, so a test's first
        job could otherwise run on fewer executors than it counts on (the slowest JVM still starting)."""
        tracker = spark.sparkContext._jsc.sc().statusTracker()
        hosts = set(self.hosts)

        def registered(_state: dict | None) -> bool:
            return hosts <= {info.host() for info in tracker.getExecutorInfos()}

        self._wait(registered, f"an executor on each of {', '.join(self.hosts)}")

    def state(self) -> dict | None:
        """The Master's view (its JSON status page), or None when it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return None

    def executor_pids(self) -> dict[str, int]:
        """Executor JVMs of this cluster now running, by the host they run on."""
        pids = {}
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                args = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
                cwd = os.readlink(proc / "cwd")  # an executor runs in one of its Worker's work directories
            except OSError:
                continue
            if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in args and "--hostname" in args:
                if cwd.startswith(str(self.base_dir)):
                    pids[args[args.index("--hostname") + 1]] = int(proc.name)
        return pids

    def kill_executor(self, host: str) -> int:
        """SIGKILLs the executor JVM on ``host`` (as a lost machine would end it); returns its pid. Its
        Worker stays, and the Master starts a new executor there for the running application."""
        pid = self.executor_pids().get(host)
        if pid is None:
            raise ClusterError(f"no executor runs on {host} (running: {self.executor_pids()})")
        _kill_pid(pid, signal.SIGKILL)
        return pid

    def local_dir(self, host: str) -> Path:
        """The ``java.io.tmpdir`` of the executors on ``host``: where their lineagestore local state is."""
        return self.base_dir / f"worker-{self.hosts.index(host) + 1}" / "tmp"

    def log(self, name: str) -> Path:
        return self.base_dir / f"{name}.log"

    # ---- plumbing -----------------------------------------------------------------------------------------

    def _launch(self, name: str, host: str, args: list[str], env: dict[str, str] | None = None) -> None:
        log = self.log(name)
        environ = {**os.environ, "SPARK_LOCAL_IP": host, "SPARK_HOME": str(_spark_home()), **(env or {})}
        environ.pop("PYSPARK_SUBMIT_ARGS", None)
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [str(_spark_home() / "bin" / "spark-class"), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=environ,
                cwd=self.base_dir,
                start_new_session=True,  # its own process group: stop() ends it and its executors
            )
        self._procs.append((name, proc, log))

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            for name, proc, log in self._procs:
                if proc.poll() is not None:
                    raise ClusterError(
                        f"the {name} process exited ({proc.returncode}) while waiting for {what}; see {log}"
                    )
            if ready(self.state()):
                return
            time.sleep(0.5)
        raise ClusterError(
            f"timed out after {self.start_timeout_s:.0f}s waiting for {what}; see {self.base_dir}/*.log"
        )


def _executor_memory(worker_memory: str) -> str:
    """An executor size that fits its Worker with room for the JVM's own overhead (three quarters)."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = worker_memory.strip().lower()
    n = int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)
    return f"{max(256, (n * 3 // 4) >> 20)}m"


def _kill_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_pid(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass

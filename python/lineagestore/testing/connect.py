"""A Spark Connect server with lineagestore for tests: the pyspark wheel's own ``sbin/start-connect-server.sh``
(class ``org.apache.spark.sql.connect.service.SparkConnectServer``), run in the foreground as a local process
with the settings of ``lineagestore.server_conf()``, bound to 127.0.0.1 on a free port.

    with ConnectServer() as server:
        spark = SparkSession.builder.remote(server.url).getOrCreate()

A Connect client switches pyspark into Connect mode for its whole process (``SPARK_CONNECT_MODE_ENABLED``), so a
test process that also runs classic sessions should run its client in a process of its own.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from lineagestore._session import server_conf
from lineagestore.testing.cluster import _free_port, _kill_group, _spark_home


class ConnectServerError(RuntimeError):
    """The server did not start; the message says why, with the end of its log."""


class ConnectServer:
    """``conf`` is added to (and wins over) ``lineagestore.server_conf()``; ``master`` is the server's."""

    def __init__(
        self,
        conf: dict[str, str] | None = None,
        master: str = "local[2]",
        base_dir: Path | None = None,
        start_timeout_s: float = 120.0,
    ) -> None:
        self.conf = {**server_conf(), **(conf or {})}
        self.master = master
        self._own_dir = base_dir is None
        self.base_dir = Path(base_dir or tempfile.mkdtemp(prefix="lineagestore-connect-"))
        self.start_timeout_s = start_timeout_s
        self.port = 0
        self._proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.base_dir / "connect-server.log"

    def command(self) -> list[str]:
        """The start command: the wheel's script, in the foreground (``--wait``), with every setting."""
        conf = {
            **self.conf,
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
        }
        jars = conf.pop("spark.jars")
        args = [str(_spark_home() / "sbin" / "start-connect-server.sh"), "--wait", "--master", self.master]
        args += ["--jars", jars]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        return args

    def start(self) -> ConnectServer:
        self.port = _free_port()
        env = {
            **os.environ,
            "SPARK_HOME": str(_spark_home()),
            "SPARK_LOG_DIR": str(self.base_dir / "logs"),
            "SPARK_PID_DIR": str(self.base_dir),
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
        for key in (
            "PYSPARK_SUBMIT_ARGS",
            "SPARK_REMOTE",
            "SPARK_CONNECT_MODE_ENABLED",
            "PYSPARK_GATEWAY_PORT",
        ):
            env.pop(key, None)
        with open(self.log, "ab") as out:
            self._proc = subprocess.Popen(
                self.command(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.base_dir,
                start_new_session=True,  # its own process group: stop() ends the script and its JVM
            )
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise ConnectServerError(
                    f"the Spark Connect server exited ({self._proc.returncode}) before listening; "
                    f"{self.log}:\n{self._log_tail()}"
                )
            with socket.socket() as s:
                s.settimeout(1)
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.5)
        raise ConnectServerError(
            f"the Spark Connect server did not listen on 127.0.0.1:{self.port} within "
            f"{self.start_timeout_s:.0f}s; {self.log}:\n{self._log_tail()}"
        )

    def stop(self) -> None:
        if self._proc is not None:
            _kill_group(self._proc, signal.SIGTERM)
            try:
                self._proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                _kill_group(self._proc, signal.SIGKILL)
                self._proc.wait(timeout=10)
            self._proc = None
        if self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def _log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> ConnectServer:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: Any) -> None:
        self.stop()

"""A per-connection bandwidth limit in front of the local S3 server (``run.py --s3-stream-limit``).

S3 serves one GET stream at a fraction of a host's bandwidth; a local MinIO on the same cores has no such
limit, so it cannot show what parallel ranged GETs buy. ``throttle/main.go`` is a TCP proxy that limits
each connection's server-to-client bytes per second. It is built once with the Go toolchain into
``$LINEAGESTORE_CACHE/bench/throttle`` and runs bound to 127.0.0.1.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
from pathlib import Path
from urllib.parse import urlparse

from lineagestore.testing.s3_setup import cache_dir

SOURCE = Path(__file__).resolve().parent / "throttle" / "main.go"


def build() -> Path:
    """The proxy's binary, built from ``throttle/main.go`` when missing or older than the source."""
    binary = cache_dir() / "bench" / "throttle"
    if binary.exists() and binary.stat().st_mtime >= SOURCE.stat().st_mtime:
        return binary
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("--s3-stream-limit needs the Go toolchain (go) on PATH to build throttle/main.go")
    binary.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([go, "build", "-o", str(binary), str(SOURCE)], check=True, cwd=SOURCE.parent)
    return binary


class StreamLimit:
    """The running proxy: ``endpoint`` is the S3 endpoint to give clients instead of the server's."""

    def __init__(self, server_endpoint: str, bytes_per_s: int):
        self.server = urlparse(server_endpoint)
        self.bytes_per_s = bytes_per_s
        self.endpoint = ""
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> StreamLimit:
        target = f"{self.server.hostname}:{self.server.port}"
        args = [str(build()), "-listen", "127.0.0.1:0", "-target", target, "-rate", str(self.bytes_per_s)]
        self._proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        line = self._proc.stdout.readline().strip() if self._proc.stdout else ""
        if not line.startswith("listening on "):
            self.stop()
            raise RuntimeError(f"throttle did not start: {line!r}")
        self.endpoint = f"{self.server.scheme}://{line.removeprefix('listening on ')}"
        return self

    def served_bytes(self) -> int:
        """Server-to-client bytes of every connection so far: what clients downloaded through the proxy."""
        if self._proc is None or self._proc.stdout is None:
            raise RuntimeError("the throttle is not running")
        self._proc.send_signal(signal.SIGUSR1)
        line = self._proc.stdout.readline().strip()
        if not line.startswith("served "):
            raise RuntimeError(f"throttle answered {line!r} to SIGUSR1")
        return int(line.removeprefix("served "))

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(timeout=10)
        self._proc = None

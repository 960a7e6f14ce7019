"""A fault-injecting HTTP reverse proxy in front of a real S3 server, for tests.

``FaultyS3Proxy`` listens on 127.0.0.1 (a free port) and forwards every request to the real server (e.g. the
MinIO of :class:`lineagestore.testing.s3.S3Server`). Point a client at ``proxy.endpoint`` instead of the
server's endpoint; with no faults set, it sees the server byte for byte::

    from lineagestore.testing.s3 import S3Server
    from lineagestore.testing.s3_proxy import FaultyS3Proxy

    with S3Server() as s3, FaultyS3Proxy(s3.endpoint, seed=7) as proxy:
        conf = s3.hadoop_conf("bucket") | {"fs.s3a.bucket.bucket.endpoint": proxy.endpoint}
        proxy.set_faults(throttle=0.05, timeout=0.01, methods={"PUT"})
        ...
        proxy.clear()
        print(proxy.counts)  # {"faults": {"throttle": 3, ...}, "requests": {"GET": 120, "PUT": 40, ...}}
        print(proxy.request_log[:2])  # [("HEAD", "/bucket/ckpt/metadata"), ("PUT", "/bucket/ckpt/metadata")]

Requests pass through unchanged: the request line, every header in its order (``Host`` as the client sent
it, so SigV4 signatures stay valid) and the body, streamed (``Content-Length`` or HTTP ``chunked``,
including ``aws-chunked`` payloads, which are opaque bytes to a proxy). Only ``Expect: 100-continue`` is
answered by the proxy itself and not forwarded (SigV4 never signs ``Expect``). Keep-alive works on both
sides: one upstream connection per client connection.

Faults, each with a rate (probability per matching request; the rates are summed, at most 1), drawn from a
``random.Random(seed)`` in the order requests arrive:

* ``error_5xx``: ``500 InternalError`` (S3 XML error body); the request never reaches the server;
* ``throttle``: ``503 SlowDown`` (S3 XML error body); the request never reaches the server;
* ``timeout``: the connection is held without an answer for ``hold_s`` seconds (longer than the client's
  timeout), then closed. ``timeout_mode`` says whether the server saw the request: ``"before"`` (never
  forwarded), ``"after"`` (forwarded and done by the server, only the answer is lost: the nasty case for
  writes) or ``"mixed"`` (either, drawn per fault; the default);
* ``truncate``: the server's answer is sent with its ``Content-Length``, then the connection is cut after
  half the body. Only answers with a body can be cut (GET, list); a request drawn for ``truncate`` whose
  answer has no body goes through untouched and is not counted;
* ``delay_ms``: every matching request waits that long before it is forwarded (not counted as a fault).

``methods`` (e.g. ``{"PUT", "POST"}``) and ``path_pattern`` (a regular expression searched in the request
target, e.g. ``r"\\.zip"``) restrict which requests may get a fault; ``limit`` stops injecting after that
many faults. Standard library only; a thread per client connection.
"""

from __future__ import annotations

import random
import re
import threading
import urllib.parse
from collections import Counter, deque
from collections.abc import Iterable

from lineagestore.testing._s3_proxy_http import _Handler, _Server

FAULT_KINDS = ("error_5xx", "throttle", "timeout", "truncate")
REQUEST_LOG_SIZE = 100_000  # requests the proxy remembers (request_log)

# s3a settings for queries behind the proxy: short timeouts and few retries, so that a held connection costs
# seconds rather than minutes and a fault that outlasts the retries fails the operation (and the batch)
# quickly. Every key is a constant of hadoop-aws 3.5.0's org.apache.hadoop.fs.s3a.Constants; the reasons
# are in docs/testing.md ("Queries under S3 faults").
S3A_FAULT_TEST_SETTINGS = {
    "connection.establish.timeout": "2s",  # TCP connect (refused at once on loopback anyway)
    "connection.timeout": "3s",  # socket read timeout: a held ("timeout") answer fails after 3 s
    "connection.request.timeout": "10s",  # whole request, upload included (our files are small)
    "connection.acquisition.timeout": "10s",  # waiting for a pooled connection
    "attempts.maximum": "2",  # retries inside the AWS SDK, per S3A attempt
    "retry.limit": "3",  # S3A's own retries of an operation (connectivity, 5xx)
    "retry.interval": "100ms",  # first back-off of those, growing exponentially
    "retry.throttle.limit": "5",  # S3A's retries of 503 SlowDown
    "retry.throttle.interval": "100ms",
    "retry.http.5xx.errors": "true",  # retry 500 InternalError (the default, set explicitly)
}
# How long the proxy holds a "timeout" fault: longer than connection.timeout above.
FAULT_TEST_HOLD_S = 8.0


def s3a_conf_via_proxy(server_conf: dict[str, str], proxy_endpoint: str, bucket: str) -> dict[str, str]:
    """Per-bucket s3a settings: ``server_conf`` (``S3Server.hadoop_conf(bucket)``) with the endpoint
    replaced by the proxy's and the fault-test timeouts and retries of ``S3A_FAULT_TEST_SETTINGS``."""
    prefix = f"fs.s3a.bucket.{bucket}."
    conf = dict(server_conf)
    conf[prefix + "endpoint"] = proxy_endpoint
    conf.update({prefix + k: v for k, v in S3A_FAULT_TEST_SETTINGS.items()})
    return conf


class _FaultPlan:
    """The fault settings in force; replaced as a whole by set_faults/clear (readers take a reference)."""

    def __init__(
        self,
        rates: dict[str, float] | None = None,
        delay_ms: float = 0.0,
        methods: Iterable[str] | None = None,
        path_pattern: str | None = None,
        timeout_mode: str = "mixed",
        hold_s: float = 15.0,
        limit: int | None = None,
    ):
        self.rates = {k: float((rates or {}).get(k, 0.0)) for k in FAULT_KINDS}
        for kind, rate in self.rates.items():
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{kind}={rate}: a rate is a probability in [0, 1]")
        if sum(self.rates.values()) > 1.0 + 1e-9:
            raise ValueError(f"the fault rates add up to more than 1: {self.rates}")
        if timeout_mode not in ("before", "after", "mixed"):
            raise ValueError(f"timeout_mode={timeout_mode!r}: expected before, after or mixed")
        if delay_ms < 0 or hold_s < 0:
            raise ValueError("delay_ms and hold_s cannot be negative")
        self.delay_ms = float(delay_ms)
        self.methods = {m.upper() for m in methods} if methods else None
        self.path_re = re.compile(path_pattern) if path_pattern else None
        self.timeout_mode = timeout_mode
        self.hold_s = float(hold_s)
        self.limit = limit

    def matches(self, method: str, target: str) -> bool:
        if self.methods is not None and method not in self.methods:
            return False
        return self.path_re is None or self.path_re.search(target) is not None


class FaultyS3Proxy:
    """A loopback reverse proxy to ``upstream_endpoint`` (``http://host:port``) that injects S3 faults.

    Use as a context manager, or ``start()`` / ``stop()``. Thread-safe: faults may be changed while
    requests are in flight (each request uses the settings in force when it arrived).
    """

    def __init__(
        self,
        upstream_endpoint: str,
        seed: int | None = None,
        upstream_timeout: float = 120.0,
        port: int = 0,
    ):
        parsed = urllib.parse.urlsplit(upstream_endpoint)
        if parsed.scheme != "http" or not parsed.hostname or not parsed.port:
            raise ValueError(f"upstream_endpoint must be http://host:port, got {upstream_endpoint!r}")
        self.upstream = (parsed.hostname, parsed.port)
        self.upstream_timeout = upstream_timeout
        self._port = port  # 0: a free port; stop() then start() keeps the port it got
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._plan = _FaultPlan()
        self._faults: Counter[str] = Counter()
        self._requests: Counter[str] = Counter()
        self._log: deque[tuple[str, str]] = deque(maxlen=REQUEST_LOG_SIZE)
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------------------------------ lifecycle
    def __enter__(self) -> FaultyS3Proxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> FaultyS3Proxy:
        if self._server is not None:
            return self
        self._stopping.clear()
        server = _Server(("127.0.0.1", self._port), _Handler)
        server.proxy = self
        self._server = server
        self._port = server.server_address[1]
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="faulty-s3-proxy", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening, release held connections and close every client connection. Idempotent.

        Until ``start()`` is called again the endpoint refuses connections (an unreachable S3); ``start()``
        listens on the same port again."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()  # held ("timeout") requests end now
        server.shutdown()
        server.close_all()
        server.server_close()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<port>``; stays the same across stop() and start()."""
        if not self._port:
            raise RuntimeError("the proxy was never started")
        return f"http://127.0.0.1:{self._port}"

    @property
    def port(self) -> int:
        return self._port

    @property
    def running(self) -> bool:
        return self._server is not None

    def __repr__(self) -> str:
        where = self.endpoint if self._server is not None else "stopped"
        return f"FaultyS3Proxy({where} -> http://{self.upstream[0]}:{self.upstream[1]})"

    # --------------------------------------------------------------------------------------------- faults
    def set_faults(
        self,
        error_5xx: float = 0.0,
        throttle: float = 0.0,
        timeout: float = 0.0,
        truncate: float = 0.0,
        delay_ms: float = 0.0,
        methods: Iterable[str] | None = None,
        path_pattern: str | None = None,
        timeout_mode: str = "mixed",
        hold_s: float = 15.0,
        limit: int | None = None,
    ) -> None:
        """Replace the fault settings (see the module docstring). Counts are kept; ``limit`` counts anew."""
        plan = _FaultPlan(
            {"error_5xx": error_5xx, "throttle": throttle, "timeout": timeout, "truncate": truncate},
            delay_ms,
            methods,
            path_pattern,
            timeout_mode,
            hold_s,
            limit,
        )
        with self._lock:
            self._plan = plan

    def clear(self) -> None:
        """No faults and no delay from now on (requests already held keep waiting out their hold)."""
        with self._lock:
            self._plan = _FaultPlan()

    @property
    def counts(self) -> dict[str, dict[str, int]]:
        """``{"faults": {kind: n}, "requests": {method: n}}`` since start (or ``reset_counts``)."""
        with self._lock:
            return {
                "faults": {k: self._faults.get(k, 0) for k in (*FAULT_KINDS, "timeout_after")},
                "requests": dict(self._requests),
            }

    @property
    def request_log(self) -> list[tuple[str, str]]:
        """``(method, request target)`` of the requests since start (or ``reset_counts``), oldest first; the
        last ``REQUEST_LOG_SIZE`` only. A target is the path and query as sent, e.g.
        ``/bucket/ckpt/state/0/0/1_ab.delta`` or ``/bucket/?list-type=2&prefix=ckpt%2Fcommits%2F``."""
        with self._lock:
            return list(self._log)

    def reset_counts(self) -> None:
        with self._lock:
            self._faults.clear()
            self._requests.clear()
            self._log.clear()

    def _decide(self, method: str, target: str) -> tuple[_FaultPlan, str | None]:
        """The plan in force and the fault drawn for this request (None: pass through)."""
        with self._lock:
            self._requests[method] += 1
            self._log.append((method, target))
            plan = self._plan
            if not plan.matches(method, target) or not any(plan.rates.values()):
                return plan, None
            if plan.limit is not None and plan.limit <= 0:
                return plan, None
            u = self._rng.random()
            kind = None
            acc = 0.0
            for k in FAULT_KINDS:
                acc += plan.rates[k]
                if u < acc:
                    kind = k
                    break
            if kind == "timeout":
                mode = plan.timeout_mode
                if mode == "mixed":
                    mode = self._rng.choice(("before", "after"))
                kind = "timeout_after" if mode == "after" else "timeout"
            return plan, kind

    def _count(self, kind: str, plan: _FaultPlan) -> None:
        with self._lock:
            self._faults[kind] += 1
            if kind == "timeout_after":
                self._faults["timeout"] += 1
            if plan.limit is not None:
                plan.limit -= 1

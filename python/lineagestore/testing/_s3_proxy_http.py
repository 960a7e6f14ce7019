"""The HTTP side of :class:`lineagestore.testing.s3_proxy.FaultyS3Proxy`: a threaded loopback server and
the handler that forwards each request to the real S3 server, byte for byte, or answers it with the fault
the proxy drew for it."""

from __future__ import annotations

import http.client
import random
import select
import socket
import socketserver
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lineagestore.testing.s3_proxy import FaultyS3Proxy, _FaultPlan

_COPY_CHUNK = 1 << 16
_NO_BODY_STATUSES = {204, 304}


def _s3_error(code: str, message: str, resource: str, request_id: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{message}</Message><Resource>{resource}</Resource>"
        f"<RequestId>{request_id}</RequestId></Error>"
    ).encode()


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64
    proxy: FaultyS3Proxy

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self._conns_lock:
            self._conns.add(request)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._conns_lock:
                self._conns.discard(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away mid-answer (e.g. after its own timeout) is not an error here

    def close_all(self) -> None:
        with self._conns_lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive with the client
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def setup(self) -> None:
        super().setup()
        self._upstream: http.client.HTTPConnection | None = None

    def finish(self) -> None:
        self._drop_upstream()
        try:
            super().finish()
        except OSError:
            pass

    # All methods S3 clients use.
    def do_GET(self) -> None:
        self._proxy()

    do_PUT = do_POST = do_HEAD = do_DELETE = do_OPTIONS = do_GET

    # ------------------------------------------------------------------------------------------- requests
    def _proxy(self) -> None:
        proxy = self.server.proxy
        method = self.command
        plan, fault = proxy._decide(method, self.path)
        if plan.delay_ms:
            proxy._stopping.wait(plan.delay_ms / 1000.0)
        if fault in ("error_5xx", "throttle"):
            self._discard_body()
            proxy._count(fault, plan)
            if fault == "throttle":
                self._error(503, "Slow Down", "SlowDown", "Please reduce your request rate.")
            else:
                self._error(
                    500,
                    "Internal Server Error",
                    "InternalError",
                    "We encountered an internal error. Please try again.",
                )
            return
        if fault == "timeout":  # never forwarded: hold, then drop the connection
            self._discard_body()
            proxy._count(fault, plan)
            self._hold(plan)
            return
        try:
            response = self._forward()
        except (OSError, http.client.HTTPException) as exc:
            self._drop_upstream()
            self.close_connection = True  # the request body may be half read: this connection is spent
            self._error(502, "Bad Gateway", "ProxyUpstreamError", f"the proxy could not reach S3: {exc}")
            return
        try:
            if fault == "timeout_after":  # the server did it; the client never hears
                response.read()
                proxy._count(fault, plan)
                self._hold(plan)
                return
            self._relay(response, truncate=fault == "truncate", plan=plan)
        finally:
            if response.will_close or not response.isclosed():  # not reusable
                self._drop_upstream()

    def _request_headers(self) -> list[tuple[str, str]]:
        return [(k, v) for k, v in self.headers.raw_items() if k.lower() != "expect"]

    def _connection(self) -> http.client.HTTPConnection:
        conn = self._upstream
        if conn is not None and conn.sock is not None:
            readable, _, _ = select.select([conn.sock], [], [], 0)
            if readable:  # an idle kept-alive connection is readable only when the server closed it
                self._drop_upstream()
        if self._upstream is None:
            host, port = self.server.proxy.upstream
            self._upstream = http.client.HTTPConnection(
                host, port, timeout=self.server.proxy.upstream_timeout
            )
        return self._upstream

    def _drop_upstream(self) -> None:
        conn, self._upstream = getattr(self, "_upstream", None), None
        if conn is not None:
            conn.close()

    def _forward(self) -> http.client.HTTPResponse:
        """Sends the request upstream exactly as received (headers in order, body streamed)."""
        for attempt in (0, 1):  # a kept-alive upstream connection may have been closed by the server
            conn = self._connection()
            try:
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for k, v in self._request_headers():
                    conn.putheader(k, v)
                conn.endheaders()
                break
            except (BrokenPipeError, ConnectionResetError):
                self._drop_upstream()
                if attempt:
                    raise
        self._stream_body(conn.send)
        return conn.getresponse()

    def _stream_body(self, sink) -> None:
        """Copies the request body from the client to ``sink``: by Content-Length, or raw chunked framing."""
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    raise ConnectionResetError("client closed the connection in a chunked body")
                sink(line)
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while True:  # trailers, then the empty line
                        trailer = self.rfile.readline(65537)
                        if not trailer:
                            raise ConnectionResetError("client closed the connection in chunked trailers")
                        sink(trailer)
                        if trailer in (b"\r\n", b"\n"):
                            return
                self._copy_exact(size + 2, sink)  # data and its CRLF
        length = int(self.headers.get("Content-Length") or 0)
        self._copy_exact(length, sink)

    def _copy_exact(self, n: int, sink) -> None:
        while n > 0:
            data = self.rfile.read(min(n, _COPY_CHUNK))
            if not data:
                raise ConnectionResetError("client closed the connection in the request body")
            sink(data)
            n -= len(data)

    def _discard_body(self) -> None:
        self._stream_body(lambda _data: None)

    # ------------------------------------------------------------------------------------------ responses
    def _relay(self, response: http.client.HTTPResponse, truncate: bool, plan: _FaultPlan) -> None:
        """Sends the upstream answer to the client: status, headers as they came, body streamed."""
        headers = [(k, v) for k, v in response.getheaders()]
        has_body = self.command != "HEAD" and response.status not in _NO_BODY_STATUSES
        length = response.length  # None when chunked or read-until-close
        body: bytes | None = None
        if has_body and length is None:  # re-frame with a Content-Length
            body = response.read()
            length = len(body)
            headers = [(k, v) for k, v in headers if k.lower() not in ("transfer-encoding", "content-length")]
            headers.append(("Content-Length", str(length)))
        cut = has_body and truncate and (length or 0) >= 2
        out = [f"HTTP/1.1 {response.status} {response.reason}\r\n".encode("latin-1")]
        out += [f"{k}: {v}\r\n".encode("latin-1") for k, v in headers]
        out.append(b"\r\n")
        self.wfile.write(b"".join(out))
        if not has_body:
            response.read()  # b"": completes the exchange so the upstream connection can be reused
            self.wfile.flush()
            return
        remaining = length if not cut else length // 2
        if body is not None:
            self.wfile.write(body[:remaining])
        else:
            while remaining > 0:
                data = response.read(min(remaining, _COPY_CHUNK))
                if not data:
                    break
                self.wfile.write(data)
                remaining -= len(data)
        self.wfile.flush()
        if cut:
            self.server.proxy._count("truncate", plan)
            self._drop_upstream()  # the rest of the upstream body is not read: that connection is spent
            self._close_client()

    def _error(self, status: int, reason: str, code: str, message: str) -> None:
        request_id = f"PROXY{random.getrandbits(48):012X}"
        body = _s3_error(code, message, urllib.parse.urlsplit(self.path).path, request_id)
        head = (
            f"HTTP/1.1 {status} {reason}\r\n"
            "Content-Type: application/xml\r\n"
            f"Content-Length: {len(body)}\r\n"
            f"x-amz-request-id: {request_id}\r\n"
            + ("Retry-After: 1\r\n" if status == 503 else "")
            + ("Connection: close\r\n" if self.close_connection else "")
            + "\r\n"
        )
        try:
            self.wfile.write(head.encode("latin-1") + (b"" if self.command == "HEAD" else body))
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _hold(self, plan: _FaultPlan) -> None:
        self.server.proxy._stopping.wait(plan.hold_s)
        self._close_client()

    def _close_client(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

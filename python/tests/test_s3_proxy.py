"""``lineagestore.testing.s3_proxy.FaultyS3Proxy`` against the real MinIO of ``lineagestore.testing.s3``.

boto3 talks SigV4 to MinIO through the proxy. With faults off everything passes byte for byte (single PUT,
chunked ``aws-chunked`` uploads with trailing checksums, multipart, HEAD, ranged GET, listing, DELETE,
keep-alive); with each fault on, the client observes exactly that fault.
"""

from __future__ import annotations

import hashlib
import io
import os
import socket
import time

import pytest

boto3 = pytest.importorskip("boto3")
import botocore.exceptions  # noqa: E402
from botocore.config import Config  # noqa: E402

from lineagestore.testing.s3 import S3Server, S3ServerError, minio_binary  # noqa: E402
from lineagestore.testing.s3_proxy import FaultyS3Proxy  # noqa: E402


@pytest.fixture(scope="module")
def s3():
    try:
        minio_binary(build=False)
    except S3ServerError as exc:  # dev/test builds it for the integration suite; do not build it here
        pytest.skip(str(exc))
    with S3Server(backend="process") as server:
        yield server


@pytest.fixture
def proxy(s3):
    with FaultyS3Proxy(s3.endpoint, seed=1) as p:
        yield p


def _client(s3, endpoint: str, retries: int = 1, read_timeout: float = 30, checksums: str = "when_required"):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=s3.access_key,
        aws_secret_access_key=s3.secret_key,
        region_name=s3.region,
        config=Config(
            signature_version="s3v4",
            s3={"addressing_style": "path"},
            retries={"total_max_attempts": retries, "mode": "standard"},
            connect_timeout=5,
            read_timeout=read_timeout,
            request_checksum_calculation=checksums,
            response_checksum_validation="when_required",
        ),
    )


def _bucket(s3, name: str) -> str:
    return s3.bucket(f"{name}-{time.monotonic_ns()}")


def test_listens_on_loopback_only(proxy):
    assert proxy.endpoint.startswith("http://127.0.0.1:")
    assert proxy._server.socket.getsockname()[0] == "127.0.0.1"
    assert proxy._server.socket.family == socket.AF_INET


def test_passthrough_is_byte_exact(s3, proxy):
    direct = s3.boto3_client()
    bucket = _bucket(s3, "pass")
    # "when_supported": SDK checksums on, so PUT bodies go as aws-chunked with a CRC trailer
    c = _client(s3, proxy.endpoint, checksums="when_supported")
    small = os.urandom(1000)
    big = os.urandom(3 * 1024 * 1024 + 17)
    c.put_object(Bucket=bucket, Key="small", Body=small)
    c.put_object(Bucket=bucket, Key="empty", Body=b"")
    c.put_object(Bucket=bucket, Key="big", Body=io.BytesIO(big))  # a stream: chunked aws-chunked upload
    # multipart: two parts of 5 MiB + a tail
    data = os.urandom(10 * 1024 * 1024 + 5)
    mpu = c.create_multipart_upload(Bucket=bucket, Key="multi")
    parts = []
    for n, off in enumerate(range(0, len(data), 5 * 1024 * 1024), start=1):
        r = c.upload_part(
            Bucket=bucket,
            Key="multi",
            UploadId=mpu["UploadId"],
            PartNumber=n,
            Body=data[off : off + (5 << 20)],
        )
        parts.append({"PartNumber": n, "ETag": r["ETag"]})
    c.complete_multipart_upload(
        Bucket=bucket, Key="multi", UploadId=mpu["UploadId"], MultipartUpload={"Parts": parts}
    )
    for key, body in [("small", small), ("empty", b""), ("big", big), ("multi", data)]:
        assert direct.get_object(Bucket=bucket, Key=key)["Body"].read() == body, key
        got = c.get_object(Bucket=bucket, Key=key)
        assert hashlib.sha256(got["Body"].read()).digest() == hashlib.sha256(body).digest(), key
        assert c.head_object(Bucket=bucket, Key=key)["ContentLength"] == len(body)
    assert c.get_object(Bucket=bucket, Key="big", Range="bytes=10-19")["Body"].read() == big[10:20]
    listed = sorted(o["Key"] for o in c.list_objects_v2(Bucket=bucket)["Contents"])
    assert listed == ["big", "empty", "multi", "small"]
    c.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "empty"}, {"Key": "small"}]})
    c.delete_object(Bucket=bucket, Key="big")
    assert [o["Key"] for o in direct.list_objects_v2(Bucket=bucket)["Contents"]] == ["multi"]
    with pytest.raises(botocore.exceptions.ClientError) as err:  # the server's own errors pass through
        c.head_object(Bucket=bucket, Key="nope")
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    counts = proxy.counts
    assert sum(counts["faults"].values()) == 0
    assert (
        counts["requests"]["PUT"] >= 5 and counts["requests"]["GET"] >= 6 and counts["requests"]["HEAD"] >= 5
    )


def test_http_chunked_request_body_passes_through(s3, proxy):
    """A PUT whose body comes with Transfer-Encoding: chunked is forwarded whole, framing included: the
    client gets the server's own answer (S3 and MinIO want a Content-Length on PUT: 411), as it does
    without the proxy, and the kept-alive connection then serves the next request."""
    import http.client
    import urllib.parse

    bucket = _bucket(s3, "chunked")
    body = os.urandom(200_000)
    answers = []
    for endpoint in (s3.endpoint, proxy.endpoint):
        url = _client(s3, endpoint).generate_presigned_url(
            "put_object", Params={"Bucket": bucket, "Key": "k"}, ExpiresIn=60
        )
        parts = urllib.parse.urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        chunks = (body[i : i + 7000] for i in range(0, len(body), 7000))
        conn.request("PUT", f"{parts.path}?{parts.query}", body=chunks, encode_chunked=True)
        resp = conn.getresponse()
        answers.append((resp.status, b"<Code>MissingContentLength</Code>" in resp.read()))
        conn.request("GET", "/minio/health/live")  # same connection
        assert conn.getresponse().status == 200
        conn.close()
    assert answers[0] == answers[1] == (411, True)


def test_keep_alive_reuses_the_client_connection(s3, proxy):
    bucket = _bucket(s3, "ka")
    c = _client(s3, proxy.endpoint)
    for i in range(20):
        c.put_object(Bucket=bucket, Key=f"k{i}", Body=b"x" * i)
        assert c.get_object(Bucket=bucket, Key=f"k{i}")["Body"].read() == b"x" * i
    assert len(proxy._server._conns) <= 2  # one pooled connection (plus one being closed at most)


def test_error_5xx_and_throttle_are_seen_by_the_client(s3, proxy):
    bucket = _bucket(s3, "err")
    c = _client(s3, proxy.endpoint)  # no retries: every fault reaches the caller
    proxy.set_faults(error_5xx=1.0)
    with pytest.raises(botocore.exceptions.ClientError) as err:
        c.put_object(Bucket=bucket, Key="k", Body=b"data")
    assert err.value.response["Error"]["Code"] == "InternalError"
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    proxy.set_faults(throttle=1.0, methods={"GET"})
    c.put_object(Bucket=bucket, Key="k", Body=b"data")  # PUT not selected: goes through
    with pytest.raises(botocore.exceptions.ClientError) as err:
        c.get_object(Bucket=bucket, Key="k")
    assert err.value.response["Error"]["Code"] == "SlowDown"
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    proxy.clear()
    assert c.get_object(Bucket=bucket, Key="k")["Body"].read() == b"data"
    assert proxy.counts["faults"]["error_5xx"] == 1 and proxy.counts["faults"]["throttle"] == 1
    # the failed PUT never reached the server
    assert "Contents" not in s3.boto3_client().list_objects_v2(Bucket=bucket, Prefix="x")


def test_retrying_client_gets_through_a_fault_rate(s3, proxy):
    bucket = _bucket(s3, "retry")
    c = _client(s3, proxy.endpoint, retries=10)
    proxy.set_faults(error_5xx=0.2, throttle=0.2)
    for i in range(30):
        c.put_object(Bucket=bucket, Key=f"k{i}", Body=str(i).encode())
        assert c.get_object(Bucket=bucket, Key=f"k{i}")["Body"].read() == str(i).encode()
    faults = proxy.counts["faults"]
    assert faults["error_5xx"] > 0 and faults["throttle"] > 0


def test_timeout_before_and_after_the_server(s3, proxy):
    bucket = _bucket(s3, "to")
    direct = s3.boto3_client()
    c = _client(s3, proxy.endpoint, read_timeout=1)
    proxy.set_faults(timeout=1.0, timeout_mode="before", hold_s=5)
    t0 = time.monotonic()
    with pytest.raises(botocore.exceptions.ReadTimeoutError):
        c.put_object(Bucket=bucket, Key="before", Body=b"1")
    assert time.monotonic() - t0 < 4
    proxy.set_faults(timeout=1.0, timeout_mode="after", hold_s=5)
    with pytest.raises(botocore.exceptions.ReadTimeoutError):
        c.put_object(Bucket=bucket, Key="after", Body=b"2")
    proxy.clear()
    keys = [o["Key"] for o in direct.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert keys == ["after"], "'after' reached the server with its answer lost; 'before' never did"
    assert proxy.counts["faults"]["timeout"] == 2 and proxy.counts["faults"]["timeout_after"] == 1


def test_truncate_cuts_the_body_after_the_content_length(s3, proxy):
    bucket = _bucket(s3, "trunc")
    c = _client(s3, proxy.endpoint)
    body = os.urandom(100_000)
    c.put_object(Bucket=bucket, Key="k", Body=body)
    proxy.set_faults(truncate=1.0)
    resp = c.get_object(Bucket=bucket, Key="k")
    assert resp["ContentLength"] == len(body)
    with pytest.raises((botocore.exceptions.IncompleteReadError, botocore.exceptions.ResponseStreamingError)):
        resp["Body"].read()
    c.head_object(Bucket=bucket, Key="k")  # no body: nothing to cut, not counted
    proxy.clear()
    assert c.get_object(Bucket=bucket, Key="k")["Body"].read() == body
    assert proxy.counts["faults"]["truncate"] == 1


def test_path_pattern_limit_and_delay(s3, proxy):
    bucket = _bucket(s3, "sel")
    c = _client(s3, proxy.endpoint)
    c.put_object(Bucket=bucket, Key="a.zip", Body=b"z")
    c.put_object(Bucket=bucket, Key="a.delta", Body=b"d")
    proxy.set_faults(error_5xx=1.0, path_pattern=r"\.zip", limit=1)
    assert c.get_object(Bucket=bucket, Key="a.delta")["Body"].read() == b"d"
    with pytest.raises(botocore.exceptions.ClientError):
        c.get_object(Bucket=bucket, Key="a.zip")
    assert c.get_object(Bucket=bucket, Key="a.zip")["Body"].read() == b"z"  # limit reached
    proxy.set_faults(delay_ms=300)
    t0 = time.monotonic()
    c.get_object(Bucket=bucket, Key="a.delta")
    assert time.monotonic() - t0 >= 0.3
    assert proxy.counts["faults"]["error_5xx"] == 1


def test_same_seed_same_faults(s3):
    bucket = _bucket(s3, "seed")
    outcomes = []
    for _ in range(2):
        with FaultyS3Proxy(s3.endpoint, seed=42) as p:
            c = _client(s3, p.endpoint)
            p.set_faults(error_5xx=0.3, throttle=0.3)
            seen = []
            for i in range(20):
                try:
                    c.put_object(Bucket=bucket, Key=f"k{i}", Body=b"x")
                    seen.append("ok")
                except botocore.exceptions.ClientError as e:
                    seen.append(e.response["Error"]["Code"])
            outcomes.append(seen)
    assert outcomes[0] == outcomes[1] and len(set(outcomes[0])) == 3


def test_stop_releases_held_connections(s3):
    p = FaultyS3Proxy(s3.endpoint).start()
    c = _client(s3, p.endpoint, read_timeout=30)
    p.set_faults(timeout=1.0, timeout_mode="before", hold_s=60)
    import threading

    errors = []
    t = threading.Thread(target=lambda: errors.append(_try(lambda: c.list_buckets())))
    t.start()
    time.sleep(0.5)
    t0 = time.monotonic()
    p.stop()
    t.join(10)
    assert not t.is_alive() and time.monotonic() - t0 < 10 and errors[0] is not None


def _try(fn):
    try:
        fn()
    except Exception as exc:  # the client's view of the fault
        return exc
    return None


def test_stopped_proxy_is_unreachable_and_restarts_on_the_same_port(s3):
    p = FaultyS3Proxy(s3.endpoint).start()
    endpoint = p.endpoint
    c = _client(s3, endpoint)
    c.list_buckets()
    p.stop()
    assert not p.running and p.endpoint == endpoint
    with pytest.raises(botocore.exceptions.EndpointConnectionError):
        c.list_buckets()
    p.start()
    try:
        assert p.endpoint == endpoint
        c.list_buckets()
    finally:
        p.stop()

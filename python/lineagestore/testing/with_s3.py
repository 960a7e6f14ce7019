"""Runs a command with a real S3 server up: the JVM suites' way to a server started by the test harness.

    python -m lineagestore.testing.with_s3 COMMAND [ARGS...]     # e.g. sbt "core/test"

Starts ``S3Server`` (MinIO, as for the Python suites; built first if needed), creates one bucket, fetches
the s3a jars if needed (``lineagestore-testing prepare-s3`` does both ahead of time), runs the command with

* ``LINEAGESTORE_TEST_S3``: a properties file (mode 0600, deleted afterwards) with ``bucket=<name>`` and one
  ``hadoop.<key>=<value>`` line per s3a setting of ``S3Server.hadoop_conf(bucket)``, the credentials
  included;
* ``LINEAGESTORE_S3A_JARS``: hadoop-aws, the AWS SDK bundle and the analytics accelerator, joined with
  ``os.pathsep`` (build.sbt puts them on the test class path),

then stops the server and exits with the command's exit status. Suites that need the server read the file
(``io.lineagestore.testing.S3TestServer`` in the Scala tests). Start-up failures exit with 3 and say why.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from lineagestore.testing.s3 import S3Server, S3ServerError, s3a_jars

START_FAILED = 3


def properties(bucket: str, hadoop_conf: dict[str, str]) -> str:
    lines = [f"bucket={bucket}"] + [f"hadoop.{k}={v}" for k, v in sorted(hadoop_conf.items())]
    for line in lines:
        if "\\" in line or "\n" in line:
            raise S3ServerError("an s3a setting holds a backslash or a newline; the properties file cannot")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    command = list(sys.argv[1:] if argv is None else argv)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        jars = s3a_jars()
        server = S3Server().start()
    except S3ServerError as exc:
        print(f"lineagestore.testing.with_s3: no S3 server: {exc}", file=sys.stderr)
        return START_FAILED
    try:
        bucket = server.bucket(f"jvm-{uuid.uuid4().hex[:12]}")
        with tempfile.TemporaryDirectory(prefix="lineagestore-with-s3-") as tmp:
            info = Path(tmp) / "s3.properties"
            fd = os.open(info, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(properties(bucket, server.hadoop_conf(bucket)))
            env = {
                **os.environ,
                "LINEAGESTORE_TEST_S3": str(info),
                "LINEAGESTORE_S3A_JARS": os.pathsep.join(jars),
            }
            print(f"lineagestore.testing.with_s3: {server!r}, bucket {bucket}", file=sys.stderr)
            return subprocess.run(command, env=env).returncode
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())

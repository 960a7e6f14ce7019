"""LineageOptions (generated from the JVM declarations), configure() and the Spark version check."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tomllib
import zipfile
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import lineagestore
from lineagestore import LineageOptions
from lineagestore._options_generated import PREFIX, SPECS
from lineagestore._options_support import nearest_key
from lineagestore._session import provided_jar

ROOT = Path(__file__).resolve().parents[2]

# (field, value, accepted) probes of every kind's rules; the JVM must agree on each (test below).
PROBES = [
    ("max_pending_bytes", "64m", True),
    ("max_pending_bytes", " 2 G ", True),
    ("max_pending_bytes", "1048576", True),
    ("max_pending_bytes", "1048575", False),
    ("max_pending_bytes", "1mb", True),  # Spark's byte forms (issue 49)
    ("max_pending_bytes", "256MB", True),
    ("max_pending_bytes", "1gb", True),
    ("max_pending_bytes", "1048576b", True),
    ("max_pending_bytes", "1gib", False),
    ("max_pending_bytes", "1.5g", False),
    ("max_pending_bytes", "9999999999g", False),
    ("max_pending_bytes", "k", False),
    ("transfer_threads", "+4", True),
    ("transfer_threads", "0", False),
    ("transfer_threads", "257", False),
    ("transfer_threads", "4k", False),
    ("transfer_threads", "lots", False),
    ("orphan_grace_period_ms", "0", True),
    ("orphan_grace_period_ms", "-1", False),
    ("orphan_grace_period_ms", "5k", False),
    ("orphan_grace_period_ms", "6h", True),  # Spark's time forms (issue 49)
    ("local_retention_ms", "5min", True),
    ("local_retention_ms", "5m", True),
    ("close_upload_timeout_ms", "30s", True),
    ("close_upload_timeout_ms", "30sec", False),
    ("close_upload_timeout_ms", "1.5s", False),
    ("close_upload_timeout_ms", "-1s", False),
    ("orphan_sweep_every_cleanups", "2147483647", True),
    ("orphan_sweep_every_cleanups", "2147483648", False),
    ("memory_bytes", "8m", True),
    ("memory_bytes", "7m", False),
    ("local_dir", "/tmp/x", True),
]


def test_one_field_per_declared_key_with_its_default():
    fields = {f.name: f.default for f in dataclasses.fields(LineageOptions)}
    assert fields == {s.field: s.default for s in SPECS}
    assert LineageOptions().to_spark_conf() == {}
    assert set(LineageOptions().to_spark_conf(include_defaults=True)) == {PREFIX + s.name for s in SPECS}
    source = Path(lineagestore._options_generated.__file__).read_text()
    for spec in SPECS:  # each field carries a docstring naming its full key
        assert f"``{PREFIX}{spec.name}``" in " ".join(source.split())


def test_sizes_take_suffixes_and_are_stored_as_bytes():
    opts = LineageOptions(max_pending_bytes="64m", write_buffer_bytes=" 128 K", memory_bytes="1G")
    assert (opts.max_pending_bytes, opts.write_buffer_bytes, opts.memory_bytes) == (
        64 << 20,
        128 << 10,
        1 << 30,
    )
    assert opts.to_spark_conf()[PREFIX + "maxPendingBytes"] == str(64 << 20)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.transfer_threads = 3  # type: ignore[misc]


def test_sizes_and_durations_take_sparks_forms():
    opts = LineageOptions(
        max_pending_bytes="256mb",
        memory_bytes="1gb",
        orphan_grace_period_ms="6h",
        local_retention_ms="5min",
        close_upload_timeout_ms="2500us",
    )
    assert (opts.max_pending_bytes, opts.memory_bytes) == (256 << 20, 1 << 30)
    assert (opts.orphan_grace_period_ms, opts.local_retention_ms, opts.close_upload_timeout_ms) == (
        6 * 3_600_000,
        300_000,
        2,  # microseconds are truncated, as Spark's timeStringAsMs does
    )
    assert LineageOptions(local_retention_ms="1500").local_retention_ms == 1500  # a bare number is ms


# (misspelt key name, the known name it is nearest to, or None): the JVM must suggest the same (test below)
TYPOS = [("maxPendingByte", "maxPendingBytes"), ("TRANSFERTHREAD", "transferThreads"), ("zzzzzzzzzzzz", None)]


def test_configure_checks_raw_keys_the_builder_holds():
    typo = PREFIX + "maxPendingByte"
    with pytest.raises(ValueError) as err:
        lineagestore.configure(SparkSession.Builder().config(typo, "256m"))
    message = str(err.value)
    assert f"unknown configuration key {typo}." in message
    assert f"Did you mean {PREFIX}maxPendingBytes?" in message
    with pytest.raises(ValueError, match=re.escape(PREFIX + "transferThreads")):
        lineagestore.configure(SparkSession.Builder().config(PREFIX + "transferThreads", "0"))
    built = lineagestore.configure(SparkSession.Builder().config(PREFIX + "maxPendingBytes", "256mb"))
    assert built._options[PREFIX + "maxPendingBytes"] == "256mb"  # Spark's form, accepted as the JVM does


@pytest.mark.parametrize("field,value,accepted", PROBES)
def test_probe(field, value, accepted):
    if accepted:
        LineageOptions(**{field: value})
        return
    spec = next(s for s in SPECS if s.field == field)
    with pytest.raises(ValueError) as err:
        LineageOptions(**{field: value})
    message = str(err.value)
    assert PREFIX + spec.name in message and repr(value) in message and spec.allowed in message


def test_non_numbers_are_rejected_for_numbers():
    for bad in (True, 1.5, None, [1]):
        with pytest.raises(ValueError, match="transferThreads"):
            LineageOptions(transfer_threads=bad)
    with pytest.raises(ValueError, match="localDir"):
        LineageOptions(local_dir=3)
    assert LineageOptions(local_dir=Path("/tmp/x")).local_dir == "/tmp/x"


def test_configure_takes_options_or_keywords():
    builder = lineagestore.configure(
        SparkSession.Builder(), LineageOptions(transfer_threads=4), max_pending_bytes="2m", localDir="/d"
    )
    opts = builder._options
    assert opts["spark.sql.streaming.stateStore.providerClass"] == lineagestore.PROVIDER_CLASS
    assert opts["spark.sql.streaming.stateStore.checkpointFormatVersion"] == "2"
    assert opts[PREFIX + "transferThreads"] == "4"
    assert opts[PREFIX + "maxPendingBytes"] == str(2 << 20)
    assert opts[PREFIX + "localDir"] == "/d"


def test_unknown_keyword_lists_known_names_and_bad_values_fail_early():
    with pytest.raises(TypeError) as err:
        lineagestore.configure(SparkSession.Builder(), maxPendingByte="1m")
    assert "maxPendingByte" in str(err.value) and "max_pending_bytes (maxPendingBytes)" in str(err.value)
    with pytest.raises(ValueError, match=re.escape(PREFIX + "transferThreads")):
        lineagestore.configure(SparkSession.Builder(), transfer_threads=0)
    with pytest.raises(TypeError, match="LineageOptions"):
        lineagestore.configure(SparkSession.Builder(), {"transfer_threads": 2})


def test_spark_version_recorded_once_and_checked():
    build = (ROOT / "build.sbt").read_text()
    assert f'val sparkVersion = "{lineagestore.SPARK_VERSION}"' in build
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"pyspark=={lineagestore.SPARK_VERSION}" in deps
    assert f"SPARK_VERSION={lineagestore.SPARK_VERSION}\n" in (ROOT / "dev" / "sbt").read_text()
    lineagestore.check_spark_version()  # the installed pyspark is the right one
    with pytest.raises(lineagestore.SparkVersionMismatch) as err:
        lineagestore.check_spark_version("4.2.1")
    assert f"pip install 'pyspark=={lineagestore.SPARK_VERSION}'" in str(err.value)


def test_bundled_jar_is_skipped_when_the_session_already_gets_lineagestore(monkeypatch):
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    Builder = SparkSession.Builder

    b = Builder().config("spark.jars.packages", "io.lineagestore:lineagestore-spark_2.13:0.1.0")
    assert provided_jar(b) == "io.lineagestore:lineagestore-spark_2.13:0.1.0"
    out = lineagestore.configure(b)
    assert "spark.jars" not in out._options
    b2 = Builder()
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--jars /opt/lineagestore-spark_2.13-0.1.0.jar pyspark-shell")
    assert provided_jar(b2) == "/opt/lineagestore-spark_2.13-0.1.0.jar"
    # what spark-submit --packages leaves in spark.jars: the jar Ivy retrieved, <organization>_<artifact>-<v>
    retrieved = "file:/home/u/.ivy2.5.2/jars/io.lineagestore_lineagestore-spark_2.13-0.1.0.jar"
    assert provided_jar(Builder().config("spark.jars", f"/x/other.jar,{retrieved}")) == retrieved
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")
    assert provided_jar(Builder()) is None
    assert (
        provided_jar(Builder().config("spark.jars", "/x/org.example_not-lineagestore-spark_2.13-1.jar"))
        is None
    )
    assert lineagestore.configure(Builder())._options["spark.jars"] == lineagestore.jar_path()
    assert "spark.jars" not in lineagestore.configure(Builder(), use_bundled_jar=False)._options


def test_jvm_agrees_with_every_probe():
    """The Python rules mirror the JVM's: both accept or both reject each probe (py4j, the real jar)."""
    from pyspark import SparkConf
    from pyspark.java_gateway import launch_gateway

    conf = SparkConf(loadDefaults=False).set("spark.driver.extraClassPath", lineagestore.jar_path())
    gateway = launch_gateway(conf)
    try:
        check = gateway.jvm.io.lineagestore.config.LineageConf.problemOf
        for field, value, accepted in PROBES:
            spec = next(s for s in SPECS if s.field == field)
            problem = check(PREFIX + spec.name, value)
            assert (problem is None) == accepted, f"{field}={value!r}: the JVM says {problem!r}"
        nearest = gateway.jvm.io.lineagestore.config.LineageConf.nearestKey
        for name, near in TYPOS:
            jvm = nearest(PREFIX + name)
            assert (jvm.get() if jvm.isDefined() else None) == (near and PREFIX + near), name
            assert nearest_key(PREFIX + name, SPECS, PREFIX) == (near and PREFIX + near), name
    finally:
        gateway.shutdown()


_SUBMITTED = """
import json, sys
from pyspark.sql import SparkSession
import lineagestore
builder = lineagestore.configure(SparkSession.builder)
print("RESULT " + json.dumps(builder._options.get("spark.jars")))
"""


@pytest.mark.parametrize("with_jar", [True, False])
def test_under_spark_submit_the_jvm_settings_are_seen(tmp_path, with_jar):
    """spark-submit starts the JVM first: configure() reads its --jars instead of adding the bundled jar."""
    import shutil
    import subprocess
    import sys

    script = tmp_path / "app.py"
    script.write_text(_SUBMITTED)
    other = tmp_path / "other.jar"
    shutil.copy(lineagestore.jar_path(), other)  # any jar
    jars = [str(other)]
    if with_jar:
        own = tmp_path / "mine" / Path(lineagestore.jar_path()).name
        own.parent.mkdir()
        shutil.copy(lineagestore.jar_path(), own)
        jars.append(str(own))
    submit = Path(sys.executable).parent / "spark-submit"
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT")}
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    proc = subprocess.run(
        [str(submit), "--master", "local[1]", "--jars", ",".join(jars), str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[7:])
    if with_jar:
        assert result is None  # the session already has a lineagestore jar: nothing added
    else:  # the bundled jar is added, and spark-submit's --jars are kept
        assert result.split(",")[-1] == lineagestore.jar_path() and str(other) in result


def test_a_provided_jar_for_another_spark_is_refused(tmp_path):
    jar = tmp_path / "lineagestore-spark_2.13-0.0.9.jar"
    with zipfile.ZipFile(jar, "w") as z:
        z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nLineagestore-Spark-Version: 4.2.0\n")
    builder = SparkSession.Builder().config("spark.jars", str(jar))
    with pytest.raises(lineagestore.SparkVersionMismatch, match="built for Spark 4.2.0"):
        lineagestore.configure(builder)

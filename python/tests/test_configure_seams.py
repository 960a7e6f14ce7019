"""Where configure() meets a session set up otherwise: a JVM already running, a format version set before,
an unknown LineageOptions field. Each case used to pass silently and fail (or run wrongly) much later."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import pytest
from pyspark.sql import SparkSession

import lineagestore
from lineagestore import LineageOptions

FORMAT_KEY = "spark.sql.streaming.stateStore.checkpointFormatVersion"


def test_format_version_1_set_before_configure_is_refused():
    builder = SparkSession.Builder().config(FORMAT_KEY, "1")
    with pytest.raises(ValueError, match=f"{FORMAT_KEY}=1 is set on the builder.*version 2"):
        lineagestore.configure(builder)


def test_other_format_version_set_before_configure_is_replaced_with_a_warning_naming_it():
    builder = SparkSession.Builder().config(FORMAT_KEY, "3")
    with pytest.warns(UserWarning, match=f"replaces {FORMAT_KEY}='3'.*with 2"):
        lineagestore.configure(builder)
    assert builder._options[FORMAT_KEY] == "2"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 2 already, or not set: nothing to say
        lineagestore.configure(SparkSession.Builder().config(FORMAT_KEY, "2"))
        lineagestore.configure(SparkSession.Builder())


def test_lineage_options_unknown_field_lists_the_known_options():
    with pytest.raises(TypeError) as err:
        LineageOptions(max_pending_byte="1m")
    text = str(err.value)
    assert "unknown lineagestore option(s) max_pending_byte" in text
    assert "max_pending_bytes (maxPendingBytes)" in text and "transfer_threads (transferThreads)" in text
    assert LineageOptions(transfer_threads=2).transfer_threads == 2  # known fields still work


def test_configure_after_a_jvm_without_the_jar_says_what_to_do():
    # A fresh process, so this test's JVM (or its absence) is not the suite's. The gateway JVM PySpark
    # starts for a first SparkSession is what configure must detect; starting it alone is the cheapest way.
    script = textwrap.dedent(
        """
        from pyspark import SparkContext
        from pyspark.sql import SparkSession
        import lineagestore
        SparkContext._ensure_initialized()  # as a SparkSession created before configure does
        try:
            lineagestore.configure(SparkSession.builder)
        except lineagestore.SparkAlreadyStarted as e:
            print("REFUSED:", e)
        else:
            print("ACCEPTED")
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_GATEWAY_PORT", "PYSPARK_SUBMIT_ARGS")}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env
    ).stdout
    assert "REFUSED:" in out, out
    assert lineagestore.PROVIDER_CLASS in out
    assert "before the first getOrCreate()" in out and f"--jars {lineagestore.jar_path()}" in out

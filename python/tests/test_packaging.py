"""The installed package: version from VERSION, the bundled jar, the CLI and configure()."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import lineagestore
from lineagestore.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_version_comes_from_the_version_file():
    assert lineagestore.__version__ == (ROOT / "VERSION").read_text().strip()


def test_bundled_jar_carries_core_and_spark_classes():
    jar = Path(lineagestore.jar_path())
    assert jar.name == f"lineagestore-spark_2.13-{lineagestore.__version__}.jar"
    with zipfile.ZipFile(jar) as z:
        names = z.namelist()
    assert any(n.startswith("io/lineagestore/spark/") for n in names)
    assert any(n.startswith("io/lineagestore/") and not n.startswith("io/lineagestore/spark/") for n in names)


def test_cli_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"lineagestore {lineagestore.__version__}"


def test_console_script_installed():
    out = subprocess.run(
        [str(Path(sys.executable).parent / "lineagestore"), "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert lineagestore.__version__ in out.stdout


class _Builder:
    def __init__(self):
        self._options = {"spark.jars": "/other.jar"}

    def config(self, key, value):
        self._options[key] = value
        return self


def test_configure_sets_provider_jar_and_settings():
    b = lineagestore.configure(_Builder(), transferThreads=4)
    assert b._options["spark.sql.streaming.stateStore.providerClass"] == lineagestore.PROVIDER_CLASS
    assert b._options["spark.sql.streaming.stateStore.checkpointFormatVersion"] == "2"
    assert b._options["spark.jars"] == f"/other.jar,{lineagestore.jar_path()}"
    assert b._options["spark.sql.streaming.stateStore.lineagestore.transferThreads"] == "4"


def test_provider_class_loads_in_spark():
    from pyspark.sql import SparkSession

    spark = (
        lineagestore.configure(SparkSession.builder.master("local[1]"))
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    try:
        jvm = spark.sparkContext._jvm
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        cls = jvm.java.lang.Class.forName(lineagestore.PROVIDER_CLASS, True, loader)
        assert cls.getName() == lineagestore.PROVIDER_CLASS
    finally:
        spark.stop()

"""What a benchmark run runs on: the lineagestore jar, Spark's jars, the bench's Java classes compiled against
them (the counting filesystem, realtime_bench.py's source and sink), and the machine and versions each run
records (``run.py``, ``repartition_bench.py``, ``realtime_bench.py``)."""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def find_jar() -> Path:
    try:
        from lineagestore.jvm.jar import jar_path

        path = Path(jar_path())
        if path.is_file():
            return path
    except Exception:
        pass
    env = os.environ.get("LINEAGESTORE_JAR")
    if env and Path(env).is_file():
        return Path(env)
    jars = sorted(
        (REPO / "jvm/spark/target/scala-2.13").glob("lineagestore-spark_2.13-*.jar"), key=os.path.getmtime
    )
    jars = [j for j in jars if not j.name.endswith(("-sources.jar", "-javadoc.jar", "-tests.jar"))]
    if not jars:
        raise SystemExit(
            "no lineagestore jar: run dev/test (or dev/sbt spark/package) or set LINEAGESTORE_JAR"
        )
    return jars[-1]


def spark_jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def compile_counting_fs(dest: Path) -> Path:
    """Compiles CountingFileSystem.java against Spark's Hadoop client jar into ``dest``."""
    javac = shutil.which("javac")
    if not javac:
        raise SystemExit("javac (a JDK 17) is needed for the counting filesystem of --store local")
    hadoop = sorted(spark_jars_dir().glob("hadoop-client-api-*.jar"))
    if not hadoop:
        raise SystemExit(f"no hadoop-client-api jar in {spark_jars_dir()}")
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [javac, "-nowarn", "--release", "17", "-cp", str(hadoop[-1]), "-d", str(dest)]
    subprocess.run([*cmd, str(HERE / "CountingFileSystem.java")], check=True)
    return dest


def compile_realtime_latency(dest: Path, jar: Path) -> Path:
    """Compiles RealTimeLatency.java (realtime_bench.py's source, producer and sink) against Spark's jars and
    the lineagestore jar into ``dest``."""
    javac = shutil.which("javac")
    if not javac:
        raise SystemExit("javac (a JDK 17) is needed for realtime_bench.py's RealTimeLatency.java")
    dest.mkdir(parents=True, exist_ok=True)
    class_path = os.pathsep.join([str(spark_jars_dir() / "*"), str(jar)])
    cmd = [javac, "-nowarn", "--release", "17", "-cp", class_path, "-d", str(dest)]
    subprocess.run([*cmd, str(HERE / "RealTimeLatency.java")], check=True)
    return dest


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "loadavg_start": os.getloadavg(),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["memory_bytes"] = int(line.split()[1]) * 1024
    except OSError:
        pass
    return info


def versions(jar: Path) -> dict[str, Any]:
    import pyspark

    out: dict[str, Any] = {
        "pyspark": pyspark.__version__,
        "lineagestore_jar": jar.name,
        "jar_sha256": sha256(jar),
    }
    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
        out["java"] = java[0] if java else "?"
    except OSError:
        out["java"] = "?"
    jars = spark_jars_dir()
    for prefix in ("hadoop-client-api", "rocksdbjni", "spark-sql_2.13"):
        found = sorted(jars.glob(f"{prefix}-*.jar"))
        if found:
            out[prefix] = found[-1].name.removeprefix(prefix + "-").removesuffix(".jar")
    try:
        git = ["git", "-C", str(REPO)]
        out["git_head"] = subprocess.run(
            [*git, "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        # the jar's own sources: an edit to a test suite does not change what a benchmark measures (a
        # pathspec with a wildcard matches whole paths, not a directory's contents: hence the trailing *)
        jar_sources = ["jvm/*/src/main/*", "build.sbt", "project"]
        dirty = subprocess.run(
            [*git, "status", "--porcelain", "--", *jar_sources], capture_output=True, text=True
        )
        out["jvm_sources_dirty"] = bool(dirty.stdout.strip())
    except OSError:
        pass
    return out

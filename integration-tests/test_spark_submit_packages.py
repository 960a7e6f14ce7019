"""``spark-submit --packages io.lineagestore:lineagestore-spark_2.13:<version>`` works.

sbt publishes the artifact into a Maven repository in a temporary directory (``spark/publish`` with
``-Dlineagestore.publishTo=<dir>``, see build.sbt; nothing goes to ``~/.m2``), and ``spark-submit`` runs a
small stateful query (``packages_app.py``) with ``--packages <artifact> --repositories file://<dir>`` and
its Ivy directory in the temporary directory too. Spark's Ivy resolves the artifact and its POM's
dependencies: the POM lists only scala-library (which Spark excludes itself) and test-scoped scalatest, no
Spark (compiled against as unmanaged jars) and no lineagestore-core (its classes are inside the jar), so
nothing is fetched; Ivy asks Maven Central (and the unreachable spark-packages repository) for the artifact
before it finds it in the file repository, nothing else.

Cost (budget 60 s): one sbt start plus packaging for the publish, without the scaladoc jar
(``-Dlineagestore.publishDocs=false``: it would add about 20 s and proves nothing here), and one spark-submit
run. Measured on our shared 2-core machine: 47 s in all (publish 15 s, spark-submit 31 s) at a load of 5;
about 100 s when other builds saturate both cores. Skipped without ``dev/sbt`` (an installed package).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lineagestore import PROVIDER_CLASS

REPO_ROOT = Path(__file__).resolve().parent.parent
SBT = REPO_ROOT / "dev" / "sbt"
ARTIFACT = "io.lineagestore:lineagestore-spark_2.13"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """(repository dir, version, published jar): ``dev/sbt spark/publish`` into a temporary directory."""
    if not SBT.is_file():
        pytest.skip("needs the source checkout's dev/sbt to publish the artifact")
    version = (REPO_ROOT / "VERSION").read_text().strip()
    repo = tmp_path_factory.mktemp("maven-repo")
    opts = f"-Dlineagestore.publishTo={repo} -Dlineagestore.publishDocs=false"
    env = {**os.environ, "SBT_OPTS": f"{os.environ.get('SBT_OPTS', '')} {opts}".strip()}
    start = time.monotonic()
    out = subprocess.run(
        [str(SBT), "spark/publish"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-4000:]
    print(f"sbt spark/publish: {time.monotonic() - start:.0f}s", file=sys.stderr)
    base = repo / "io" / "lineagestore" / "lineagestore-spark_2.13" / version
    jar = base / f"lineagestore-spark_2.13-{version}.jar"
    assert jar.is_file() and (base / f"lineagestore-spark_2.13-{version}.pom").is_file(), sorted(
        p.name for p in base.iterdir()
    )
    return repo, version, jar


def test_the_published_pom_drags_in_nothing(published):
    repo, version, jar = published
    pom = (jar.parent / f"lineagestore-spark_2.13-{version}.pom").read_text()
    deps = re.findall(r"<dependency>(.*?)</dependency>", pom, re.S)
    found = {
        (
            re.search(r"<artifactId>(.*?)</artifactId>", d).group(1),
            (re.search(r"<scope>(.*?)</scope>", d) or [None, "compile"])[1],
        )
        for d in deps
    }
    # scala-library: Spark's Ivy excludes *:scala-library:* itself; scalatest: test scope, never resolved
    assert found == {("scala-library", "compile"), ("scalatest_2.13", "test")}, pom
    assert "spark" not in pom.replace("lineagestore-spark", "")  # no Spark artifact, in any scope
    assert "lineagestore-core" not in pom


def test_spark_submit_packages_runs_a_stateful_query(published, tmp_path):
    repo, version, jar = published
    ivy = tmp_path / "ivy"
    work = tmp_path / "work"
    spark_submit = Path(sys.executable).parent / "spark-submit"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")
    }
    env.update(
        PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1"
    )
    start = time.monotonic()
    out = subprocess.run(
        [
            str(spark_submit),
            "--master",
            "local[2]",
            "--packages",
            f"{ARTIFACT}:{version}",
            "--repositories",
            repo.as_uri(),
            "--conf",
            f"spark.jars.ivy={ivy}",  # Ivy's cache and retrieved jars: here, not ~/.ivy2.5.2
            "--conf",
            "spark.ui.enabled=false",
            str(Path(__file__).with_name("packages_app.py")),
            str(work),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    print(f"spark-submit: {time.monotonic() - start:.0f}s", file=sys.stderr)
    assert out.returncode == 0, out.stderr[-6000:]
    assert f"found {ARTIFACT.replace(':', '#')};{version} in repo-1" in out.stderr, out.stderr[-6000:]
    result = json.loads(next(line[7:] for line in out.stdout.splitlines() if line.startswith("RESULT ")))

    # the provider came from the jar Ivy retrieved from the file repository, byte for byte the published one
    retrieved = ivy / "jars" / f"io.lineagestore_lineagestore-spark_2.13-{version}.jar"
    assert Path(result["providerLocation"].removeprefix("file:")) == retrieved, result
    assert _sha256(retrieved) == _sha256(jar)
    assert sorted(p.name for p in (ivy / "jars").iterdir()) == [retrieved.name], (
        "Ivy fetched more than the jar"
    )
    # lineagestore.configure saw the artifact in the running JVM's spark.jars.packages: no bundled jar added
    assert "lineagestore/jars/" not in result["sparkJars"], result

    # the second run restored the first run's state: a running count/sum per key
    assert result["outputs"] == {"0": [["a", 2, 4], ["b", 1, 2]], "1": [["a", 3, 14], ["c", 1, 5]]}, result
    offsets = (work / "checkpoint" / "offsets" / "1").read_text().splitlines()
    conf = json.loads(offsets[1])["conf"]
    assert conf["spark.sql.streaming.stateStore.providerClass"] == PROVIDER_CLASS
    deltas = sorted(p.name for p in (work / "checkpoint" / "state" / "0").glob("*/*.delta"))
    assert deltas and all(re.fullmatch(r"\d+_[0-9a-f-]{36}\.delta", n) for n in deltas), deltas

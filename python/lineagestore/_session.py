"""Configure a SparkSession builder to use lineagestore."""

from __future__ import annotations

import os
import re
import warnings
import zipfile
from typing import Any
from urllib.parse import urlparse

from lineagestore._options_generated import PREFIX, SPARK_VERSION, SPECS, LineageOptions
from lineagestore._options_support import check_raw_conf, merge, names
from lineagestore.jvm.jar import jar_path

PROVIDER_CLASS = "io.lineagestore.spark.LineageStateStoreProvider"
MAVEN_ARTIFACT = "io.lineagestore:lineagestore-spark_2.13"
# A lineagestore jar in spark.jars (a path or URL) or the artifact in spark.jars.packages. Under spark-submit
# --packages (client mode) the JVM's spark.jars has the jar Ivy retrieved instead, named
# <organization>_<artifact>-<version>.jar: .../jars/io.lineagestore_lineagestore-spark_2.13-<version>.jar.
_LINEAGE_JAR = re.compile(r"(^|[/\\:]|io\.lineagestore_)lineagestore-spark_2\.13[-:][^,]*")


FORMAT_VERSION_KEY = "spark.sql.streaming.stateStore.checkpointFormatVersion"


class SparkVersionMismatch(RuntimeError):
    """The installed pyspark is not the Spark version lineagestore's jar was built for."""


class SparkAlreadyStarted(RuntimeError):
    """A Spark JVM already runs in this process without the lineagestore jar, so ``spark.jars`` cannot add it."""


class RemoteSparkSession(RuntimeError):
    """``configure`` was handed a builder of a remote Spark Connect session: the state store runs in the
    server's JVM, which only the server's own start can set up."""


def _remote_url(builder: Any) -> str | None:
    """The Spark Connect server the builder connects to (``builder.remote(url)``, ``spark.remote``, or the
    ``SPARK_REMOTE`` environment variable), or None. ``local`` remotes start their server in this process from
    the builder's own settings, so configure works on them: they are not remote here."""
    options = getattr(builder, "_options", {}) or {}
    url = options.get("spark.remote") or os.environ.get("SPARK_REMOTE")
    if not url or str(url).startswith("local"):
        return None
    return str(url)


def _refuse_remote(builder: Any) -> None:
    url = _remote_url(builder)
    if url is None:
        return
    raise RemoteSparkSession(
        f"lineagestore.configure: this builder connects to the Spark Connect server {url}. A jar cannot be "
        "added to a remote server from its client: the state store provider, its jar and its settings belong "
        "to the server's JVM and are set when the server starts. Start the Connect server with lineagestore "
        "(its jar in --jars and the settings of lineagestore.server_conf(); the exact command is in "
        "docs/operations.md, section 'Spark Connect'), then connect with SparkSession.builder.remote(...) "
        "without configure."
    )


def check_spark_version(installed: str | None = None) -> None:
    """Raise ``SparkVersionMismatch`` unless pyspark's version is the one the jar was built for.

    A different Spark runs the provider against internal APIs it was not compiled for (the state store API is
    ``private[sql]`` territory and changes between minor releases), which fails late and obscurely.
    """
    if installed is None:
        import pyspark

        installed = pyspark.__version__
    if installed != SPARK_VERSION:
        from lineagestore._version import __version__

        raise SparkVersionMismatch(
            f"lineagestore {__version__} is built for Spark {SPARK_VERSION}, but pyspark {installed} is "
            f"installed. Install the matching PySpark: pip install 'pyspark=={SPARK_VERSION}' (or a "
            f"lineagestore release built for Spark {installed}, if there is one)."
        )


def _jar_spark_version(path: str) -> str | None:
    """The Spark version recorded in a local lineagestore jar's manifest, if it says."""
    try:
        with zipfile.ZipFile(path) as z:
            manifest = z.read("META-INF/MANIFEST.MF").decode("utf-8", "replace")
    except (OSError, KeyError, zipfile.BadZipFile):
        return None
    m = re.search(r"^Lineagestore-Spark-Version:\s*(\S+)", manifest, re.MULTILINE)
    return m.group(1) if m else None


def _running_jvm_conf() -> dict[str, str]:
    """``spark.jars`` / ``spark.jars.packages`` of a JVM that already runs for this process.

    Under ``spark-submit`` (and ``pyspark`` shells) the JVM starts first, with ``--jars`` / ``--packages``
    in its SparkConf, and hands Python its gateway port (``PYSPARK_GATEWAY_PORT``); connecting to it starts
    nothing. Without that variable no JVM runs yet, and none is started here.
    """
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return {}
    from pyspark import SparkContext

    SparkContext._ensure_initialized()
    conf = SparkContext._jvm.org.apache.spark.SparkConf(True)
    return {k: conf.get(k, "") for k in ("spark.jars", "spark.jars.packages")}


def _running_jvm() -> Any:
    """The py4j view of this process's Spark JVM if one was started (a SparkSession, even a stopped one, or
    ``spark-submit``/``pyspark``, which start it before Python), else None. Starts nothing."""
    from pyspark import SparkContext

    if SparkContext._jvm is not None:
        return SparkContext._jvm
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        SparkContext._ensure_initialized()  # connects to the JVM spark-submit started; starts none
        return SparkContext._jvm
    return None


def _check_jvm_can_load_provider() -> None:
    """Refuse when a running JVM cannot load the provider: ``spark.jars`` set now would never reach the
    driver's class path (it is read when the JVM starts), and the query would die much later with a bare
    ``io.lineagestore.spark.LineageStateStoreProvider SQLSTATE: XXKST``."""
    jvm = _running_jvm()
    if jvm is None:
        return
    from py4j.protocol import Py4JError

    try:
        loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
        jvm.java.lang.Class.forName(PROVIDER_CLASS, False, loader)
        return  # an earlier configure (or --jars) already put it there
    except Py4JError:
        pass
    jar = jar_path() if _bundled_jar_exists() else "<lineagestore.jar_path()>"
    raise SparkAlreadyStarted(
        "lineagestore.configure: a Spark JVM already runs in this process (a SparkSession was created "
        "before configure, or spark-submit/pyspark started it) and it cannot load "
        f"{PROVIDER_CLASS}; a jar added to spark.jars now never reaches a running JVM, so streaming queries "
        "would fail with a bare class-not-found. Call configure before the first getOrCreate() of the "
        "process: restart the Python process (or notebook kernel) and configure first. Under "
        f"spark-submit or pyspark, pass the jar at start: --jars {jar} (then configure(builder) adds "
        "nothing, or use_bundled_jar=False)."
    )


def _check_format_version(builder: Any) -> None:
    """lineagestore needs checkpoint format version 2 (the unique IDs in the commit log are its lineage)."""
    options = getattr(builder, "_options", {}) or {}
    old = options.get(FORMAT_VERSION_KEY)
    if old is None or str(old).strip() == "2":
        return
    if str(old).strip() == "1":
        raise ValueError(
            f"{FORMAT_VERSION_KEY}=1 is set on the builder, but lineagestore needs checkpoint format "
            "version 2 (its lineage is the unique IDs version 2 records in the commit log). Remove that "
            "setting (configure sets 2), or do not use lineagestore for this session."
        )
    warnings.warn(
        f"lineagestore.configure replaces {FORMAT_VERSION_KEY}={old!r} (set on the builder before "
        "configure) with 2, the version lineagestore needs",
        stacklevel=3,
    )


LISTENERS_KEY = "spark.sql.streaming.streamingQueryListeners"
# The driver-side listeners lineagestore adds: the provider check says at query start when a restarted
# checkpoint keeps another provider (Spark's notice is a WARN); the snapshot-lag listener names the stores
# whose snapshot lag is worst after each batch (a WARN past maxSnapshotLagDeltas).
PROVIDER_CHECK_LISTENER = "io.lineagestore.spark.ProviderCheckListener"
SNAPSHOT_LAG_LISTENER = "io.lineagestore.spark.SnapshotLagListener"
LINEAGE_LISTENERS = (PROVIDER_CHECK_LISTENER, SNAPSHOT_LAG_LISTENER)
PLUGINS_KEY = "spark.plugins"
# Carries the standby followers' reports to the driver and back (standbyReplicas, docs/operations.md), so
# that an executor with no store of a query still keeps standby copies of it; idle when standbys are off.
STANDBY_PLUGIN = "io.lineagestore.spark.StandbyPlugin"


def _append_classes(builder: Any, key: str, classes: tuple[str, ...]) -> Any:
    """Append ``classes`` to the builder's comma-separated list ``key``, keeping the user's own entries and
    their order, and adding none twice."""
    existing = (getattr(builder, "_options", {}) or {}).get(key, "")
    listed = [x.strip() for x in str(existing).split(",") if x.strip()]
    missing = [x for x in classes if x not in listed]
    if not missing:
        return builder
    return builder.config(key, ",".join([*listed, *missing]))


def _add_listeners_and_plugin(builder: Any) -> Any:
    """Append lineagestore's query listeners and its plugin to the builder's, keeping the user's own."""
    return _append_classes(
        _append_classes(builder, LISTENERS_KEY, LINEAGE_LISTENERS), PLUGINS_KEY, (STANDBY_PLUGIN,)
    )


def provided_jar(builder: Any) -> str | None:
    """The lineagestore jar or artifact the session already gets without the bundled jar, if any.

    Looks at the builder's ``spark.jars`` and ``spark.jars.packages``, at ``PYSPARK_SUBMIT_ARGS``
    (``--jars`` / ``--packages``, e.g. ``pyspark --packages io.lineagestore:lineagestore-spark_2.13:<v>``)
    and, under ``spark-submit``, at the running JVM's own settings.
    """
    options = getattr(builder, "_options", {}) or {}
    texts = [options.get("spark.jars", ""), options.get("spark.jars.packages", "")]
    texts.append(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    texts.extend(_running_jvm_conf().values())
    bundled = os.path.realpath(jar_path()) if _bundled_jar_exists() else None
    for text in texts:
        for item in re.split(r"[,\s]+", str(text)):
            if _LINEAGE_JAR.search(item) and os.path.realpath(item.removeprefix("file:")) != bundled:
                return item
    return None


def _bundled_jar_exists() -> bool:
    try:
        jar_path()
    except FileNotFoundError:
        return False
    return True


def configure(
    builder: Any,
    options: LineageOptions | None = None,
    *,
    use_bundled_jar: bool | None = None,
    check_version: bool = True,
    **settings: Any,
) -> Any:
    """Return ``builder`` set up to use lineagestore as the state store of every streaming query.

    Sets the state store provider class and checkpoint format version 2, and the lineagestore settings of
    ``options`` (a ``LineageOptions``) and of the keyword arguments (``max_pending_bytes="64m"``, or the
    key's own name ``maxPendingBytes="64m"``), keywords winning. Only values other than the defaults are
    set. An unknown keyword raises ``TypeError`` listing the known ones; a bad value raises ``ValueError``
    naming the key, both before any session starts. A ``spark.sql.streaming.stateStore.lineagestore.*`` key the
    builder already holds is checked too: a misspelt one raises ``ValueError`` naming the nearest known key.

    The jar: ``use_bundled_jar=True`` adds the jar this package carries to ``spark.jars``; ``False`` adds
    nothing (the session gets lineagestore some other way: ``spark-submit --packages
    io.lineagestore:lineagestore-spark_2.13:<version>``, ``--jars``, or a cluster image). ``None`` (default)
    adds the bundled jar unless the builder's ``spark.jars`` / ``spark.jars.packages``,
    ``PYSPARK_SUBMIT_ARGS`` or (under ``spark-submit``) the running JVM's settings already name a lineagestore
    jar or artifact; a local jar found that way must record the same Spark version in its manifest.

    ``check_version`` (default on) raises ``SparkVersionMismatch`` when the installed pyspark is not the
    Spark version the jar was built for. Apply ``configure`` before the first ``getOrCreate()`` of the process:
    if a Spark JVM already runs and cannot load the provider, ``SparkAlreadyStarted`` says what to do. A
    ``checkpointFormatVersion`` set on the builder before is replaced by 2 with a warning naming it, or
    refused with ``ValueError`` if it is 1.
    """
    opts = merge(options, settings)  # fails on unknown names or bad values before anything is set
    # raw keys the builder holds already (.config(...) before configure), with the JVM's rules; keys set later
    # or by spark-submit --conf are checked on the driver when a query starts (LineageSessionExtensions)
    check_raw_conf(getattr(builder, "_options", {}) or {}, SPECS, PREFIX)
    _refuse_remote(builder)
    if check_version:
        check_spark_version()
    _check_format_version(builder)
    if use_bundled_jar is None:
        use_bundled_jar = provided_jar(builder) is None
    if use_bundled_jar:
        _check_jvm_can_load_provider()
        jars = jar_path()
        # keep the jars already chosen (the builder's, or spark-submit's --jars, which this setting replaces)
        existing = getattr(builder, "_options", {}).get("spark.jars") or _running_jvm_conf().get("spark.jars")
        if existing and jars not in existing.split(","):
            jars = f"{existing},{jars}"
        builder = builder.config("spark.jars", jars)
    elif check_version:
        other = (provided_jar(builder) or "").removeprefix("file:")
        recorded = _jar_spark_version(other) if other and os.path.isfile(other) else None
        if recorded and recorded != SPARK_VERSION:
            raise SparkVersionMismatch(
                f"{other} is a lineagestore jar built for Spark {recorded}, but this lineagestore package "
                f"and pyspark are for Spark {SPARK_VERSION}; use the jar of the matching release "
                f"(or use_bundled_jar=True)"
            )
    builder = builder.config("spark.sql.streaming.stateStore.providerClass", PROVIDER_CLASS).config(
        FORMAT_VERSION_KEY, "2"
    )
    builder = _add_listeners_and_plugin(builder)
    conf = opts.to_spark_conf()
    for name in settings:  # explicitly given keywords are set even when equal to the default
        spec = names(SPECS)[name]
        conf[PREFIX + spec.name] = str(getattr(opts, spec.field))
    for key, value in conf.items():
        builder = builder.config(key, value)
    return _with_session_extension(builder)


class _ConfRecorder:
    """A stand-in builder that keeps what ``configure`` sets."""

    def __init__(self) -> None:
        self._options: dict[str, str] = {}

    def config(self, key: str, value: Any) -> _ConfRecorder:
        self._options[key] = str(value)
        return self


def server_conf(options: LineageOptions | None = None, **settings: Any) -> dict[str, str]:
    """The Spark settings ``configure`` would set, the bundled jar in ``spark.jars`` included, for a Spark
    started outside this process: a Spark Connect server (``start-connect-server.sh --jars <spark.jars>
    --conf key=value ...``, docs/operations.md) or ``spark-submit``. Options as for ``configure``."""
    recorder = configure(_ConfRecorder(), options, use_bundled_jar=False, **settings)
    return {"spark.jars": jar_path(), **recorder._options}


def check_checkpoint_location(spark: Any, location: str) -> None:
    """Raise ``lineagestore.jvm.MissingFilesystem`` if ``location`` is an ``s3a://`` URI and the JVM of the
    session ``spark`` cannot load hadoop-aws or the AWS SDK v2 bundle, with the command line's text: the
    classes it lacks and ``spark.jars.packages=org.apache.hadoop:hadoop-aws:<version>`` to start the session
    with. Spark's own error for that comes from ``writeStream.start()`` and says only
    ``[CANNOT_LOAD_CHECKPOINT_FILE_MANAGER.UNCATEGORIZED]``. Any other location passes. lineagestore's helpers
    that take a checkpoint (the adjunct-table writers, the test harness) call it before the query starts."""
    if urlparse(str(location)).scheme.lower() != "s3a":
        return
    from lineagestore.jvm.jars import S3A_FILESYSTEM_CLASS
    from lineagestore.jvm.tools import require_s3a_classes

    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # what FileSystem.get loads the filesystem with
    impl = conf.get("fs.s3a.impl") or S3A_FILESYSTEM_CLASS
    hadoop_version = str(jvm.org.apache.hadoop.util.VersionInfo.getVersion())
    require_s3a_classes(conf, str(location), impl, hadoop_version, launched=False)


SESSION_EXTENSION = "io.lineagestore.spark.LineageSessionExtensions"


def _with_session_extension(builder: Any) -> Any:
    """Append lineagestore's session extension (transformWithState on lineagestore, docs/transform-with-state.md)
    to the builder's ``spark.sql.extensions``, keeping the user's own extensions and their order."""
    return _append_classes(builder, "spark.sql.extensions", (SESSION_EXTENSION,))

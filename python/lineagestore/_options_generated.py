# Generated from io.lineagestore.config.LineageConf by
#   dev/sbt "core/runMain io.lineagestore.config.GenerateDocs"
# Do not edit: ConfigDocsSuite fails when this file is stale.
"""Typed lineagestore options: one field per ``spark.sql.streaming.stateStore.lineagestore.<name>`` key."""

from __future__ import annotations

from dataclasses import dataclass

from lineagestore._options_support import OptionSpec, known_keywords, spark_conf, validate

PREFIX = "spark.sql.streaming.stateStore.lineagestore."
# The Spark version the lineagestore-spark jar of this release is built and tested against (build.sbt).
SPARK_VERSION = "4.3.0"

SPECS: tuple[OptionSpec, ...] = (
    OptionSpec(
        field="max_snapshot_lag_deltas",
        name="maxSnapshotLagDeltas",
        kind="int",
        default=20,
        min=1,
        max=2147483647,
        allowed="an integer between 1 and 2147483647",
        choices=(),
    ),
    OptionSpec(
        field="close_upload_timeout_ms",
        name="closeUploadTimeoutMs",
        kind="duration",
        default=30000,
        min=0,
        max=None,
        allowed="a duration (an integer of milliseconds, or with a suffix as in Spark's time settings: us, ms, s, m or min, h, d) of at least 0",
        choices=(),
    ),
    OptionSpec(
        field="max_pending_bytes",
        name="maxPendingBytes",
        kind="size",
        default=1073741824,
        min=1048576,
        max=None,
        allowed="a byte count (an integer of bytes, or with a suffix as in Spark's byte settings: b, k or kb, m or mb, g or gb, t or tb, p or pb; powers of 1024) of at least 1048576",
        choices=(),
    ),
    OptionSpec(
        field="local_dir",
        name="localDir",
        kind="string",
        default="",
        min=None,
        max=None,
        allowed="any string",
        choices=(),
    ),
    OptionSpec(
        field="local_retention_ms",
        name="localRetentionMs",
        kind="duration",
        default=3600000,
        min=0,
        max=None,
        allowed="a duration (an integer of milliseconds, or with a suffix as in Spark's time settings: us, ms, s, m or min, h, d) of at least 0",
        choices=(),
    ),
    OptionSpec(
        field="delta_codec",
        name="deltaCodec",
        kind="choice",
        default="zstd",
        min=None,
        max=None,
        allowed="one of none, zstd",
        choices=("none", "zstd"),
    ),
    OptionSpec(
        field="transfer_threads",
        name="transferThreads",
        kind="int",
        default=8,
        min=1,
        max=256,
        allowed="an integer between 1 and 256",
        choices=(),
    ),
    OptionSpec(
        field="ranged_download_part_bytes",
        name="rangedDownloadPartBytes",
        kind="size",
        default=8388608,
        min=0,
        max=None,
        allowed="a byte count (an integer of bytes, or with a suffix as in Spark's byte settings: b, k or kb, m or mb, g or gb, t or tb, p or pb; powers of 1024) of at least 0",
        choices=(),
    ),
    OptionSpec(
        field="delta_upload_part_bytes",
        name="deltaUploadPartBytes",
        kind="size",
        default=5242880,
        min=5242880,
        max=1073741824,
        allowed="a byte count (an integer of bytes, or with a suffix as in Spark's byte settings: b, k or kb, m or mb, g or gb, t or tb, p or pb; powers of 1024) between 5242880 and 1073741824",
        choices=(),
    ),
    OptionSpec(
        field="orphan_grace_period_ms",
        name="orphanGracePeriodMs",
        kind="duration",
        default=21600000,
        min=0,
        max=None,
        allowed="a duration (an integer of milliseconds, or with a suffix as in Spark's time settings: us, ms, s, m or min, h, d) of at least 0",
        choices=(),
    ),
    OptionSpec(
        field="orphan_sweep_every_cleanups",
        name="orphanSweepEveryCleanups",
        kind="int",
        default=100,
        min=1,
        max=2147483647,
        allowed="an integer between 1 and 2147483647",
        choices=(),
    ),
    OptionSpec(
        field="memory_bytes",
        name="memoryBytes",
        kind="size",
        default=536870912,
        min=8388608,
        max=None,
        allowed="a byte count (an integer of bytes, or with a suffix as in Spark's byte settings: b, k or kb, m or mb, g or gb, t or tb, p or pb; powers of 1024) of at least 8388608",
        choices=(),
    ),
    OptionSpec(
        field="write_buffer_bytes",
        name="writeBufferBytes",
        kind="size",
        default=67108864,
        min=65536,
        max=None,
        allowed="a byte count (an integer of bytes, or with a suffix as in Spark's byte settings: b, k or kb, m or mb, g or gb, t or tb, p or pb; powers of 1024) of at least 65536",
        choices=(),
    ),
    OptionSpec(
        field="sst_compression",
        name="sstCompression",
        kind="choice",
        default="lz4",
        min=None,
        max=None,
        allowed="one of lz4, snappy, zstd, none",
        choices=("lz4", "snappy", "zstd", "none"),
    ),
    OptionSpec(
        field="standby_replicas",
        name="standbyReplicas",
        kind="int",
        default=0,
        min=-1,
        max=16,
        allowed="an integer between -1 and 16",
        choices=(),
    ),
    OptionSpec(
        field="standby_threads",
        name="standbyThreads",
        kind="int",
        default=2,
        min=1,
        max=64,
        allowed="an integer between 1 and 64",
        choices=(),
    ),
    OptionSpec(
        field="standby_max_bytes",
        name="standbyMaxBytes",
        kind="size",
        default=8589934592,
        min=0,
        max=None,
        allowed="a byte count (an integer of bytes, or with a suffix as in Spark's byte settings: b, k or kb, m or mb, g or gb, t or tb, p or pb; powers of 1024) of at least 0",
        choices=(),
    ),
)


@known_keywords(SPECS)
@dataclass(frozen=True)
class LineageOptions:
    """lineagestore settings, checked when created with the rules the JVM applies.

    Each field is the key ``spark.sql.streaming.stateStore.lineagestore.<name>`` with ``<name>`` in snake_case. A
    bad value raises ``ValueError`` naming the key, the value and what is allowed. Size and duration fields
    accept an ``int`` or a string in Spark's forms (``"256m"``, ``"256mb"``, ``"1g"``; ``"30s"``,
    ``"5min"``, ``"1h"``) and hold the number of bytes or milliseconds afterwards.
    Pass it to ``lineagestore.configure(builder, options)``.
    """

    max_snapshot_lag_deltas: int = 20
    """Bound on a lineage's snapshot lag: a commit that leaves more than this many deltas after the newest
    snapshot known to be uploaded uploads its frozen snapshot itself, in the batch (a catch-up snapshot),
    instead of leaving it to Spark's maintenance thread. Cold restores then replay at most about this many
    deltas whatever the run pattern (short availableNow runs, executor churn). Effective value: at least
    minDeltasForSnapshot. Key ``spark.sql.streaming.stateStore.lineagestore.maxSnapshotLagDeltas``; an integer
    between 1 and 2147483647; default ``20``.
    """

    close_upload_timeout_ms: int | str = 30000
    """How long closing a store (query stop, unload, executor shutdown) waits for its frozen snapshots to upload.
    Past it the close goes on without them: nothing committed is lost (the deltas hold it) and the next commit
    on the lineage catches up (maxSnapshotLagDeltas). 0 uploads nothing on close. Key
    ``spark.sql.streaming.stateStore.lineagestore.closeUploadTimeoutMs``; a duration (an integer of
    milliseconds, or with a suffix as in Spark's time settings: us, ms, s, m or min, h, d) of at least 0;
    default ``30000``.
    """

    max_pending_bytes: int | str = 1073741824
    """Memory one batch of one partition may hold of its uncommitted changes (keys and values, before commit; its
    delta goes to the blob store as the batch runs). Past it, the batch's changes spill to local disk (sorted
    runs under the store's local directory, read back when the batch is applied, deleted then or on abort), so
    a batch larger than memory (a backfill's first) commits; a spill the disk refuses fails the batch with an
    error naming this key. Keys the batch read and has not written yet are remembered within an eighth of it
    besides. Committed batches waiting for the executor's apply threads to write them into RocksDB are bounded
    by the same amount, executor-wide (the largest value among the executor's stores): a commit past it waits
    for earlier ones. Accepts Spark's byte forms (64m, 64mb, 1g). Key
    ``spark.sql.streaming.stateStore.lineagestore.maxPendingBytes``; a byte count (an integer of bytes, or
    with a suffix as in Spark's byte settings: b, k or kb, m or mb, g or gb, t or tb, p or pb; powers of 1024)
    of at least 1048576; default ``1073741824``.
    """

    local_dir: str = ""
    """Executor-local directory for RocksDB instances and frozen snapshots, and for adjunct tables' replicas and
    writers' copies (on the driver or executors). Empty: java.io.tmpdir. Key
    ``spark.sql.streaming.stateStore.lineagestore.localDir``; any string; default ````.
    """

    local_retention_ms: int | str = 3600000
    """How long a closed store's local RocksDB directory is kept, so that the next provider of the same store on
    this executor (a restarted query) resumes without downloading. 0 deletes it on close. Key
    ``spark.sql.streaming.stateStore.lineagestore.localRetentionMs``; a duration (an integer of milliseconds,
    or with a suffix as in Spark's time settings: us, ms, s, m or min, h, d) of at least 0; default
    ``3600000``.
    """

    delta_codec: str = "zstd"
    """Compression of the records in delta files: zstd (level 1) or none. Readers detect it per file. Key
    ``spark.sql.streaming.stateStore.lineagestore.deltaCodec``; one of none, zstd; default ``zstd``.
    """

    transfer_threads: int = 8
    """Threads of the executor-wide pool every store's uploads, downloads and hashing run on (one pool per
    executor JVM, sized by the first store that starts there). Key
    ``spark.sql.streaming.stateStore.lineagestore.transferThreads``; an integer between 1 and 256; default
    ``8``.
    """

    ranged_download_part_bytes: int | str = 8388608
    """Restores read snapshot files of at least 4 parts as byte ranges of this size, 8 in flight per file
    (parallel ranged GETs on S3), checksummed in order as they arrive. 0 reads every file as one stream.
    Accepts Spark's byte forms (64m, 64mb, 1g). Key
    ``spark.sql.streaming.stateStore.lineagestore.rangedDownloadPartBytes``; a byte count (an integer of
    bytes, or with a suffix as in Spark's byte settings: b, k or kb, m or mb, g or gb, t or tb, p or pb;
    powers of 1024) of at least 0; default ``8388608``.
    """

    delta_upload_part_bytes: int | str = 5242880
    """On S3 (s3a), a batch's delta goes to the blob store in parts of this size while the batch runs (Hadoop's
    multipart uploader), so its commit sends at most the last part; a delta of at most one part is one PUT at
    the commit. The default is S3's smallest part, so that most of a delta goes up before its commit; larger
    parts mean fewer requests per delta. At most two parts of a store are in flight, so a delta holds at most
    three parts in memory. s3a's own parts (fs.s3a.multipart.size, 64 MiB by default) apply to every other
    write. Other filesystems ignore it. Accepts Spark's byte forms (64m, 64mb, 1g). Key
    ``spark.sql.streaming.stateStore.lineagestore.deltaUploadPartBytes``; a byte count (an integer of bytes,
    or with a suffix as in Spark's byte settings: b, k or kb, m or mb, g or gb, t or tb, p or pb; powers of
    1024) between 5242880 and 1073741824; default ``5242880``.
    """

    orphan_grace_period_ms: int | str = 21600000
    """Age after which a shared blob that no snapshot references is treated as a crash leftover and deleted by
    the orphan sweep. Must exceed the longest snapshot upload. Key
    ``spark.sql.streaming.stateStore.lineagestore.orphanGracePeriodMs``; a duration (an integer of
    milliseconds, or with a suffix as in Spark's time settings: us, ms, s, m or min, h, d) of at least 0;
    default ``21600000``.
    """

    orphan_sweep_every_cleanups: int = 100
    """Clean-up runs between two listings of a store directory (the orphan sweep). Other runs list nothing. Key
    ``spark.sql.streaming.stateStore.lineagestore.orphanSweepEveryCleanups``; an integer between 1 and
    2147483647; default ``100``.
    """

    memory_bytes: int | str = 536870912
    """RocksDB memory of all stores of one executor together: one shared block cache, with memtables charged to
    it (at most half). Read once per executor JVM. Accepts Spark's byte forms (64m, 64mb, 1g). Key
    ``spark.sql.streaming.stateStore.lineagestore.memoryBytes``; a byte count (an integer of bytes, or with a
    suffix as in Spark's byte settings: b, k or kb, m or mb, g or gb, t or tb, p or pb; powers of 1024) of at
    least 8388608; default ``536870912``.
    """

    write_buffer_bytes: int | str = 67108864
    """RocksDB memtable size per store (all stores' memtables together stay within half of memoryBytes). Large
    enough to hold the changes of a snapshot interval: a memtable that fills up mid-interval adds an SST and
    compactions the next snapshot uploads (docs/benchmarks.md, the scale run). Accepts Spark's byte forms
    (64m, 64mb, 1g). Key ``spark.sql.streaming.stateStore.lineagestore.writeBufferBytes``; a byte count (an
    integer of bytes, or with a suffix as in Spark's byte settings: b, k or kb, m or mb, g or gb, t or tb, p
    or pb; powers of 1024) of at least 65536; default ``67108864``.
    """

    sst_compression: str = "lz4"
    """Block compression of the RocksDB SST files (flushes, compactions, so snapshots): lz4 (as Spark's RocksDB
    provider), snappy (RocksDB's default), zstd (smaller files for compressible values, more CPU per flush and
    compaction) or none. Files written under another choice stay readable; a change applies to the files
    written after it. Key ``spark.sql.streaming.stateStore.lineagestore.sstCompression``; one of lz4, snappy,
    zstd, none; default ``lz4``.
    """

    standby_replicas: int = 0
    """Standby copies of each store kept on other executors, so that a store's load after its executor is lost
    starts from local files instead of a download: each standby holds the files of the newest snapshot
    uploaded to the store's directory (perhaps by an attempt Spark never committed), fetched in the background
    (only the files it lacks, by content identity), and a load on its executor checks them against the
    committed checkpoint's index as any restore does (a standby never changes what is loaded, only what is
    downloaded). 0: none; -1: one on every executor other than the store's own (docs/architecture.md, standby
    copies). Key ``spark.sql.streaming.stateStore.lineagestore.standbyReplicas``; an integer between -1 and
    16; default ``0``.
    """

    standby_threads: int = 2
    """Threads of the executor-wide pool standby copies poll storage and fetch files on (one pool per executor
    JVM, apart from transferThreads, so a store's own restore never waits for a standby's fetch). Key
    ``spark.sql.streaming.stateStore.lineagestore.standbyThreads``; an integer between 1 and 64; default
    ``2``.
    """

    standby_max_bytes: int | str = 8589934592
    """Local disk all standby copies of one executor may hold together: a standby whose snapshot would take them
    past it is not fetched (and counted as skipped). Accepts Spark's byte forms (64m, 64mb, 1g). Key
    ``spark.sql.streaming.stateStore.lineagestore.standbyMaxBytes``; a byte count (an integer of bytes, or
    with a suffix as in Spark's byte settings: b, k or kb, m or mb, g or gb, t or tb, p or pb; powers of 1024)
    of at least 0; default ``8589934592``.
    """

    def __post_init__(self) -> None:
        validate(self, SPECS)

    def to_spark_conf(self, include_defaults: bool = False) -> dict[str, str]:
        """The Spark settings (full key -> text); only values other than the default, unless asked."""
        return spark_conf(self, SPECS, PREFIX, include_defaults)

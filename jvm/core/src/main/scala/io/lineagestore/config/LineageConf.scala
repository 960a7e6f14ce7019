package io.lineagestore.config

/** Thrown for a configuration value that is malformed or out of range; names the key and what is allowed. */
class InvalidConfigException(message: String) extends IllegalArgumentException(message)

/** How a key's text becomes a value. Declarative (a name, a parser with fixed rules, optional bounds), so
  * that generated code in other languages (python/lineagestore/_options_generated.py) can apply the same
  * rules.
  */
sealed abstract class ConfKind[T](val name: String, val typeName: String, val describe: String) {
  def parse(s: String): Option[T]
  def show(v: T): String = v.toString

  /** The number bounds apply to; None for kinds without bounds. */
  def asLong(v: T): Option[Long]
}

object ConfKind {

  /** A byte count in Spark's byte-string forms (as `spark.*` byte settings, `JavaUtils.byteStringAsBytes`): a
    * decimal 64-bit integer of bytes, or with a b, k/kb, m/mb, g/gb, t/tb or p/pb suffix (powers of 1024),
    * e.g. `512m` or `512mb`.
    */
  case object Size
      extends ConfKind[Long](
        "size",
        "size",
        "a byte count (an integer of bytes, or with a suffix as in Spark's byte settings: b, k or kb, m or mb, " +
          "g or gb, t or tb, p or pb; powers of 1024)"
      ) {
    def parse(s: String): Option[Long] = scala.util.Try(LineageConf.parseSize(s)).toOption
    def asLong(v: Long): Option[Long] = Some(v)
  }

  /** A duration in milliseconds in Spark's time-string forms (as `spark.*` time settings,
    * `JavaUtils.timeStringAsMs`): a decimal 64-bit integer of milliseconds, or with a us, ms, s, m or min, h
    * or d suffix, e.g. `30s` or `5min`.
    */
  case object Duration
      extends ConfKind[Long](
        "duration",
        "duration",
        "a duration (an integer of milliseconds, or with a suffix as in Spark's time settings: us, ms, s, " +
          "m or min, h, d)"
      ) {
    def parse(s: String): Option[Long] = scala.util.Try(LineageConf.parseDurationMs(s)).toOption
    def asLong(v: Long): Option[Long] = Some(v)
  }

  /** A decimal 64-bit integer, no suffix. */
  case object Long extends ConfKind[scala.Long]("long", "integer", "an integer") {
    def parse(s: String): Option[scala.Long] = s.trim.toLongOption
    def asLong(v: scala.Long): Option[scala.Long] = Some(v)
  }

  /** A decimal 32-bit integer, no suffix. */
  case object Int extends ConfKind[scala.Int]("int", "integer", "an integer") {
    def parse(s: String): Option[scala.Int] = s.trim.toIntOption
    def asLong(v: scala.Int): Option[scala.Long] = Some(v.toLong)
  }

  /** One of a fixed set of lower-case words; the text is trimmed and lower-cased first. */
  final case class Choice(values: Seq[String])
      extends ConfKind[String]("choice", "string", s"one of ${values.mkString(", ")}") {
    def parse(s: String): Option[String] = Some(s.trim.toLowerCase).filter(values.contains)
    def asLong(v: String): Option[scala.Long] = None
  }

  /** Any text. */
  case object Str extends ConfKind[String]("string", "string", "any string") {
    def parse(s: String): Option[String] = Some(s)
    def asLong(v: String): Option[scala.Long] = None
  }
}

/** One configuration key, declared once: name, default, documentation, kind and bounds. Python's options
  * object (python/lineagestore/_options_generated.py) and docs/configuration.md are generated from these
  * declarations by [[GenerateDocs]]; nothing else needs to change when an entry is added to
  * [[LineageConf.All]].
  */
final case class ConfEntry[T](
    name: String,
    default: T,
    doc: String,
    kind: ConfKind[T],
    min: Option[Long] = None,
    max: Option[Long] = None
) {
  def key: String = LineageConf.Prefix + name
  def typeName: String = kind.typeName
  def parse(s: String): Option[T] = kind.parse(s)

  /** What a value must be, in words (used in error messages, the docs and the Python options). */
  def allowed: String = {
    val base = kind.describe
    (min, max) match {
      case (Some(lo), Some(hi)) => s"$base between $lo and $hi"
      case (Some(lo), None)     => s"$base of at least $lo"
      case (None, Some(hi))     => s"$base of at most $hi"
      case (None, None)         => base
    }
  }

  /** None if `v` is within the bounds, else what is wrong. */
  def check(v: T): Option[String] = kind.asLong(v).flatMap { x =>
    if (min.exists(x < _) || max.exists(x > _)) Some(boundsText) else None
  }

  private def boundsText: String = (min, max) match {
    case (Some(lo), Some(hi)) => s"must be between $lo and $hi"
    case (Some(lo), None)     => s"must be at least $lo"
    case (None, Some(hi))     => s"must be at most $hi"
    case (None, None)         => ""
  }

  /** The value in `confs` (Spark's forwarded state-store SQL confs), or the default; fails on a bad value. */
  def from(confs: Map[String, String]): T = confs.get(key) match {
    case None      => default
    case Some(raw) =>
      val v = parse(raw.trim).getOrElse(
        throw new InvalidConfigException(
          s"$key='$raw' is not a valid $typeName: expected $allowed. $doc Default: ${show(default)}."
        )
      )
      check(v).foreach(problem => throw new InvalidConfigException(s"$key='$raw' is not allowed: $problem."))
      v
  }

  def show(v: T): String = kind.show(v)
  def defaultText: String = show(default)

  /** The words a [[ConfKind.Choice]] key takes (empty for other kinds): the one list of valid names, which
    * the code acting on the key maps from (its suite checks that every word maps).
    */
  def choices: Seq[String] = (kind: ConfKind[_]) match {
    case ConfKind.Choice(values) => values
    case _                       => Nil
  }
}

/** Every lineagestore configuration key. Keys are `spark.sql.streaming.stateStore.lineagestore.<name>`. */
object LineageConf {
  val Prefix = "spark.sql.streaming.stateStore.lineagestore."

  private def size(name: String, default: Long, doc: String, min: Long) =
    ConfEntry[Long](name, default, doc, ConfKind.Size, min = Some(min))

  private def int(name: String, default: Int, doc: String, min: Int, max: Int) =
    ConfEntry[Int](name, default, doc, ConfKind.Int, min = Some(min.toLong), max = Some(max.toLong))

  private def string(name: String, default: String, doc: String) =
    ConfEntry[String](name, default, doc, ConfKind.Str)

  private def duration(name: String, default: Long, doc: String, min: Long) =
    ConfEntry[Long](name, default, doc, ConfKind.Duration, min = Some(min))

  // Spark's suffixes (JavaUtils.byteSuffixes and timeSuffixes), so a value written for a Spark setting means
  // the same here. Blanks around the number and before the suffix, and a sign, are tolerated besides.
  private val ByteSuffixes: Map[String, Long] = Map(
    "" -> 1L,
    "b" -> 1L,
    "k" -> (1L << 10),
    "kb" -> (1L << 10),
    "m" -> (1L << 20),
    "mb" -> (1L << 20),
    "g" -> (1L << 30),
    "gb" -> (1L << 30),
    "t" -> (1L << 40),
    "tb" -> (1L << 40),
    "p" -> (1L << 50),
    "pb" -> (1L << 50)
  )
  private val TimeSuffixesUs: Map[String, Long] = Map(
    "" -> 1000L, // a bare number is milliseconds, as in Spark's *Ms settings
    "us" -> 1L,
    "ms" -> 1000L,
    "s" -> 1000L * 1000,
    "m" -> 60L * 1000 * 1000,
    "min" -> 60L * 1000 * 1000,
    "h" -> 60L * 60 * 1000 * 1000,
    "d" -> 24L * 60 * 60 * 1000 * 1000
  )
  private val NumberAndSuffix = """([+-]?[0-9]+)\s*([a-z]*)""".r

  private def numberAndSuffix(s: String, suffixes: Map[String, Long]): (Long, Long) =
    s.trim.toLowerCase match {
      case NumberAndSuffix(num, suffix) if suffixes.contains(suffix) => (num.toLong, suffixes(suffix))
      case _ => throw new NumberFormatException(s"'$s' has no known form")
    }

  /** A byte count as Spark's byte settings take it: `1048576`, `512k`, `64m`, `64mb`, `1g`, `1gb` ... */
  def parseSize(s: String): Long = {
    val (num, mult) = numberAndSuffix(s, ByteSuffixes)
    Math.multiplyExact(num, mult)
  }

  /** Milliseconds from a duration as Spark's time settings take it: `1500` (ms), `30s`, `5min`, `5m`, `1h`,
    * `2d`; microseconds are truncated, as Spark does.
    */
  def parseDurationMs(s: String): Long = {
    val (num, us) = numberAndSuffix(s, TimeSuffixesUs)
    Math.multiplyExact(num, us) / 1000
  }

  val MaxPendingBytes: ConfEntry[Long] = size(
    "maxPendingBytes",
    1L << 30,
    "Memory one batch of one partition may hold of its uncommitted changes (keys and values, before commit; " +
      "its delta goes to the blob store as the batch runs). Past it, the batch's changes spill to local disk " +
      "(sorted runs under the store's local directory, read back when the batch is applied, deleted then or " +
      "on abort), so a batch larger than memory (a backfill's first) commits; a spill the disk refuses fails " +
      "the batch with an error naming this key. Keys the batch read and has not written yet are remembered " +
      "within an eighth of it besides. Committed batches waiting for the executor's apply threads to write " +
      "them into RocksDB are bounded by the same amount, executor-wide (the largest value among the " +
      "executor's stores): a commit past it waits for earlier ones. Accepts Spark's byte forms (64m, 64mb, 1g).",
    min = 1L << 20
  )
  val LocalDir: ConfEntry[String] = string(
    "localDir",
    "",
    "Executor-local directory for RocksDB instances and frozen snapshots, and for adjunct tables' " +
      "replicas and writers' copies (on the driver or executors). Empty: java.io.tmpdir."
  )
  val LocalRetentionMs: ConfEntry[Long] = duration(
    "localRetentionMs",
    60L * 60 * 1000,
    "How long a closed store's local RocksDB directory is kept, so that the next provider of the same store " +
      "on this executor (a restarted query) resumes without downloading. 0 deletes it on close.",
    min = 0
  )
  val DeltaCompression: ConfEntry[String] = ConfEntry[String](
    "deltaCodec",
    "zstd",
    "Compression of the records in delta files: zstd (level 1) or none. Readers detect it per file.",
    ConfKind.Choice(Seq("none", "zstd")) // io.lineagestore.format.DeltaCodec.byName maps each to its codec
  )
  val TransferThreads: ConfEntry[Int] = int(
    "transferThreads",
    8,
    "Threads of the executor-wide pool every store's uploads, downloads and hashing run on (one pool per " +
      "executor JVM, sized by the first store that starts there).",
    min = 1,
    max = 256
  )
  val RangedDownloadPartBytes: ConfEntry[Long] = size(
    "rangedDownloadPartBytes",
    8L << 20,
    "Restores read snapshot files of at least 4 parts as byte ranges of this size, 8 in flight per file " +
      "(parallel ranged GETs on S3), checksummed in order as they arrive. 0 reads every file as one stream. " +
      "Accepts Spark's byte forms (64m, 64mb, 1g).",
    min = 0
  )
  val DeltaUploadPartBytes: ConfEntry[Long] = ConfEntry[Long](
    "deltaUploadPartBytes",
    5L << 20,
    "On S3 (s3a), a batch's delta goes to the blob store in parts of this size while the batch runs (Hadoop's " +
      "multipart uploader), so its commit sends at most the last part; a delta of at most one part is one PUT " +
      "at the commit. The default is S3's smallest part, so that most of a delta goes up before its commit; " +
      "larger parts mean fewer requests per delta. At most two parts of a store are in flight, so a delta " +
      "holds at most three parts in memory. s3a's own parts (fs.s3a.multipart.size, 64 MiB by default) apply " +
      "to every other write. Other filesystems ignore it. Accepts Spark's byte forms (64m, 64mb, 1g).",
    ConfKind.Size,
    min = Some(5L << 20),
    max = Some(1L << 30)
  )
  val MaxSnapshotLagDeltas: ConfEntry[Int] = int(
    "maxSnapshotLagDeltas",
    20,
    "Bound on a lineage's snapshot lag: a commit that leaves more than this many deltas after the newest " +
      "snapshot known to be uploaded uploads its frozen snapshot itself, in the batch (a catch-up snapshot), " +
      "instead of leaving it to Spark's maintenance thread. Cold restores then replay at most about this many " +
      "deltas whatever the run pattern (short availableNow runs, executor churn). Effective value: at least " +
      "minDeltasForSnapshot.",
    min = 1,
    max = Int.MaxValue
  )
  val CloseUploadTimeoutMs: ConfEntry[Long] = duration(
    "closeUploadTimeoutMs",
    30000L,
    "How long closing a store (query stop, unload, executor shutdown) waits for its frozen snapshots to " +
      "upload. Past it the close goes on without them: nothing committed is lost (the deltas hold it) and the " +
      "next commit on the lineage catches up (maxSnapshotLagDeltas). 0 uploads nothing on close.",
    min = 0
  )
  val OrphanGracePeriodMs: ConfEntry[Long] = duration(
    "orphanGracePeriodMs",
    6L * 60 * 60 * 1000,
    "Age after which a shared blob that no snapshot references is treated as a crash leftover and deleted " +
      "by the orphan sweep. Must exceed the longest snapshot upload.",
    min = 0
  )
  val OrphanSweepEveryCleanups: ConfEntry[Int] = int(
    "orphanSweepEveryCleanups",
    100,
    "Clean-up runs between two listings of a store directory (the orphan sweep). Other runs list nothing.",
    min = 1,
    max = Int.MaxValue
  )
  val MemoryBytes: ConfEntry[Long] = size(
    "memoryBytes",
    512L << 20,
    "RocksDB memory of all stores of one executor together: one shared block cache, with memtables charged " +
      "to it (at most half). Read once per executor JVM. Accepts Spark's byte forms (64m, 64mb, 1g).",
    min = 8L << 20
  )
  val WriteBufferBytes: ConfEntry[Long] = size(
    "writeBufferBytes",
    64L << 20,
    "RocksDB memtable size per store (all stores' memtables together stay within half of memoryBytes). Large " +
      "enough to hold the changes of a snapshot interval: a memtable that fills up mid-interval adds an SST and " +
      "compactions the next snapshot uploads (docs/benchmarks.md, the scale run). Accepts Spark's byte forms (64m, 64mb, 1g).",
    min = 1L << 16
  )

  /** The block compression of the SST files a store's RocksDB writes (flushes and compactions);
    * io.lineagestore.engine.RocksDbTuning.compressionType maps each name to RocksDB's type. Each block
    * records its own compression, so files written under another choice (snapshots of an earlier run, before
    * this setting existed: Snappy, RocksDB's default) stay readable and a change takes effect on the files
    * written after it.
    *
    * LZ4 by default, as Spark's RocksDB provider: with RocksDB's default, Snappy, our flush threads spent
    * about twice the CPU of Spark's on the same bytes in the scale benchmark (docs/benchmarks.md). zstd
    * trades flush and compaction CPU for smaller files (storage and transfer) where values compress.
    */
  val SstCompression: ConfEntry[String] = ConfEntry[String](
    "sstCompression",
    "lz4",
    "Block compression of the RocksDB SST files (flushes, compactions, so snapshots): lz4 (as Spark's RocksDB " +
      "provider), snappy (RocksDB's default), zstd (smaller files for compressible values, more CPU per " +
      "flush and compaction) or none. Files written under another choice stay readable; a change applies to " +
      "the files written after it.",
    ConfKind.Choice(Seq("lz4", "snappy", "zstd", "none"))
  )

  val StandbyReplicas: ConfEntry[Int] = int(
    "standbyReplicas",
    0,
    "Standby copies of each store kept on other executors, so that a store's load after its executor is lost " +
      "starts from local files instead of a download: each standby holds the files of the newest snapshot " +
      "uploaded to the store's directory (perhaps by an attempt Spark never committed), fetched in the " +
      "background (only the files it lacks, by content identity), and a load on its executor checks them " +
      "against the committed checkpoint's index as any " +
      "restore does (a standby never changes what is loaded, only what is downloaded). 0: none; -1: one on " +
      "every executor other than the store's own (docs/architecture.md, standby copies).",
    min = -1,
    max = 16
  )
  val StandbyThreads: ConfEntry[Int] = int(
    "standbyThreads",
    2,
    "Threads of the executor-wide pool standby copies poll storage and fetch files on (one pool per executor " +
      "JVM, apart from transferThreads, so a store's own restore never waits for a standby's fetch).",
    min = 1,
    max = 64
  )
  val StandbyMaxBytes: ConfEntry[Long] = size(
    "standbyMaxBytes",
    8L << 30,
    "Local disk all standby copies of one executor may hold together: a standby whose snapshot would take " +
      "them past it is not fetched (and counted as skipped). Accepts Spark's byte forms (64m, 64mb, 1g).",
    min = 0
  )

  val All: Seq[ConfEntry[_]] = Seq(
    MaxSnapshotLagDeltas,
    CloseUploadTimeoutMs,
    MaxPendingBytes,
    LocalDir,
    LocalRetentionMs,
    DeltaCompression,
    TransferThreads,
    RangedDownloadPartBytes,
    DeltaUploadPartBytes,
    OrphanGracePeriodMs,
    OrphanSweepEveryCleanups,
    MemoryBytes,
    WriteBufferBytes,
    SstCompression,
    StandbyReplicas,
    StandbyThreads,
    StandbyMaxBytes
  )

  /** Checks every lineagestore key in `confs`; fails on the first bad value or on an unknown key. The one
    * check: executors run it when a store starts, the driver (LineageSessionExtensions) when a streaming
    * query is planned, so both say the same.
    */
  def validate(confs: Map[String, String]): Unit = {
    val known = All.map(_.key).toSet
    confs.keys.filter(_.startsWith(Prefix)).filterNot(known).toSeq.sorted.headOption.foreach { k =>
      val hint = nearestKey(k).map(n => s" Did you mean $n?").getOrElse("")
      throw new InvalidConfigException(
        s"unknown configuration key $k.$hint Known keys: ${All.map(_.key).sorted.mkString(", ")}."
      )
    }
    All.foreach(_.from(confs))
  }

  /** The known key nearest to `key` by edit distance (ignoring case), if near enough to be a typo of it: at
    * most a third of the name's letters differ (at least 2 allowed).
    */
  def nearestKey(key: String): Option[String] = {
    val name = key.stripPrefix(Prefix).toLowerCase
    val (best, distance) = All.map(e => e.key -> editDistance(name, e.name.toLowerCase)).minBy(_._2)
    if (distance <= math.max(2, name.length / 3)) Some(best) else None
  }

  /** Levenshtein distance: insertions, deletions and substitutions of one character each count 1. */
  private def editDistance(a: String, b: String): Int = {
    var previous = Array.tabulate(b.length + 1)(identity)
    for (i <- 1 to a.length) {
      val current = new Array[Int](b.length + 1)
      current(0) = i
      for (j <- 1 to b.length) {
        val substitution = previous(j - 1) + (if (a(i - 1) == b(j - 1)) 0 else 1)
        current(j) = math.min(substitution, math.min(previous(j), current(j - 1)) + 1)
      }
      previous = current
    }
    previous(b.length)
  }

  /** For callers outside Scala (the Python options' cross-check): null if `value` is allowed for `key`, else
    * the error message [[validate]] would raise.
    */
  def problemOf(key: String, value: String): String =
    try { validate(Map(key -> value)); null }
    catch { case e: InvalidConfigException => e.getMessage }

  /** Markdown reference of every key, for docs/configuration.md. */
  def markdown: String = {
    val rows = All.map { e =>
      s"| `${e.key}` | ${e.typeName} | `${e.defaultText}` | ${e.doc} Allowed: ${e.allowed}. |"
    }
    ("# Configuration\n\n" +
      s"Generated from `io.lineagestore.config.LineageConf` by `${GenerateDocs.Command}`" +
      " (which also writes the Python options, `python/lineagestore/_options_generated.py`);" +
      " a test fails when this file is stale.\n\n" +
      "From Python, `lineagestore.configure(builder, max_pending_bytes=\"64m\")` or " +
      "`lineagestore.LineageOptions(...)` set these keys with the same checks (field names are the key " +
      "names in snake_case).\n\n" +
      "Sizes and durations take the forms Spark's own settings take (`256m`, `256mb`, `1g`; `30s`, `5min`, " +
      "`1h`; a bare number is bytes or milliseconds). Every key under the prefix is checked on the driver " +
      "when a stateful streaming query is planned, before its first batch runs (by " +
      "`io.lineagestore.spark.LineageSessionExtensions`, which `lineagestore.configure` installs), and again " +
      "by each store on the executors: an unknown key fails the query naming the nearest known key (" +
      "`unknown configuration key ...maxPendingByte. Did you mean ...maxPendingBytes?`).\n\n" +
      "| key | type | default | meaning |\n|---|---|---|---|\n" + rows.mkString("\n") + "\n")
  }
}

/** Writes docs/configuration.md and python/lineagestore/_options_generated.py (argument: the repository root,
  * default the current directory). Run it after changing [[LineageConf.All]]; ConfigDocsSuite fails until
  * then.
  */
object GenerateDocs {
  val Command = "dev/sbt \"core/runMain io.lineagestore.config.GenerateDocs\""

  /** Repository-relative path -> content of every generated file. */
  def files: Seq[(String, String)] = Seq(
    "docs/configuration.md" -> LineageConf.markdown,
    PythonOptions.Path -> PythonOptions.source
  )

  def main(args: Array[String]): Unit = {
    val root = java.nio.file.Paths.get(args.headOption.getOrElse("."))
    for ((rel, content) <- files) {
      val out = root.resolve(rel)
      java.nio.file.Files.createDirectories(out.toAbsolutePath.getParent)
      java.nio.file.Files.writeString(out, content)
      println(s"wrote $out")
    }
  }
}

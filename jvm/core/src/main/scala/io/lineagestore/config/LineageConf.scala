package io.lineagestore.config

/** Thrown for a configuration value that is malformed or out of range; names the key and what is allowed. */
class InvalidConfigException(message: String) extends IllegalArgumentException(message)

/** One configuration key, declared once: name, default, documentation and check. Python's options object and
  * docs/configuration.md are generated from these declarations.
  */
final case class ConfEntry[T](
    name: String,
    default: T,
    doc: String,
    typeName: String,
    parse: String => Option[T],
    check: T => Option[String]
) {
  def key: String = LineageConf.Prefix + name

  /** The value in `confs` (Spark's forwarded state-store SQL confs), or the default; fails on a bad value. */
  def from(confs: Map[String, String]): T = confs.get(key) match {
    case None      => default
    case Some(raw) =>
      val v = parse(raw.trim).getOrElse(
        throw new InvalidConfigException(
          s"$key='$raw' is not a valid $typeName. $doc Default: ${show(default)}."
        )
      )
      check(v).foreach(problem => throw new InvalidConfigException(s"$key='$raw' is not allowed: $problem."))
      v
  }

  def show(v: T): String = v.toString
  def defaultText: String = show(default)
}

/** Every lineagestore configuration key. Keys are `spark.sql.streaming.stateStore.lineagestore.<name>`. */
object LineageConf {
  val Prefix = "spark.sql.streaming.stateStore.lineagestore."

  private def long(name: String, default: Long, doc: String, min: Long, max: Long = Long.MaxValue) =
    ConfEntry[Long](
      name,
      default,
      doc,
      "integer",
      s => scala.util.Try(parseSize(s)).toOption,
      v => if (v < min || v > max) Some(s"must be between $min and $max") else None
    )

  private def int(name: String, default: Int, doc: String, min: Int, max: Int) =
    ConfEntry[Int](
      name,
      default,
      doc,
      "integer",
      s => s.toIntOption,
      v => if (v < min || v > max) Some(s"must be between $min and $max") else None
    )

  private def string(name: String, default: String, doc: String) =
    ConfEntry[String](name, default, doc, "string", s => Some(s), _ => None)

  /** Accepts plain numbers and k/m/g suffixes (powers of 1024), e.g. `512m`. */
  def parseSize(s: String): Long = {
    val t = s.trim.toLowerCase
    val (num, mult) = t.lastOption match {
      case Some('k') => (t.dropRight(1), 1L << 10)
      case Some('m') => (t.dropRight(1), 1L << 20)
      case Some('g') => (t.dropRight(1), 1L << 30)
      case _         => (t, 1L)
    }
    Math.multiplyExact(num.trim.toLong, mult)
  }

  val MaxPendingBytes: ConfEntry[Long] = long(
    "maxPendingBytes",
    1L << 30,
    "Upper bound on the uncommitted changes one batch of one partition may hold in memory (keys and values, " +
      "before commit). Accepts k/m/g suffixes.",
    min = 1L << 20
  )
  val LocalDir: ConfEntry[String] = string(
    "localDir",
    "",
    "Executor-local directory for RocksDB instances and frozen snapshots. Empty: java.io.tmpdir."
  )
  val LocalRetentionMs: ConfEntry[Long] = long(
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
    "string",
    s => Some(s.trim.toLowerCase),
    v =>
      if (io.lineagestore.format.DeltaCodec.byName(v).isEmpty)
        Some(s"must be one of ${io.lineagestore.format.DeltaCodec.names.mkString(", ")}")
      else None
  )
  val TransferThreads: ConfEntry[Int] = int(
    "transferThreads",
    8,
    "Parallel uploads and downloads within one store.",
    min = 1,
    max = 256
  )
  val OrphanGracePeriodMs: ConfEntry[Long] = long(
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
  val MemoryBytes: ConfEntry[Long] = long(
    "memoryBytes",
    512L << 20,
    "RocksDB memory of all stores of one executor together: one shared block cache, with memtables charged " +
      "to it (at most half). Read once per executor JVM. Accepts k/m/g suffixes.",
    min = 8L << 20
  )
  val WriteBufferBytes: ConfEntry[Long] = long(
    "writeBufferBytes",
    32L << 20,
    "RocksDB memtable size per store. Accepts k/m/g suffixes.",
    min = 1L << 16
  )

  val All: Seq[ConfEntry[_]] = Seq(
    MaxPendingBytes,
    LocalDir,
    LocalRetentionMs,
    DeltaCompression,
    TransferThreads,
    OrphanGracePeriodMs,
    OrphanSweepEveryCleanups,
    MemoryBytes,
    WriteBufferBytes
  )

  /** Checks every lineagestore key in `confs`; fails on the first bad value or on an unknown key. */
  def validate(confs: Map[String, String]): Unit = {
    val known = All.map(_.key).toSet
    confs.keys.filter(_.startsWith(Prefix)).filterNot(known).toSeq.sorted.headOption.foreach { k =>
      throw new InvalidConfigException(
        s"unknown configuration key $k. Known keys: ${All.map(_.key).sorted.mkString(", ")}."
      )
    }
    All.foreach(_.from(confs))
  }

  /** Markdown reference of every key, for docs/configuration.md. */
  def markdown: String = {
    val rows = All.map(e => s"| `${e.key}` | ${e.typeName} | `${e.defaultText}` | ${e.doc} |")
    ("# Configuration\n\n" +
      "Generated from `io.lineagestore.config.LineageConf` by `dev/sbt core/runMain io.lineagestore.config.GenerateDocs`;" +
      " a test fails when this file is stale.\n\n" +
      "| key | type | default | meaning |\n|---|---|---|---|\n" + rows.mkString("\n") + "\n")
  }
}

/** Writes docs/configuration.md (argument: output path). */
object GenerateDocs {
  def main(args: Array[String]): Unit = {
    val out = java.nio.file.Paths.get(args.headOption.getOrElse("docs/configuration.md"))
    java.nio.file.Files.createDirectories(out.toAbsolutePath.getParent)
    java.nio.file.Files.writeString(out, LineageConf.markdown)
  }
}

package io.lineagestore.engine

/** The block compression of the SST files a store's RocksDB writes (flushes and compactions), by the name
  * `sstCompression` takes. Each block records its own compression, so files written under another choice
  * (snapshots of an earlier run, before this setting existed: Snappy, RocksDB's default) stay readable and a
  * change takes effect on the files written after it.
  *
  * LZ4 by default, as Spark's RocksDB provider: with RocksDB's default, Snappy, our flush threads spent about
  * twice the CPU of Spark's on the same bytes in the scale benchmark (docs/benchmarks.md). zstd trades flush
  * and compaction CPU for smaller files (storage and transfer) where values compress.
  *
  * Names only: configuration and docs generation read them without RocksDB on the class path;
  * [[RocksDbTuning.compressionType]] maps a name to RocksDB's type.
  */
object SstCompression {
  val Lz4 = "lz4"
  val Snappy = "snappy"
  val Zstd = "zstd"
  val NoCompression = "none"
  val names: Seq[String] = Seq(Lz4, Snappy, Zstd, NoCompression)
  val Default: String = Lz4
}

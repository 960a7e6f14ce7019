package io.lineagestore.engine

import org.rocksdb.{CompressionType, LRUCache, RocksDB, WriteBufferManager}

import io.lineagestore.config.LineageConf

/** Tuning for the local RocksDB instances (values from `LineageConf`: `memoryBytes`, `writeBufferBytes`,
  * `sstCompression`, one of the names [[LineageConf.SstCompression]] declares). `memoryBytes` bounds the
  * block cache AND the memtables of all stores of one executor together (one shared cache, memtables charged
  * to it), so the memory RocksDB takes does not grow with the number of partitions an executor holds.
  * `levelBaseBytes` is RocksDB's level base where [[CompactionTrigger]] keeps RocksDB's own (not a setting:
  * tests shrink it to give a store of a few MiB the levels a larger one has).
  */
final case class RocksDbTuning(
    memoryBytes: Long,
    writeBufferBytes: Long,
    sstCompression: String = LineageConf.SstCompression.default,
    levelBaseBytes: Long = CompactionTrigger.DefaultLevelBase
)

object RocksDbTuning {

  /** The memtable Bloom filter's share of a memtable: 1.3 MB of a 64 MiB one, about 24 bits per key at
    * 100-byte values (RocksDB probes it 6 times: a false positive well under 1%), more at larger values.
    */
  val MemtableBloomRatio = 0.02

  /** RocksDB's type for a name [[LineageConf.SstCompression]] takes (the configuration checked it; the
    * configuration's list decides which names are valid, SstCompressionSuite checks each maps here).
    */
  def compressionType(name: String): CompressionType = name match {
    case "lz4"    => CompressionType.LZ4_COMPRESSION
    case "snappy" => CompressionType.SNAPPY_COMPRESSION
    case "zstd"   => CompressionType.ZSTD_COMPRESSION
    case "none"   => CompressionType.NO_COMPRESSION
    case other    =>
      throw new IllegalArgumentException(
        s"unknown SST compression '$other': one of ${LineageConf.SstCompression.choices.mkString(", ")}"
      )
  }
}

/** The executor-wide RocksDB memory: one LRU cache and a write-buffer manager charging memtables to it. */
object SharedRocksDbMemory {
  private var current: Option[(Long, LRUCache, WriteBufferManager)] = None

  /** The shared cache and manager for `bytes`; the first caller's size wins for the JVM's lifetime. */
  def apply(bytes: Long): (LRUCache, WriteBufferManager) = synchronized {
    val (_, cache, wbm) = current.getOrElse {
      RocksDB.loadLibrary()
      val cache = new LRUCache(bytes)
      val created = (bytes, cache, new WriteBufferManager(bytes / 2, cache))
      current = Some(created)
      created
    }
    (cache, wbm)
  }
}

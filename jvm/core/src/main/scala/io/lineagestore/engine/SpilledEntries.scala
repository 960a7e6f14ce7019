package io.lineagestore.engine

import java.io.File
import java.nio.file.Files
import java.util.concurrent.locks.ReentrantReadWriteLock

import scala.collection.mutable

import org.rocksdb._

/** The entries a batch in progress moved out of memory (see [[PendingWrites]], "spill"): sorted runs, each
  * written as one SST by `SstFileWriter` ([[SstRunFile]]) and ingested into a RocksDB of the batch's own in
  * `dir`, where a later run shadows an earlier one's entry of the same key (ingestion gives each run a newer
  * sequence number). Never the store's RocksDB: uncommitted changes reach committed state only when the batch
  * is applied, which reads them back from here ([[foreach]]).
  *
  * Each entry is what the batch holds for its key, behind a tag byte: a value ([[ValueTag]]), a delete
  * ([[DeletedTag]]), or changes kept one by one ([[ChangesTag]], encoded by the writer). A delete is a value
  * too, because a RocksDB delete would look, to a lookup, like a key this batch never wrote, and the batch
  * must answer "deleted" there, not fall through to the committed value.
  *
  * Thread-safety: guarded by a read-write lock. The task thread writes runs and reads; once the batch is
  * committed, the apply thread reads it back and [[close]]s it while the task thread may still look a key up
  * in it (the batch in flight): reads hold the read lock and answer "not here" once closed (the batch is then
  * in the store's RocksDB, where the caller looks next), so a closed RocksDB is never touched.
  */
final class SpilledEntries(val dir: File) extends AutoCloseable {
  import SpilledEntries._

  private val lock = new ReentrantReadWriteLock
  private var closed = false // guarded by lock
  private var runs = 0 // task thread only (writes)
  private var entries = 0L
  private var fileBytes = 0L
  private val openIterators = mutable.Set.empty[RocksIterator] // guarded by lock
  private var filters = Vector.empty[KeyFilter] // each run's keys; replaced under the write lock
  private val runsDir = new File(dir, "runs")

  RocksDB.loadLibrary()
  private val cache = new LRUCache(CacheBytes)
  private val bloom = new BloomFilter(10)
  private val options = new Options()
    .setCreateIfMissing(true)
    .setCompressionType(CompressionType.LZ4_COMPRESSION)
    .setTableFormatConfig(new BlockBasedTableConfig().setBlockCache(cache).setFilterPolicy(bloom))
    // the runs are read, never rewritten: a compaction would write the batch again for nothing, and without
    // compactions the many runs of a large batch must not count as a backlog that stalls ingestion
    .setDisableAutoCompactions(true)
    .setLevel0SlowdownWritesTrigger(1 << 20)
    .setLevel0StopWritesTrigger(1 << 20)
  private val readOptions = new ReadOptions()
  private val db: RocksDB =
    try {
      Files.createDirectories(runsDir.toPath)
      RocksDB.open(options, new File(dir, "db").getAbsolutePath)
    } catch {
      case e: Throwable => // nothing to spill into: free what was made, and leave no directory behind
        readOptions.close(); options.close(); bloom.close(); cache.close()
        LocalFiles.deleteRecursively(dir)
        throw e
    }

  /** Runs written so far. */
  def runCount: Int = runs

  /** Entries written over every run (a key written to several runs counts in each). */
  def entryCount: Long = entries

  /** Bytes of the runs' SST files. */
  def bytesOnDisk: Long = fileBytes

  /** Writes one run of about `expectedKeys` keys: `fill` must give keys in ascending bytewise order, each
    * once.
    */
  def writeRun(expectedKeys: Int)(fill: RunWriter => Unit): Unit = {
    val filter = new KeyFilter(expectedKeys)
    val file = new File(runsDir, s"run-$runs.sst")
    val writer = new SstRunFile(file, options)
    try {
      def entry(key: Array[Byte], tag: Byte, from: Array[Byte], offset: Int, length: Int): Unit = {
        writer.put(key, tag, from, offset, length)
        filter.add(key)
      }
      fill(new RunWriter {
        def put(key: Array[Byte], from: Array[Byte], offset: Int, length: Int): Unit =
          entry(key, ValueTag, from, offset, length)
        def delete(key: Array[Byte]): Unit = entry(key, DeletedTag, null, 0, 0)
        def changes(key: Array[Byte], encoded: Array[Byte]): Unit =
          entry(key, ChangesTag, encoded, 0, encoded.length)
      })
      val written = writer.entries
      if (written > 0) {
        fileBytes += writer.finish()
        val ingest = new IngestExternalFileOptions().setMoveFiles(true)
        try
          withWriteLock {
            db.ingestExternalFile(java.util.Collections.singletonList(file.getAbsolutePath), ingest)
            filters :+= filter
          }
        finally ingest.close()
        runs += 1
        entries += written
      }
    } finally {
      writer.close()
      file.delete() // moved into the RocksDB when ingested; left only by a run that failed
    }
  }

  /** The key's spilled entry, tagged (null: none, or this batch is closed). */
  def get(key: Array[Byte]): Array[Byte] =
    withReadLock(if (closed || !filters.exists(_.mightContain(key))) null else db.get(readOptions, key))

  /** Entries with keys in [from, until) (until null: unbounded), ascending, tagged; closed when exhausted or
    * by the caller, and ended early if the batch is closed under it.
    */
  def range(from: Array[Byte], until: Array[Byte]): CloseableIterator[(Array[Byte], Array[Byte])] = {
    val it = withWriteLock {
      if (closed) null
      else { val i = db.newIterator(readOptions); openIterators += i; i.seek(from); i }
    }
    new CloseableIterator[(Array[Byte], Array[Byte])] {
      private var head: (Array[Byte], Array[Byte]) = _
      private var done = it == null
      advance()
      private def advance(): Unit = if (!done) {
        head = withReadLock {
          if (closed || !it.isValid) null
          else {
            val k = it.key()
            if (until != null && PendingWrites.Order.compare(k, until) >= 0) null
            else { val kv = (k, it.value()); it.next(); kv }
          }
        }
        if (head == null) close()
      }
      override def hasNext: Boolean = head != null
      override def next(): (Array[Byte], Array[Byte]) = {
        if (head == null) throw new NoSuchElementException
        val r = head
        advance()
        r
      }
      override def close(): Unit = if (!done) {
        done = true
        head = null
        withWriteLock(if (openIterators.remove(it)) it.close())
      }
    }
  }

  /** Every entry in key order (the batch read back to be applied). */
  def foreach(f: (Array[Byte], Array[Byte]) => Unit): Unit = {
    val it = range(Array.emptyByteArray, null)
    try it.foreach { case (k, v) => f(k, v) }
    finally it.close()
  }

  /** Closes the RocksDB and deletes `dir`; later reads answer "not here". Idempotent. */
  override def close(): Unit = {
    val wasOpen = withWriteLock {
      val open = !closed
      if (open) {
        closed = true
        openIterators.foreach(_.close())
        openIterators.clear()
        db.close()
      }
      open
    }
    if (wasOpen) {
      readOptions.close(); options.close(); bloom.close(); cache.close()
      LocalFiles.deleteRecursively(dir)
    }
  }

  private def withReadLock[T](body: => T): T = {
    lock.readLock().lock()
    try body
    finally lock.readLock().unlock()
  }

  private def withWriteLock[T](body: => T): T = {
    lock.writeLock().lock()
    try body
    finally lock.writeLock().unlock()
  }
}

object SpilledEntries {

  /** The first byte of a spilled entry: the key was deleted. */
  val DeletedTag: Byte = 0

  /** The first byte of a spilled entry: the key's value follows. */
  val ValueTag: Byte = 1

  /** The first byte of a spilled entry: the key's changes follow, each kept (their encoding is the writer's).
    */
  val ChangesTag: Byte = 2

  // the runs' block cache: they are read by point lookups of keys mostly not there (Bloom filters, held by
  // each run's table reader, answer those) and once in order at apply; the page cache serves the rest
  private val CacheBytes = 8L << 20

  /** Writes one run's entries, in ascending key order. */
  trait RunWriter {
    def put(key: Array[Byte], from: Array[Byte], offset: Int, length: Int): Unit
    def delete(key: Array[Byte]): Unit
    def changes(key: Array[Byte], encoded: Array[Byte]): Unit
  }
}

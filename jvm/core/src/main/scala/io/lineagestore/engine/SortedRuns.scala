package io.lineagestore.engine

import java.io.File
import java.nio.ByteBuffer
import java.nio.file.Files

import scala.collection.mutable.ArrayBuffer

import org.rocksdb._

/** One SST file written by RocksDB's `SstFileWriter`, keys in ascending bytewise order, each once. The one
  * place lineagestore writes SST files itself: the spilled runs of a large batch ([[SpilledEntries]]) and the
  * sorted files of a fresh start ([[SortedRunWriter]]) both write through it. `options` decide the table
  * format and compression: a file meant for a store's RocksDB is written with that RocksDB's own options, so
  * ingesting it leaves the store as if RocksDB had written the file.
  *
  * Not thread-safe: one writer per thread. [[close]] releases the native writer whether or not the file was
  * finished (an unfinished file is deleted).
  */
final class SstRunFile(val file: File, options: Options) extends AutoCloseable {
  RocksDB.loadLibrary()
  private val envOptions = new EnvOptions()
  private val writer = new SstFileWriter(envOptions, options)
  private var keyBuffer = ByteBuffer.allocateDirect(256)
  private var valueBuffer = ByteBuffer.allocateDirect(4096)
  private var finished = false
  private var written = 0L
  try writer.open(file.getAbsolutePath)
  catch { case t: Throwable => writer.close(); envOptions.close(); throw t }

  /** Entries written so far. */
  def entries: Long = written

  /** Writes `key` -> `value` (ascending keys; RocksDB refuses a key not above the one before). */
  def put(key: Array[Byte], value: Array[Byte]): Unit = put(key, -1, value, 0, value.length)

  /** Writes `key` -> [`tag` when >= 0] + from[offset, offset + length). */
  def put(key: Array[Byte], tag: Int, from: Array[Byte], offset: Int, length: Int): Unit = {
    val valueLength = length + (if (tag >= 0) 1 else 0)
    if (keyBuffer.capacity < key.length) keyBuffer = ByteBuffer.allocateDirect(key.length * 2)
    if (valueBuffer.capacity < valueLength) valueBuffer = ByteBuffer.allocateDirect(valueLength * 2)
    keyBuffer.clear(); keyBuffer.put(key).flip()
    valueBuffer.clear()
    if (tag >= 0) valueBuffer.put(tag.toByte)
    if (from != null) valueBuffer.put(from, offset, length)
    valueBuffer.flip()
    writer.put(keyBuffer, valueBuffer)
    written += 1
  }

  /** Ends the file (RocksDB refuses to finish a file without entries: the caller skips those). Returns its
    * size in bytes.
    */
  def finish(): Long = {
    writer.finish()
    finished = true
    file.length()
  }

  override def close(): Unit = {
    writer.close()
    envOptions.close()
    if (!finished) file.delete()
  }
}

/** Turns puts in any order into sorted, non-overlapping SST files for a store's RocksDB, to write a fresh
  * start's state as files instead of a batch of puts. Nothing writes a store this way yet: docs/format.md
  * ("Fresh starts") still records a fresh start as a delta holding the whole state. Puts are buffered up to
  * `bufferBytes`; a full buffer is sorted and written as a run (an uncompressed SST in `dir`). [[finish]]
  * then writes the output files with the store's `options` (the buffer itself when nothing was spilled, else
  * a merge of the runs), each up to about `fileBytes`, and deletes the runs. Keys are the store's full keys
  * (column-family prefix included, [[io.lineagestore.format.FamilyKeys]]): families are key ranges of one
  * keyspace, so one sorted stream serves them all.
  *
  * A key put twice is refused by name: the input is a state, one value per key, and which of two values
  * should win is not this writer's to guess.
  *
  * Not thread-safe: one thread puts and finishes. [[close]] deletes whatever is left in `dir` except the
  * files [[finish]] returned.
  */
final class SortedRunWriter(
    dir: File,
    options: Options,
    bufferBytes: Long = SortedRunWriter.DefaultBufferBytes,
    fileBytes: Long = SortedRunWriter.DefaultFileBytes
) extends AutoCloseable {
  import SortedRunWriter._
  require(
    bufferBytes > 0 && fileBytes > 0,
    s"buffer and file bytes must be positive: $bufferBytes, $fileBytes"
  )
  Files.createDirectories(dir.toPath)
  RocksDB.loadLibrary()

  private val keys = ArrayBuffer.empty[Array[Byte]]
  private val values = ArrayBuffer.empty[Array[Byte]]
  private var buffered = 0L
  private val runs = ArrayBuffer.empty[File]
  private var outputs = 0
  private var total = 0L
  private var done = false
  // runs are read once, by the merge: written fast, not small
  private lazy val runOptions = new Options().setCompressionType(CompressionType.NO_COMPRESSION)

  /** Entries put so far. */
  def entryCount: Long = total

  /** Runs spilled to `dir` so far. */
  def runCount: Int = runs.size

  def put(key: Array[Byte], value: Array[Byte]): Unit = {
    if (done) throw new IllegalStateException("put after finish")
    keys += key
    values += value
    total += 1
    buffered += key.length + value.length + EntryOverheadBytes
    if (buffered >= bufferBytes) spill()
  }

  /** The buffer's entries in key order, as indices into `keys`/`values`; a key put twice is refused. */
  private def sortedBuffer(): Array[Int] = {
    val order = (0 until keys.size).toArray.sortWith((a, b) => Order.compare(keys(a), keys(b)) < 0)
    var i = 1
    while (i < order.length) {
      if (Order.compare(keys(order(i - 1)), keys(order(i))) == 0) duplicate(keys(order(i)))
      i += 1
    }
    order
  }

  private def spill(): Unit = if (keys.nonEmpty) {
    val run = new File(dir, s"run-${runs.size}.sst")
    val out = new SstRunFile(run, runOptions)
    try {
      sortedBuffer().foreach(i => out.put(keys(i), values(i)))
      out.finish()
    } finally out.close()
    runs += run
    keys.clear(); values.clear(); buffered = 0
  }

  /** Writes the output files and returns them in key order (none when nothing was put). */
  def finish(): Seq[File] = {
    if (done) throw new IllegalStateException("finish called twice")
    done = true
    val out = new Outputs
    try {
      if (runs.isEmpty) {
        sortedBuffer().foreach(i => out.put(keys(i), values(i)))
        keys.clear(); values.clear()
      } else {
        spill()
        mergeRuns(out)
      }
      out.finish()
    } finally {
      out.close()
      runs.foreach(_.delete())
    }
  }

  /** The output files, each rolled over past `fileBytes` (between two keys: files never overlap). */
  private final class Outputs extends AutoCloseable {
    private var current: SstRunFile = null
    private var bytes = 0L
    private val files = ArrayBuffer.empty[File]
    def put(key: Array[Byte], value: Array[Byte]): Unit = {
      if (current == null) {
        current = new SstRunFile(new File(dir, f"sorted-$outputs%06d.sst"), options)
        outputs += 1
      }
      current.put(key, value)
      bytes += key.length + value.length
      if (bytes >= fileBytes) roll()
    }
    private def roll(): Unit = if (current != null) {
      current.finish()
      files += current.file
      current.close()
      current = null
      bytes = 0
    }
    def finish(): Seq[File] = { roll(); files.toSeq }
    override def close(): Unit = if (current != null) current.close()
  }

  /** Merges the sorted runs into `out` (a k-way merge by key; the runs never hold a key twice between them).
    */
  private def mergeRuns(out: Outputs): Unit = {
    val readOptions = new ReadOptions().setFillCache(false)
    val readers = runs.map { f =>
      val r = new SstFileReader(runOptions); r.open(f.getAbsolutePath); r
    }
    val iterators = readers.map { r =>
      val it = r.newIterator(readOptions); it.seekToFirst(); it
    }
    try {
      val heads = new java.util.PriorityQueue[(Array[Byte], Int)](
        math.max(1, iterators.size),
        (a: (Array[Byte], Int), b: (Array[Byte], Int)) => Order.compare(a._1, b._1)
      )
      iterators.zipWithIndex.foreach { case (it, i) => if (it.isValid) heads.add((it.key(), i)) }
      var last: Array[Byte] = null
      while (!heads.isEmpty) {
        val (key, i) = heads.poll()
        if (last != null && Order.compare(last, key) == 0) duplicate(key)
        val it = iterators(i)
        out.put(key, it.value())
        last = key
        it.next()
        if (it.isValid) heads.add((it.key(), i))
      }
      iterators.foreach(_.status())
    } finally {
      iterators.foreach(_.close())
      readers.foreach(_.close())
      readOptions.close()
    }
  }

  private def duplicate(key: Array[Byte]): Nothing =
    throw new IllegalArgumentException(
      s"key ${hex(key)} was put twice into one sorted write (the state written has one value per key): the " +
        "source gave a key twice, e.g. two old partitions holding the same key"
    )

  override def close(): Unit = {
    done = true
    keys.clear(); values.clear()
    runs.foreach(_.delete())
    runOptions.close()
  }
}

object SortedRunWriter {

  /** Bytes of puts held in memory before a run is written: a few per store being written, so a rewrite with a
    * dozen stores open stays within an ordinary heap.
    */
  val DefaultBufferBytes: Long = 8L << 20

  /** About how large an output file grows before the next one starts (RocksDB's own target for a level). */
  val DefaultFileBytes: Long = 64L << 20

  // what an entry costs beyond its bytes: two array headers and two references
  private val EntryOverheadBytes = 48

  private[engine] val Order: java.util.Comparator[Array[Byte]] = (a, b) =>
    java.util.Arrays.compareUnsigned(a, b)

  private def hex(b: Array[Byte]): String = {
    val shown = b.take(64).map(x => f"${x & 0xff}%02x").mkString
    if (b.length > 64) s"$shown... (${b.length} bytes)" else shown
  }
}

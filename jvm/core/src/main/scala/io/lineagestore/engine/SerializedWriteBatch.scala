package io.lineagestore.engine

import java.util.Arrays

import org.rocksdb.WriteBatch

/** Builds a RocksDB write batch as the bytes of RocksDB's own serialized form, handed to RocksDB in one call
  * (`new WriteBatch(bytes)`), instead of one JNI call per key: at a hundred thousand keys per commit the
  * calls themselves were a fifth of the commit (docs/benchmarks.md, the scale profile).
  *
  * The form, from RocksDB's `db/write_batch.cc` (stable: it is also what a WAL record holds): a fixed64
  * sequence number (RocksDB assigns the real one on write), a fixed32 record count (both little-endian), then
  * per record a type byte (`kTypeValue` 1 with key and value, `kTypeDeletion` 0 with the key only; the
  * default column family), each string as a varint32 length and its bytes. Not thread-safe.
  */
final class SerializedWriteBatch(initialBytes: Int = 1 << 16) {
  import SerializedWriteBatch._

  private var buf = new Array[Byte](math.max(initialBytes, HeaderBytes))
  private var size = HeaderBytes
  private var count = 0

  def put(key: Array[Byte], value: Array[Byte]): Unit = put(key, value, 0, value.length)

  /** Puts the value `length` bytes of `from` at `offset`. */
  def put(key: Array[Byte], from: Array[Byte], offset: Int, length: Int): Unit = {
    ensure(1 + 10 + key.length + length)
    buf(size) = TypeValue; size += 1
    string(key, 0, key.length); string(from, offset, length)
    count += 1
  }

  def delete(key: Array[Byte]): Unit = {
    ensure(1 + 5 + key.length)
    buf(size) = TypeDeletion; size += 1
    string(key, 0, key.length)
    count += 1
  }

  def isEmpty: Boolean = count == 0

  /** Bytes of the serialized form so far. */
  def sizeBytes: Int = size

  /** Drops every record, keeping the buffer for the next ones. */
  def clear(): Unit = { size = HeaderBytes; count = 0 }

  /** A RocksDB write batch of the records so far (the caller closes it). */
  def toWriteBatch: WriteBatch = {
    val bytes = Arrays.copyOf(buf, size)
    var i = 0
    while (i < 4) { bytes(8 + i) = (count >>> (8 * i)).toByte; i += 1 } // count: fixed32 at offset 8
    new WriteBatch(bytes)
  }

  private def string(b: Array[Byte], offset: Int, length: Int): Unit = {
    var n = length
    while ((n & ~0x7f) != 0) { buf(size) = ((n & 0x7f) | 0x80).toByte; size += 1; n >>>= 7 }
    buf(size) = n.toByte; size += 1
    System.arraycopy(b, offset, buf, size, length)
    size += length
  }

  private def ensure(more: Int): Unit =
    if (size + more > buf.length) buf = Arrays.copyOf(buf, math.max(buf.length * 2, size + more))
}

object SerializedWriteBatch {
  private val HeaderBytes = 12 // sequence fixed64 + count fixed32
  private val TypeDeletion: Byte = 0
  private val TypeValue: Byte = 1
}

/** Records written into RocksDB in chunks of about `chunkBytes` each (one buffer, reused): a committed batch
  * or a replayed delta of any size then passes through memtables of their configured size (RocksDB switches
  * memtables only between writes, so one write of a whole 10M-key first batch made a 480 MB memtable per
  * store, past `memoryBytes`, and left its flush to the batches after it), and never needs one array of its
  * whole size (a JVM array stops at 2 GiB). Writing in chunks gives up no atomicity a reader can see: until
  * the last chunk is written, reads of the batch's keys look through the batch in flight ([[LocalRocksDb]]),
  * and a failed chunk leaves the store to be reloaded from the blob store, as a failed single write did. Not
  * thread-safe.
  */
final class ChunkedWriteBatch(chunkBytes: Int, write: SerializedWriteBatch => Unit) {
  // room for a chunk and its last record, so the buffer does not double for the last one
  private val records = new SerializedWriteBatch(chunkBytes + (1 << 16))

  def put(key: Array[Byte], value: Array[Byte]): Unit = { records.put(key, value); writeIfFull() }

  /** Puts the value `length` bytes of `from` at `offset`. */
  def put(key: Array[Byte], from: Array[Byte], offset: Int, length: Int): Unit = {
    records.put(key, from, offset, length); writeIfFull()
  }
  def delete(key: Array[Byte]): Unit = { records.delete(key); writeIfFull() }

  /** Writes what is left. */
  def finish(): Unit = if (!records.isEmpty) { write(records); records.clear() }

  private def writeIfFull(): Unit = if (records.sizeBytes >= chunkBytes) finish()
}

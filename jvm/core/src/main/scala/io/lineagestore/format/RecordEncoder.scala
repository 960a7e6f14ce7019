package io.lineagestore.format

import java.io.OutputStream

/** Encodes a delta's records, big-endian as [[DeltaFile]]'s layout says, into one reused buffer and hands the
  * codec's stream whole chunks: a `DataOutputStream` over a `BufferedOutputStream` made a synchronized call
  * per byte of every length and type (six per record), a tenth of a commit's time at a hundred thousand
  * records (docs/benchmarks.md, the scale profile). [[DeltaFile.Writer]]'s encoder. Not thread-safe.
  */
private[format] final class RecordEncoder(out: OutputStream, bufferBytes: Int = 1 << 16) {
  private val buf = new Array[Byte](bufferBytes)
  private var size = 0

  private var records = 0L

  def put(key: Array[Byte], value: Array[Byte]): Unit = {
    byte(DeltaRecordKind.Put.code); lengthAndBytes(key); lengthAndBytes(value); records += 1
  }

  def delete(key: Array[Byte]): Unit = {
    byte(DeltaRecordKind.Delete.code); lengthAndBytes(key); records += 1
  }

  def merge(key: Array[Byte], elements: Array[Byte]): Unit = {
    byte(DeltaRecordKind.Merge.code); lengthAndBytes(key); lengthAndBytes(elements); records += 1
  }

  def recordCount: Long = records

  /** The end record (with the record count), and everything buffered handed to the stream. */
  def end(): Unit = { byte(DeltaFile.End); long(records); drain() }

  def byte(b: Int): Unit = {
    if (size == buf.length) drain()
    buf(size) = b.toByte
    size += 1
  }

  def int(v: Int): Unit = {
    if (size + 4 > buf.length) drain()
    buf(size) = (v >>> 24).toByte
    buf(size + 1) = (v >>> 16).toByte
    buf(size + 2) = (v >>> 8).toByte
    buf(size + 3) = v.toByte
    size += 4
  }

  def long(v: Long): Unit = { int((v >>> 32).toInt); int(v.toInt) }

  /** The length (i32) and the bytes of `b`. */
  def lengthAndBytes(b: Array[Byte]): Unit = {
    int(b.length)
    if (b.length > buf.length - size) {
      drain()
      if (b.length > buf.length) { out.write(b); return }
    }
    System.arraycopy(b, 0, buf, size, b.length)
    size += b.length
  }

  /** Hands what is buffered to the stream. */
  def drain(): Unit = if (size > 0) { out.write(buf, 0, size); size = 0 }
}

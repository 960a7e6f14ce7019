package io.lineagestore.format

import java.io.OutputStream

/** The records of a delta, encoded and compressed as they are made, held in memory until the commit knows the
  * header (checkpoint id, lineage) and writes the file with [[DeltaFile.writeWithBody]]. A batch's records
  * then cost the commit only the write of bytes already compressed: encoding and compressing a batch of
  * incompressible 1 KiB values was most of a commit at that size (docs/benchmarks.md, the scale grid).
  *
  * Plain puts and deletes only: merge records need key order (format version 4), which only the commit knows.
  * Not thread-safe (the task thread of the batch uses it). Sealed once; [[discard]] frees the codec's native
  * memory of a body that will not be written.
  */
final class DeltaBody(val codec: DeltaCodec) {
  private val stored = new DeltaBody.Chunks
  private val compressed = codec.wrap(stored)
  private val records = new RecordEncoder(compressed)
  private var open = true

  def put(key: Array[Byte], value: Array[Byte]): Unit = { check(); records.put(key, value) }

  def delete(key: Array[Byte]): Unit = { check(); records.delete(key) }

  def recordCount: Long = records.recordCount

  /** Ends the records (end record, codec frame) and writes the compressed bytes to `out`; the record count.
    */
  private[format] def sealInto(out: OutputStream): Long = {
    check()
    open = false
    records.end()
    compressed.close()
    stored.writeTo(out)
    records.recordCount
  }

  /** Drops the records; the body is not used after. */
  def discard(): Unit = if (open) {
    open = false
    try compressed.close()
    catch { case scala.util.control.NonFatal(_) => () } // nothing of it is kept: only its memory matters
  }

  private def check(): Unit = if (!open) throw new IllegalStateException("a delta body used after sealing")
}

private object DeltaBody {

  /** Bytes in blocks of up to 1 MiB: no copy as it grows (a doubling array copies each byte about twice). */
  final class Chunks extends OutputStream {
    private val blocks = scala.collection.mutable.ArrayBuffer.empty[Array[Byte]]
    private var last: Array[Byte] = null
    private var lastSize = 0

    override def write(b: Int): Unit = write(Array(b.toByte), 0, 1)

    override def write(b: Array[Byte], off: Int, len: Int): Unit = {
      var from = off
      var left = len
      while (left > 0) {
        if (last == null || lastSize == last.length) {
          // 64 KiB first, doubling to 1 MiB: a small batch's delta holds little memory
          last = new Array[Byte](if (last == null) 1 << 16 else math.min(last.length * 2, 1 << 20))
          blocks += last
          lastSize = 0
        }
        val n = math.min(left, last.length - lastSize)
        System.arraycopy(b, from, last, lastSize, n)
        lastSize += n
        from += n
        left -= n
      }
    }

    def writeTo(out: OutputStream): Unit = blocks.foreach { block =>
      out.write(block, 0, if (block eq last) lastSize else block.length)
    }

    override def close(): Unit = () // the codec's close ends its frame; the bytes stay readable
  }
}

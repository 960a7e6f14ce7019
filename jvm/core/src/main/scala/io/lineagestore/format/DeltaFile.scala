package io.lineagestore.format

import java.io._
import java.util.zip.{CRC32C, CheckedInputStream, CheckedOutputStream}

import io.lineagestore.lineage.CheckpointId

/** Which store a file belongs to; written into every file so a file copied into the wrong place is caught. */
final case class StoreIdentity(operatorId: Long, partitionId: Int, storeName: String) {
  override def toString: String = s"operator $operatorId, partition $partitionId, store '$storeName'"
}

/** The header of a delta file: whose it is, which checkpoint, and its lineage (newest ancestor first). */
final case class DeltaHeader(store: StoreIdentity, checkpoint: CheckpointId, ancestors: Seq[CheckpointId])

/** Thrown for any file that is corrupt, truncated, foreign or of an unknown format version. */
class CorruptCheckpointFileException(val file: String, detail: String, cause: Throwable = null)
    extends IOException(
      s"checkpoint file $file is unusable: $detail. It was not written by this lineagestore store, or it is " +
        "damaged; restore it from a backup or restart the query from an older checkpoint. Nothing was loaded " +
        "from it.",
      cause
    )

/** A delta file (`<version>_<uniqueId>.delta`) holds one commit's changes. Layout, all integers big-endian:
  * {{{
  *   magic        8 bytes  "LSDELTA\u0001" (last byte: format version 1)
  *   header       store identity (operatorId:i64, partitionId:i32, storeName:utf),
  *                checkpoint (version:i64, uniqueId:utf),
  *                lineage count:i32, then (version:i64, uniqueId:utf) newest first
  *   headerCrc    i32      CRC32C of magic + header, so lineage is checkable without reading the records
  *   records      repeated: type:u8 (1 = put, 2 = delete), keyLen:i32, key, [valueLen:i32, value]
  *   end          type:u8 = 0, recordCount:i64
  *   fileCrc      i32      CRC32C of every byte before it
  * }}}
  * Keys and values are the engine's raw bytes (column-family prefix included).
  */
object DeltaFile {
  val Magic: Array[Byte] = "LSDELTA".getBytes("US-ASCII") :+ 1.toByte
  private val Put = 1
  private val Delete = 2
  private val End = 0

  /** Writes a delta; `records` yields (key, value) with value null for a delete. */
  final class Writer(out: OutputStream, header: DeltaHeader) extends Closeable {
    private val crc = new CRC32C
    private val data = new DataOutputStream(
      new CheckedOutputStream(new BufferedOutputStream(out, 1 << 16), crc)
    )
    private var count = 0L
    private var closed = false

    data.write(Magic)
    writeHeader(data, header)
    data.writeInt(crc.getValue.toInt)

    def put(key: Array[Byte], value: Array[Byte]): Unit = {
      data.writeByte(Put); writeBytes(key); writeBytes(value); count += 1
    }

    def delete(key: Array[Byte]): Unit = {
      data.writeByte(Delete); writeBytes(key); count += 1
    }

    def recordCount: Long = count

    /** Finishes the file. Not calling it leaves a file that every reader rejects as truncated. */
    override def close(): Unit = if (!closed) {
      closed = true
      data.writeByte(End)
      data.writeLong(count)
      data.flush()
      data.writeInt(crc.getValue.toInt)
      data.close()
    }

    /** Closes the underlying stream without finishing the file (used on failure). */
    def abandon(): Unit = if (!closed) { closed = true; out.close() }

    private def writeBytes(b: Array[Byte]): Unit = { data.writeInt(b.length); data.write(b) }
  }

  private def writeHeader(out: DataOutputStream, h: DeltaHeader): Unit = {
    out.writeLong(h.store.operatorId)
    out.writeInt(h.store.partitionId)
    out.writeUTF(h.store.storeName)
    out.writeLong(h.checkpoint.version)
    out.writeUTF(h.checkpoint.uniqueId)
    out.writeInt(h.ancestors.size)
    h.ancestors.foreach { a => out.writeLong(a.version); out.writeUTF(a.uniqueId) }
  }

  /** Reads and verifies only the header (magic, identity, lineage, header checksum). */
  def readHeader(
      in: InputStream,
      file: String,
      expected: StoreIdentity,
      expectedId: CheckpointId
  ): DeltaHeader = {
    val crc = new CRC32C
    val data = new DataInputStream(new CheckedInputStream(new BufferedInputStream(in, 1 << 16), crc))
    guard(file) {
      val header = readHeaderFields(data, file)
      val computed = crc.getValue.toInt
      if (data.readInt() != computed) corrupt(file, "header checksum mismatch")
      validate(file, header, expected, expectedId)
      header
    }
  }

  /** Reads a whole delta, verifying identity, completeness and checksum. Records are passed to `onRecord`
    * (value null for a delete) as they stream by, so the caller must stage them (a write batch) and apply the
    * stage only if this method returns: a file that fails verification throws after some records were seen.
    */
  def read(in: InputStream, file: String, expected: StoreIdentity, expectedId: CheckpointId)(
      onRecord: (Array[Byte], Array[Byte]) => Unit
  ): DeltaHeader = {
    val crc = new CRC32C
    val data = new DataInputStream(new CheckedInputStream(new BufferedInputStream(in, 1 << 16), crc))
    guard(file) {
      val header = readHeaderFields(data, file)
      val headerCrc = crc.getValue.toInt
      if (data.readInt() != headerCrc) corrupt(file, "header checksum mismatch")
      validate(file, header, expected, expectedId)
      var count = 0L
      var done = false
      while (!done) {
        data.readUnsignedByte() match {
          case Put    => onRecord(readBytes(data, file), readBytes(data, file)); count += 1
          case Delete => onRecord(readBytes(data, file), null); count += 1
          case End    =>
            if (data.readLong() != count) corrupt(file, "record count mismatch")
            val fileCrc = crc.getValue.toInt
            if (data.readInt() != fileCrc) corrupt(file, "file checksum mismatch")
            if (data.read() != -1) corrupt(file, "trailing bytes after the end record")
            done = true
          case other => corrupt(file, s"unknown record type $other")
        }
      }
      header
    }
  }

  private def readHeaderFields(data: DataInputStream, file: String): DeltaHeader = {
    val magic = new Array[Byte](Magic.length)
    data.readFully(magic)
    if (!magic.sameElements(Magic)) {
      if (magic.take(7).sameElements(Magic.take(7))) {
        corrupt(
          file,
          s"format version ${magic(7)} is not supported by this build (it reads version ${Magic(7)})"
        )
      }
      corrupt(file, "not a lineagestore delta file (bad magic)")
    }
    val store = StoreIdentity(data.readLong(), data.readInt(), data.readUTF())
    val checkpoint = readCheckpointId(data, file)
    val n = data.readInt()
    if (n < 0 || n > 10000000) corrupt(file, s"implausible lineage length $n")
    val ancestors = (0 until n).map(_ => readCheckpointId(data, file))
    DeltaHeader(store, checkpoint, ancestors)
  }

  private def readCheckpointId(data: DataInputStream, file: String): CheckpointId = {
    val v = data.readLong()
    val id = data.readUTF()
    try CheckpointId(v, id)
    catch { case e: IllegalArgumentException => corrupt(file, e.getMessage) }
  }

  private def validate(file: String, h: DeltaHeader, store: StoreIdentity, id: CheckpointId): Unit = {
    if (h.store != store) corrupt(file, s"it belongs to ${h.store}, not to $store")
    if (h.checkpoint != id) corrupt(file, s"it holds checkpoint ${h.checkpoint}, not $id")
  }

  private def readBytes(data: DataInputStream, file: String): Array[Byte] = {
    val n = data.readInt()
    if (n < 0 || n > (1 << 30)) corrupt(file, s"implausible record length $n")
    val b = new Array[Byte](n)
    data.readFully(b)
    b
  }

  private[lineagestore] def corrupt(file: String, detail: String): Nothing =
    throw new CorruptCheckpointFileException(file, detail)

  private[lineagestore] def guard[T](file: String)(body: => T): T =
    try body
    catch {
      case e: CorruptCheckpointFileException => throw e
      case e: EOFException                   => throw new CorruptCheckpointFileException(file, "truncated", e)
      case e: UTFDataFormatException         => throw new CorruptCheckpointFileException(file, "bad text", e)
    }
}

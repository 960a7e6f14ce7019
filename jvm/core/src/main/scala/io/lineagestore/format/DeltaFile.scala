package io.lineagestore.format

import java.io._
import java.util.zip.{CRC32C, CheckedInputStream, CheckedOutputStream}

import io.lineagestore.lineage.CheckpointId

/** The header of a delta file: whose it is, which checkpoint, and its lineage (newest ancestor first).
  *
  * `fromEmpty`: the delta holds the checkpoint's complete state on top of the empty state, and no version
  * below it belongs to its lineage (the store started afresh at this version: Spark's `loadEmpty`, used by
  * offline repartitioning). Its `ancestors` are then empty. A delta of version 1 starts from the empty state
  * anyway and does not set it.
  */
final case class DeltaHeader(
    store: StoreIdentity,
    checkpoint: CheckpointId,
    ancestors: Seq[CheckpointId],
    fromEmpty: Boolean = false
) {
  require(
    !fromEmpty || ancestors.isEmpty,
    s"a delta that starts from the empty state has no ancestors: $this"
  )
}

/** How the records of a delta are stored. The codec id is part of the checksummed header. */
sealed abstract class DeltaCodec(val id: Int, val name: String) {
  private[format] def wrap(out: OutputStream): OutputStream
  private[format] def unwrap(in: InputStream): InputStream
}

object DeltaCodec {

  /** Records as they are: for debugging with a hex viewer, or CPUs that cannot spare a few ms per MiB. */
  case object Uncompressed extends DeltaCodec(0, "none") {
    private[format] def wrap(out: OutputStream): OutputStream = out
    private[format] def unwrap(in: InputStream): InputStream = in
  }

  /** One zstd frame (with zstd's own content checksum). zstd-jni ships with Spark; level 1 compresses a
    * batch's records about 3-4x at several hundred MB/s, so a commit stays dominated by its write.
    */
  final case class Zstd(level: Int = 1) extends DeltaCodec(1, "zstd") {
    private[format] def wrap(out: OutputStream): OutputStream = ZstdStreams.output(out, level)
    private[format] def unwrap(in: InputStream): InputStream = ZstdStreams.input(in)
  }

  val Default: DeltaCodec = Zstd()

  /** The codec of a name the `deltaCodec` setting takes (the configuration declares the names; FormatSuite
    * checks that each maps to a codec and that every codec has one).
    */
  def byName(name: String): Option[DeltaCodec] = name.trim.toLowerCase match {
    case Uncompressed.name => Some(Uncompressed)
    case "zstd"            => Some(Zstd())
    case _                 => None
  }

  private[format] def byId(id: Int): Option[DeltaCodec] = id match {
    case 0 => Some(Uncompressed)
    case 1 => Some(Zstd())
    case _ => None
  }
}

/** The only place zstd-jni classes are named, so that code which merely names a codec (configuration, docs
  * generation) runs without zstd-jni on the class path.
  */
private object ZstdStreams {
  def output(out: OutputStream, level: Int): OutputStream = {
    val z = new com.github.luben.zstd.ZstdOutputStream(out, level)
    z.setChecksum(true)
    z
  }
  // no finalizer: zstd-jni's ZstdInputStream closes itself when collected, and with it its source, which a
  // reader still reads after dropping the records' stream (DeltaFile.read drains it and checks its CRC);
  // the reader closes this one itself, as it holds native memory
  def input(in: InputStream): InputStream = new com.github.luben.zstd.ZstdInputStreamNoFinalizer(in)
}

/** The kind of a delta record. */
sealed abstract class DeltaRecordKind(val code: Int, val name: String)
object DeltaRecordKind {
  case object Put extends DeltaRecordKind(1, "put")
  case object Delete extends DeltaRecordKind(2, "delete")

  /** Appends its value's elements to the key's value (format version 4; see [[DeltaFile]]). */
  case object Merge extends DeltaRecordKind(3, "merge")
}

/** A delta file (`<version>_<uniqueId>.delta`) holds one commit's changes. Layout, all integers big-endian:
  * {{{
  *   magic        8 bytes  "LSDELTA" + format version (4, 3 or 2 as below; version 1 is still read)
  *   header       store identity (operatorId:i64, partitionId:i32, storeName:utf),
  *                checkpoint (version:i64, uniqueId:utf),
  *                lineage count:i32, then (version:i64, uniqueId:utf) newest first,
  *                lineage base:u8 (versions 3 and 4: 0 = the lineage above, 1 = starts from the empty state),
  *                codec:u8 (0 = none, 1 = zstd; absent in version 1, which is always uncompressed)
  *   headerCrc    i32      CRC32C of magic + header, so lineage is checkable without reading the records
  *   body         through the codec:
  *     records    repeated: type:u8 (1 = put, 2 = delete, 3 = merge: version 4 only), keyLen:i32, key,
  *                [valueLen:i32, value] (put and merge)
  *     end        type:u8 = 0, recordCount:i64
  *   fileCrc      i32      CRC32C of every stored byte before it (the compressed body, as stored)
  * }}}
  * Keys and values are the engine's raw bytes (column-family prefix included).
  *
  * A writer uses the lowest version that expresses the file: version 4 when it holds merge records, else 3
  * for a delta that starts from the empty state above version 1 ([[DeltaHeader.fromEmpty]]), else 2. A build
  * that reads only older versions therefore keeps reading every delta it can read correctly and refuses, by
  * the version, the kinds it would misread: a fresh start (it would look for ancestors below it and bring
  * back state the start dropped) and merge records (it knows no record type 3).
  *
  * Records of a version-4 delta are in ascending key order, a key's records adjacent and in the order the
  * changes happened (the reader checks the order): a merge appends to the value the key's previous record
  * left, or to the value before the delta when it is the key's first record.
  */
object DeltaFile {

  /** The newest version this build writes and reads: a delta holding merge records. */
  val FormatVersion: Byte = 4

  /** Version of a fresh start without merge records (the lineage-base byte). */
  val FreshStartFormatVersion: Byte = 3

  /** Version of deltas whose lineage continues from a parent (no lineage-base byte). */
  val ChainFormatVersion: Byte = 2
  private val MagicPrefix: Array[Byte] = "LSDELTA".getBytes("US-ASCII")
  val Magic: Array[Byte] = MagicPrefix :+ ChainFormatVersion
  def magicOf(formatVersion: Byte): Array[Byte] = MagicPrefix :+ formatVersion
  private val ReadableVersions = Set[Byte](1, 2, 3, 4)
  private val BaseParent = 0
  private val BaseEmpty = 1

  /** The format version a writer uses for `header` and records with (or without) merges. */
  def formatVersionFor(header: DeltaHeader, merges: Boolean = false): Byte =
    if (merges) FormatVersion else if (header.fromEmpty) FreshStartFormatVersion else ChainFormatVersion
  private val Put = DeltaRecordKind.Put.code
  private val Delete = DeltaRecordKind.Delete.code
  private val Merge = DeltaRecordKind.Merge.code
  private[format] val End = 0
  private val CrcBytes = 4

  /** Writes a delta. `merges`: the records may include merges (the file is then format version 4); records
    * must then come in the order [[DeltaFile]] describes.
    */
  final class Writer(
      out: OutputStream,
      header: DeltaHeader,
      codec: DeltaCodec = DeltaCodec.Default,
      merges: Boolean = false
  ) extends Closeable {
    private val stored = new StoredBytes(out)
    stored.head(header, codec, merges)
    // the codec's stream: its close ends its frame but must leave `stored` open for the file checksum
    private val compressed: OutputStream = codec.wrap(new FilterOutputStream(stored.checked) {
      override def write(b: Array[Byte], off: Int, len: Int): Unit = stored.checked.write(b, off, len)
      override def close(): Unit = flush()
    })
    private val body = new RecordEncoder(compressed)
    private var closed = false

    def put(key: Array[Byte], value: Array[Byte]): Unit = body.put(key, value)

    def delete(key: Array[Byte]): Unit = body.delete(key)

    /** Appends `elements` to the key's value; only in a writer created with `merges`. */
    def merge(key: Array[Byte], elements: Array[Byte]): Unit = {
      if (!merges) throw new IllegalStateException("a merge record in a delta writer created without merges")
      body.merge(key, elements)
    }

    def recordCount: Long = body.recordCount

    /** Finishes the file. Not calling it leaves a file that every reader rejects as truncated. */
    override def close(): Unit = if (!closed) {
      closed = true
      body.end()
      compressed.close()
      stored.finish()
    }

    /** Closes the underlying stream without finishing the file (used on failure), releasing the codec. */
    def abandon(): Unit = if (!closed) {
      closed = true
      try compressed.close()
      catch {
        case scala.util.control.NonFatal(_) => ()
      } // the file is given up: only the codec's memory matters
      out.close()
    }

  }

  /** A delta file's bytes as stored, with the running file checksum: the head (magic, header, lineage base,
    * codec, header checksum) first, then the body, then [[finish]] appends the file checksum.
    */
  private final class StoredBytes(out: OutputStream) {
    private val crc = new CRC32C
    val checked = new CheckedOutputStream(new BufferedOutputStream(out, 1 << 16), crc)

    def head(header: DeltaHeader, codec: DeltaCodec, merges: Boolean): Unit = {
      val head = new DataOutputStream(checked)
      val formatVersion = formatVersionFor(header, merges)
      head.write(magicOf(formatVersion))
      writeHeader(head, header)
      if (formatVersion >= 3) head.writeByte(if (header.fromEmpty) BaseEmpty else BaseParent)
      head.writeByte(codec.id)
      head.writeInt(crc.getValue.toInt)
    }

    def finish(): Unit = {
      val trailer = new DataOutputStream(checked)
      trailer.writeInt(crc.getValue.toInt)
      trailer.close()
    }
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
    Corrupt.guard(file)(readVerifiedHeader(data, crc, file, expected, expectedId)._1)
  }

  /** Reads a whole delta, verifying identity, completeness and checksum. Records are passed to `onRecord`
    * (kind, key, value; value null for a delete) as they stream by, so the caller must stage them (a write
    * batch) and apply the stage only if this method returns: a file that fails verification throws after some
    * records were seen.
    */
  def read(in: InputStream, file: String, expected: StoreIdentity, expectedId: CheckpointId)(
      onRecord: (DeltaRecordKind, Array[Byte], Array[Byte]) => Unit
  ): DeltaHeader = {
    val crc = new CRC32C
    // the last 4 bytes (fileCrc) never reach the codec, which may read ahead to the end of its input
    val tail = new TailHoldingInputStream(new BufferedInputStream(in, 1 << 16), CrcBytes)
    val stored = new CheckedInputStream(tail, crc)
    def readRecords(body: DataInputStream, formatVersion: Byte): Unit = {
      var count = 0L
      var done = false
      var previousKey: Array[Byte] = null
      // version 4: keys ascend (a key's records adjacent), as the merge records' meaning depends on it
      def ordered(key: Array[Byte]): Array[Byte] = {
        if (formatVersion >= 4) {
          if (previousKey != null && java.util.Arrays.compareUnsigned(previousKey, key) > 0)
            Corrupt(file, s"record ${count + 1} is out of key order")
          previousKey = key
        }
        key
      }
      while (!done) {
        body.readUnsignedByte() match {
          case Put =>
            onRecord(DeltaRecordKind.Put, ordered(readBytes(body, file)), readBytes(body, file)); count += 1
          case Delete => onRecord(DeltaRecordKind.Delete, ordered(readBytes(body, file)), null); count += 1
          case Merge if formatVersion >= 4 =>
            onRecord(DeltaRecordKind.Merge, ordered(readBytes(body, file)), readBytes(body, file)); count += 1
          case End =>
            if (body.readLong() != count) Corrupt(file, "record count mismatch")
            if (body.read() != -1) Corrupt(file, "trailing bytes after the end record")
            done = true
          case other => Corrupt(file, s"unknown record type $other")
        }
      }
    }
    def checksumHolds: Boolean = {
      val expectedCrc = tail.heldBack
      expectedCrc.length == CrcBytes && java.nio.ByteBuffer.wrap(expectedCrc).getInt == crc.getValue.toInt
    }
    Corrupt.guard(file) {
      val (header, codec, formatVersion) =
        readVerifiedHeader(new DataInputStream(stored), crc, file, expected, expectedId)
      // closing the records' stream (the codec's native memory) leaves `stored` open: its end is read below
      val records = codec.unwrap(new java.io.FilterInputStream(stored) { override def close(): Unit = () })
      try
        Corrupt.guard(file)(
          readRecords(new DataInputStream(new BufferedInputStream(records, 1 << 16)), formatVersion)
        )
      catch {
        // the records stream by before the checksum is known: when they break, read the rest and say whether
        // the bytes changed after they were written (damage in storage) or were written so (a foreign file)
        case e: CorruptCheckpointFileException if drained(stored) && !checksumHolds =>
          Corrupt(file, s"file checksum mismatch (reading it failed first: ${e.detail})")
      } finally records.close()
      if (stored.read() != -1) Corrupt(file, "trailing bytes after the records")
      if (tail.heldBack.length != CrcBytes) Corrupt(file, "truncated")
      if (!checksumHolds) Corrupt(file, "file checksum mismatch")
      header
    }

  }

  /** Reads `in` to its end; false if reading fails (the store, not the content: the first error stands). */
  private def drained(in: InputStream): Boolean = {
    val buffer = new Array[Byte](1 << 16)
    try { while (in.read(buffer) != -1) {}; true }
    catch { case _: IOException => false }
  }

  private def readVerifiedHeader(
      data: DataInputStream,
      crc: CRC32C,
      file: String,
      expected: StoreIdentity,
      expectedId: CheckpointId
  ): (DeltaHeader, DeltaCodec, Byte) = {
    val magic = new Array[Byte](Magic.length)
    data.readFully(magic)
    if (!magic.take(7).sameElements(MagicPrefix)) Corrupt(file, "not a lineagestore delta file (bad magic)")
    val formatVersion = magic(7)
    if (!ReadableVersions(formatVersion))
      Corrupt(
        file,
        s"format version $formatVersion is not supported by this build (it reads versions " +
          s"${ReadableVersions.toSeq.sorted.mkString(", ")})"
      )
    // Fields are read raw and judged only once the header checksum holds: a damaged header is reported as
    // such, not as whatever its damaged bytes happen to spell (an invalid ID, an unknown base).
    val (rawStore, rawCheckpoint, rawAncestors, base, codecId) =
      try {
        val store = (data.readLong(), data.readInt(), data.readUTF())
        val checkpoint = (data.readLong(), data.readUTF())
        val n = data.readInt()
        if (n < 0 || n > 10000000) Corrupt(file, s"implausible lineage length $n")
        val ancestors = (0 until n).map(_ => (data.readLong(), data.readUTF()))
        val base = if (formatVersion < 3) BaseParent else data.readUnsignedByte()
        val codecId = if (formatVersion == 1) DeltaCodec.Uncompressed.id else data.readUnsignedByte()
        (store, checkpoint, ancestors, base, codecId)
      } catch {
        case e @ (_: CorruptCheckpointFileException | _: EOFException | _: UTFDataFormatException) =>
          val detail = e match {
            case c: CorruptCheckpointFileException => c.detail
            case _: EOFException                   => "it ends inside the header"
            case _                                 => "bad text"
          }
          Corrupt(file, s"damaged header, its checksum could not be checked ($detail)")
      }
    val computed = crc.getValue.toInt
    if (data.readInt() != computed) Corrupt(file, "header checksum mismatch")
    val store =
      try StoreIdentity(rawStore._1, rawStore._2, rawStore._3)
      catch { case e: IllegalArgumentException => Corrupt(file, e.getMessage) }
    val checkpoint = checkpointId(rawCheckpoint, file)
    val ancestors = rawAncestors.map(checkpointId(_, file))
    val fromEmpty = base match {
      case BaseParent => false
      case BaseEmpty  => true
      case other      => Corrupt(file, s"unknown lineage base $other")
    }
    if (fromEmpty && ancestors.nonEmpty) Corrupt(file, "it starts from the empty state but lists ancestors")
    val header = DeltaHeader(store, checkpoint, ancestors, fromEmpty)
    validate(file, header, expected, expectedId)
    val codec = DeltaCodec.byId(codecId).getOrElse(Corrupt(file, s"unknown record codec $codecId"))
    (header, codec, formatVersion)
  }

  private def checkpointId(raw: (Long, String), file: String): CheckpointId =
    try CheckpointId(raw._1, raw._2)
    catch { case e: IllegalArgumentException => Corrupt(file, e.getMessage) }

  private def validate(file: String, h: DeltaHeader, store: StoreIdentity, id: CheckpointId): Unit = {
    if (h.store != store) Corrupt(file, s"it belongs to ${h.store}, not to $store")
    if (h.checkpoint != id) Corrupt(file, s"it holds checkpoint ${h.checkpoint}, not $id")
  }

  private def readBytes(data: DataInputStream, file: String): Array[Byte] = {
    val n = data.readInt()
    if (n < 0 || n > (1 << 30)) Corrupt(file, s"implausible record length $n")
    val b = new Array[Byte](n)
    data.readFully(b)
    b
  }
}

/** Passes through all bytes of `in` except the last `n`, which [[heldBack]] returns once the stream is
  * exhausted: lets a decoder read to "its" end of input while a fixed-size trailer stays aside.
  */
private[format] final class TailHoldingInputStream(in: InputStream, n: Int) extends InputStream {
  private val ring = new Array[Byte](n)
  private var filled = 0 // bytes in `ring`, in order; ring is full except at the very start or end
  private var eof = false

  private def fill(): Unit = while (!eof && filled < n) {
    val r = in.read(ring, filled, n - filled)
    if (r < 0) eof = true else filled += r
  }

  override def read(): Int = {
    val one = new Array[Byte](1)
    if (read(one, 0, 1) <= 0) -1 else one(0) & 0xff
  }

  override def read(b: Array[Byte], off: Int, len: Int): Int = {
    if (len == 0) return 0
    fill()
    if (eof) return -1
    // read up to len new bytes behind the held ones, then emit the oldest len and keep the newest n
    val buf = new Array[Byte](n + len)
    System.arraycopy(ring, 0, buf, 0, n)
    val r = in.read(buf, n, len)
    if (r < 0) { eof = true; return -1 }
    System.arraycopy(buf, 0, b, off, r)
    System.arraycopy(buf, r, ring, 0, n)
    r
  }

  def heldBack: Array[Byte] = { fill(); ring.take(filled) }

  override def close(): Unit = in.close()
}

package io.lineagestore.format

import java.io.{File, RandomAccessFile}
import java.nio.charset.StandardCharsets.UTF_8

/** RocksDB's own identity of an SST file, from its properties block: the identity of the DB that wrote it,
  * the session (one open of that DB) and the file number it was written under. RocksDB draws a new session ID
  * at every open and never reuses a file number within one, so that two files of the same name and size
  * written by different instances tell apart (the unique ID it checks against its MANIFEST); equal IDs mean
  * the same file, hence the same bytes. Reading it costs the file's last few KiB where a content hash reads
  * them all.
  */
final case class SstUniqueId(dbId: String, sessionId: String, fileNumber: Long)

object SstUniqueId {

  /** The ID of `file`, or None for a file this reader cannot vouch for (see [[parse]]). */
  def read(file: File): Option[SstUniqueId] = {
    val raf = new RandomAccessFile(file, "r")
    try parse(raf.length(), (offset, length) => readAt(raf, offset, length))
    finally raf.close()
  }

  /** The ID of an SST of `size` bytes whose ranges `readRange(offset, length)` returns. None, so that the
    * caller identifies the file by its content instead, for anything not parsed exactly: another table format
    * or a footer of an unknown version, a metaindex or properties block compressed, malformed or larger than
    * any RocksDB writes, an ID field missing or empty, file number 0 (files not written under a DB's file
    * numbering, as an `SstFileWriter`'s may be), or a file written for ingestion. Never an ID read from bytes
    * that are not where the footer says the properties are.
    */
  def parse(size: Long, readRange: (Long, Int) => Array[Byte]): Option[SstUniqueId] =
    try {
      if (size < FooterBytes + TrailerBytes) None
      else
        for {
          meta <- metaindexHandle(readRange(size - FooterBytes, FooterBytes), size)
          metaBlock <- block(readRange, meta, size)
          props <- entries(metaBlock).flatMap(_.get(PropertiesBlock)).flatMap(handle)
          propsBlock <- block(readRange, props, size)
          properties <- entries(propsBlock)
          dbId <- properties.get(DbIdKey).map(new String(_, UTF_8)).filter(_.nonEmpty)
          sessionId <- properties.get(SessionIdKey).map(new String(_, UTF_8)).filter(_.nonEmpty)
          number <- properties.get(FileNumberKey).flatMap(varint64Exactly).filter(_ > 0)
          // an ingested file's bytes may change after it was written (its global sequence number)
          if !properties.contains(ExternalFileKey)
        } yield SstUniqueId(dbId, sessionId, number)
    } catch {
      // a varint or length running past its block: not a file to vouch for
      case _: IndexOutOfBoundsException => None
    }

  // ---- RocksDB's block-based table, as written by format versions 2 to 6 -------------------------------------

  /** The footer's fixed size for format versions >= 1: checksum type, two block handles or (>= 6) the
    * metaindex size and checksums, padding, the format version and the magic number.
    */
  private val FooterBytes = 53
  private val TrailerBytes = 5 // after every block: compression type (0 = none) and checksum
  private val BlockBasedTableMagic = 0x88e241b785f4cff7L
  private val ExtendedMagic = Array[Byte](0x3e, 0x00, 0x7a, 0x00)
  private val MaxMetaBlockBytes = 1 << 20

  private val PropertiesBlock = "rocksdb.properties"
  private val DbIdKey = "rocksdb.creating.db.identity"
  private val SessionIdKey = "rocksdb.creating.session.identity"
  private val FileNumberKey = "rocksdb.original.file.number"
  private val ExternalFileKey = "rocksdb.external_sst_file.version"

  private final case class Handle(offset: Long, size: Long)

  private def metaindexHandle(footer: Array[Byte], fileSize: Long): Option[Handle] = {
    val magic = littleEndian(footer, FooterBytes - 8, 8)
    val version = littleEndian(footer, FooterBytes - 12, 4)
    if (magic != BlockBasedTableMagic || version < 2 || version > 6) None
    else if (version >= 6) {
      // the metaindex ends where the footer starts; the footer gives its size only
      if (!footer.slice(1, 5).sameElements(ExtendedMagic)) None
      else {
        val metaSize = littleEndian(footer, 13, 4)
        Some(Handle(fileSize - FooterBytes - TrailerBytes - metaSize, metaSize))
      }
    } else {
      val (offset, next) = varint64(footer, 1)
      val (metaSize, _) = varint64(footer, next)
      Some(Handle(offset, metaSize))
    }
  }

  private def handle(encoded: Array[Byte]): Option[Handle] = {
    val (offset, next) = varint64(encoded, 0)
    val (size, end) = varint64(encoded, next)
    if (end == encoded.length) Some(Handle(offset, size)) else None
  }

  /** An uncompressed meta block's contents, within the file and before the footer. */
  private def block(readRange: (Long, Int) => Array[Byte], h: Handle, fileSize: Long): Option[Array[Byte]] =
    if (h.offset < 0 || h.size < 8 || h.size > MaxMetaBlockBytes) None
    else if (h.offset + h.size + TrailerBytes > fileSize - FooterBytes) None
    else {
      val bytes = readRange(h.offset, h.size.toInt + 1)
      if (bytes(h.size.toInt) != 0) None else Some(bytes.take(h.size.toInt))
    }

  /** The key/value entries of a block (keys prefix-compressed against the previous one; the restart points'
    * offsets and their count at its end), or None unless they fill exactly the space before the restarts.
    */
  private def entries(block: Array[Byte]): Option[Map[String, Array[Byte]]] = {
    val restarts = littleEndian(block, block.length - 4, 4)
    val end = block.length - 4 * (restarts + 1)
    if (restarts < 1 || end < 0) None
    else {
      var out = Map.empty[String, Array[Byte]]
      var key = Array.emptyByteArray
      var at = 0
      var wellFormed = true
      while (wellFormed && at < end) {
        val (shared, a) = varint64(block, at)
        val (unshared, b) = varint64(block, a)
        val (valueLength, c) = varint64(block, b)
        if (shared < 0 || unshared < 0 || valueLength < 0) wellFormed = false
        else if (shared > key.length || c + unshared + valueLength > end) wellFormed = false
        else {
          key = key.take(shared.toInt) ++ block.slice(c, c + unshared.toInt)
          val valueAt = c + unshared.toInt
          out += new String(key, UTF_8) -> block.slice(valueAt, valueAt + valueLength.toInt)
          at = valueAt + valueLength.toInt
        }
      }
      if (wellFormed && at == end) Some(out) else None
    }
  }

  /** A varint64 (7 bits a byte, low first) at `at`: the value and the offset after it. */
  private def varint64(bytes: Array[Byte], at: Int): (Long, Int) = {
    var value = 0L
    var shift = 0
    var i = at
    var more = true
    while (more) {
      if (shift > 63) throw new IndexOutOfBoundsException(s"varint at $at longer than 10 bytes")
      val b = bytes(i)
      value |= (b & 0x7fL) << shift
      shift += 7
      i += 1
      more = (b & 0x80) != 0
    }
    (value, i)
  }

  private def varint64Exactly(bytes: Array[Byte]): Option[Long] = {
    val (value, end) = varint64(bytes, 0)
    if (end == bytes.length) Some(value) else None
  }

  private def littleEndian(bytes: Array[Byte], at: Int, width: Int): Long =
    (0 until width).foldLeft(0L)((v, i) => v | ((bytes(at + i) & 0xffL) << (8 * i)))

  private def readAt(raf: RandomAccessFile, offset: Long, length: Int): Array[Byte] = {
    val out = new Array[Byte](length)
    raf.seek(offset)
    raf.readFully(out)
    out
  }
}

package io.lineagestore.format

import java.net.{URLDecoder, URLEncoder}
import java.nio.charset.StandardCharsets.UTF_8
import java.util.zip.CRC32C

import io.lineagestore.lineage.CheckpointId

/** One file of a RocksDB checkpoint as a snapshot records it. `identity` is what tells it apart from any
  * other file ([[FileIdentity]]: the SHA-256 of its bytes, or RocksDB's unique ID of an SST), never the file
  * name (RocksDB reuses file numbers across instances). `blob` names the shared blob holding the bytes
  * (immutable SST files, stored once and referenced by every snapshot containing them); None means the bytes
  * travel inside the snapshot's zip (the small mutable files: CURRENT, MANIFEST, OPTIONS). `crc32c` (8 hex
  * digits) checks a download: the CPU computes it at memory speed, where SHA-256 costs a core for every few
  * hundred MB/s in a JVM whose JIT has not yet reached it, as in a restarted executor. None in indexes of
  * schema 1, whose downloads are checked against the identity (always a SHA-256 there).
  */
final case class SnapshotFile(
    name: String,
    size: Long,
    identity: String,
    blob: Option[String],
    crc32c: Option[String] = None
) {
  require(SnapshotFile.isSafeName(name), s"unsafe file name '$name' in a snapshot")
  blob.foreach(b => require(SnapshotFile.isSafeName(b), s"unsafe blob name '$b' in a snapshot"))
  require(size >= 0 && FileIdentity.isValid(identity), s"bad size or identity for '$name'")
  require(!FileIdentity.isSst(identity) || crc32c.isDefined, s"an SST identity without a CRC32C for '$name'")
  crc32c.foreach(c => require(c.matches("[0-9a-f]{8}"), s"bad CRC32C '$c' for '$name'"))
}

object SnapshotFile {
  // plain names only: an index can never point outside its store ("../", absolute paths, separators)
  private val SafeName = "[A-Za-z0-9][A-Za-z0-9._-]{0,200}".r
  def isSafeName(n: String): Boolean = SafeName.matches(n) && !n.contains("..")
}

/** The index of a snapshot `<version>_<uniqueId>.zip`: which store and checkpoint, the lineage (ancestors,
  * newest first, as the delta of the same checkpoint has it), and every file of the RocksDB checkpoint.
  *
  * Text format, schema version 3 (one record per line, fields separated by one space):
  * {{{
  *   lineagestore-snapshot-index 3
  *   store <operatorId> <partitionId> <storeName, URL-encoded>
  *   checkpoint <version> <uniqueId>
  *   ancestor <version> <uniqueId>                                 (zero or more, newest first)
  *   file <name> <size> <identity> <crc32c hex or -> <blob or ->  (one per file of the RocksDB checkpoint)
  *   end <CRC32C, hex, of all bytes before this line>
  * }}}
  * Schemas 1 and 2 (still read) know files by their SHA-256 only; schema 1 has no crc32c field.
  */
final case class SnapshotIndex(
    store: StoreIdentity,
    checkpoint: CheckpointId,
    ancestors: Seq[CheckpointId],
    files: Seq[SnapshotFile]
) {
  def sharedBlobs: Set[String] = files.flatMap(_.blob).toSet
  def totalBytes: Long = files.map(_.size).sum
}

object SnapshotIndex {
  val SchemaVersion = 3

  /** Schema versions this build reads. */
  val ReadableVersions: Set[Int] = Set(1, 2, 3)
  private val Head = "lineagestore-snapshot-index"

  def serialize(index: SnapshotIndex): Array[Byte] = {
    val sb = new StringBuilder
    sb ++= s"$Head $SchemaVersion\n"
    sb ++= s"store ${index.store.operatorId} ${index.store.partitionId} ${encode(index.store.storeName)}\n"
    sb ++= s"checkpoint ${index.checkpoint.version} ${index.checkpoint.uniqueId}\n"
    index.ancestors.foreach(a => sb ++= s"ancestor ${a.version} ${a.uniqueId}\n")
    index.files.foreach { f =>
      sb ++= s"file ${f.name} ${f.size} ${f.identity} ${f.crc32c.getOrElse("-")} ${f.blob.getOrElse("-")}\n"
    }
    val body = sb.result().getBytes(UTF_8)
    body ++ s"end ${crcHex(body)}\n".getBytes(UTF_8)
  }

  def parse(bytes: Array[Byte], file: String): SnapshotIndex = {
    def bad(detail: String): Nothing = Corrupt(file, s"snapshot index: $detail")
    val text = new String(bytes, UTF_8)
    val endAt = text.lastIndexOf("end ")
    if (endAt < 0 || !text.endsWith("\n")) bad("truncated (no end line)")
    val body = text.substring(0, endAt).getBytes(UTF_8)
    if (text.substring(endAt + 4).trim != crcHex(body)) bad("checksum mismatch")
    val lines = text.substring(0, endAt).split("\n").toSeq
    val schema = lines.headOption.map(_.split(" ").toSeq) match {
      case Some(Seq(Head, v)) if ReadableVersions.exists(_.toString == v) => v.toInt
      case Some(Seq(Head, v))                                             =>
        bad(
          s"schema version $v is not supported (this build reads ${ReadableVersions.toSeq.sorted.mkString(", ")})"
        )
      case _ => bad("not a lineagestore snapshot index")
    }
    def opt(field: String): Option[String] = if (field == "-") None else Some(field)
    var store: Option[StoreIdentity] = None
    var checkpoint: Option[CheckpointId] = None
    val ancestors = Seq.newBuilder[CheckpointId]
    val files = Seq.newBuilder[SnapshotFile]
    try {
      lines.tail.foreach { line =>
        line.split(" ").toSeq match {
          case Seq("store", op, part, name) =>
            store = Some(StoreIdentity(op.toLong, part.toInt, decode(name)))
          case Seq("checkpoint", v, id) => checkpoint = Some(CheckpointId(v.toLong, id))
          case Seq("ancestor", v, id)   => ancestors += CheckpointId(v.toLong, id)
          case Seq("file", _, _, identity, _*) if schema < 3 && FileIdentity.isSst(identity) =>
            bad(s"an SST identity in an index of schema $schema: '$line'")
          case Seq("file", n, size, identity, blob) if schema == 1 =>
            files += SnapshotFile(n, size.toLong, identity, opt(blob))
          case Seq("file", n, size, identity, crc, blob) if schema >= 2 =>
            files += SnapshotFile(n, size.toLong, identity, opt(blob), opt(crc))
          case _ => bad(s"unreadable line '$line'")
        }
      }
    } catch {
      case e: IllegalArgumentException => bad(e.getMessage)
    }
    SnapshotIndex(
      store.getOrElse(bad("no store line")),
      checkpoint.getOrElse(bad("no checkpoint line")),
      ancestors.result(),
      files.result()
    )
  }

  private def crcHex(b: Array[Byte]): String = {
    val c = new CRC32C
    c.update(b)
    Hex.crc32c(c)
  }

  private def encode(s: String): String = URLEncoder.encode(s, UTF_8)
  private def decode(s: String): String = URLDecoder.decode(s, UTF_8)
}

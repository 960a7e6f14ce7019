package io.lineagestore.store

import java.io.File
import java.net.{URLDecoder, URLEncoder}
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files

import scala.util.Try

import io.lineagestore.format.StoreIdentity
import io.lineagestore.lineage.CheckpointId

/** What a store's local RocksDB held when its provider closed cleanly: the checkpoint, its lineage back to
  * the presumed snapshot, the live SST files and the file identities already known. A later provider of the
  * same store on this host starts from it instead of downloading (see [[LocalDirectories]]).
  *
  * Soundness: the record is written only after RocksDB flushed and closed without error, and it is deleted by
  * the next store before that store touches the directory, so a process that dies while using the directory
  * leaves no record. The next store also checks the live SSTs against the record (names and sizes) once
  * RocksDB is open, and ignores the record on any difference.
  *
  * File `CLEAN_CLOSE` next to `db/`, text, one field per line:
  * {{{
  *   lineagestore-clean-close 1
  *   store <operatorId> <partitionId> <storeName, URL-encoded>
  *   loaded <version> <uniqueId>
  *   presumed-snapshot <version>
  *   ancestor <version> <uniqueId>           newest first, zero or more
  *   sst <name> <size>                       every live SST file
  *   hash <name> <size> <identity>           known identities (content SHA-256 or SST ID), zero or more
  *   uploaded-snapshot <version>             newest snapshot known uploaded on the lineage (absent: 0)
  * }}}
  */
final case class CleanCloseRecord(
    store: StoreIdentity,
    loaded: CheckpointId,
    presumedSnapshotVersion: Long,
    ancestors: Seq[CheckpointId],
    liveSsts: Map[String, Long],
    hashes: Map[String, (Long, String)],
    uploadedSnapshotVersion: Long = 0
)

object CleanCloseRecord {
  val FileName = "CLEAN_CLOSE"
  private val Header = "lineagestore-clean-close 1"

  def write(localRoot: File, r: CleanCloseRecord): Unit = {
    val lines = Seq(
      Header,
      s"store ${r.store.operatorId} ${r.store.partitionId} ${URLEncoder.encode(r.store.storeName, UTF_8)}",
      s"loaded ${r.loaded.version} ${r.loaded.uniqueId}",
      s"presumed-snapshot ${r.presumedSnapshotVersion}"
    ) ++ r.ancestors.map(a => s"ancestor ${a.version} ${a.uniqueId}") ++
      r.liveSsts.toSeq.sorted.map { case (n, s) => s"sst $n $s" } ++
      r.hashes.toSeq.sortBy(_._1).map { case (n, (s, h)) => s"hash $n $s $h" } :+
      s"uploaded-snapshot ${r.uploadedSnapshotVersion}"
    val tmp = new File(localRoot, FileName + ".tmp")
    Files.write(tmp.toPath, (lines.mkString("\n") + "\n").getBytes(UTF_8))
    Files.move(tmp.toPath, new File(localRoot, FileName).toPath, java.nio.file.StandardCopyOption.ATOMIC_MOVE)
  }

  /** Reads the record without taking it (None: absent or unreadable): what a standby follower asks of a
    * directory it does not hold.
    */
  def peek(localRoot: File): Option[CleanCloseRecord] = {
    val f = new File(localRoot, FileName)
    if (!f.isFile) None else Try(parse(Files.readString(f.toPath, UTF_8))).toOption
  }

  /** Reads and deletes the record; None when absent, unreadable or of another store. */
  def take(localRoot: File, expected: StoreIdentity): Option[CleanCloseRecord] = {
    val f = new File(localRoot, FileName)
    if (!f.isFile) return None
    val text = Try(Files.readString(f.toPath, UTF_8)).toOption
    Files.delete(
      f.toPath
    ) // before anything else touches the directory: a crash from here on leaves no record
    text.flatMap(t => Try(parse(t)).toOption).filter(_.store == expected)
  }

  private def parse(text: String): CleanCloseRecord = {
    val lines = text.split('\n').toSeq.filter(_.nonEmpty).map(_.split(' ').toSeq)
    require(lines.headOption.map(_.mkString(" ")).contains(Header))
    def one(tag: String): Seq[String] = lines.filter(_.head == tag) match {
      case Seq(l) => l.tail
      case _      => throw new IllegalArgumentException(s"expected one $tag line")
    }
    val Seq(op, part, name) = one("store")
    val Seq(v, id) = one("loaded")
    CleanCloseRecord(
      StoreIdentity(op.toLong, part.toInt, URLDecoder.decode(name, UTF_8)),
      CheckpointId(v.toLong, id),
      one("presumed-snapshot").head.toLong,
      lines.filter(_.head == "ancestor").map(l => CheckpointId(l(1).toLong, l(2))),
      lines.filter(_.head == "sst").map(l => l(1) -> l(2).toLong).toMap,
      lines.filter(_.head == "hash").map(l => l(1) -> (l(2).toLong, l(3))).toMap,
      lines.find(_.head == "uploaded-snapshot").map(_(1).toLong).getOrElse(0L)
    )
  }
}

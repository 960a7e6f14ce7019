package io.lineagestore.store

import java.io.File
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files

import io.lineagestore.format.{Corrupt, SnapshotIndex}

/** Whether a local directory holds the RocksDB checkpoint a snapshot's index describes, before RocksDB opens
  * it: every file the index lists is there with its size, the manifest `CURRENT` names is one of them, and no
  * other file RocksDB would read (an SST, a manifest, a write-ahead log it would replay) is there. A restore
  * checks the directory it built with this ([[CheckpointFiles.restoreSnapshot]]), and so does any other
  * holder of a local copy of a snapshot (a standby's copy is checked by the same code): a directory that does
  * not match is damage of that snapshot, never a directory handed to RocksDB to find out.
  *
  * Content is not read here: each file's bytes were checked against the index (size and CRC32C or SHA-256)
  * when they were written or kept.
  */
object LocalCopyCheck {

  /** What does not match, one line each; empty when the directory holds the checkpoint. */
  def mismatches(index: SnapshotIndex, dir: File): Seq[String] = {
    val present =
      Option(dir.listFiles()).getOrElse(Array.empty[File]).filter(_.isFile).map(f => f.getName -> f)
    val byName = present.toMap
    val listed = index.files.map(_.name).toSet
    val files = index.files.flatMap { f =>
      byName.get(f.name) match {
        case None                            => Some(s"${f.name} is missing")
        case Some(l) if l.length() != f.size =>
          Some(s"${f.name} has ${l.length()} bytes, the index says ${f.size}")
        case _ => None
      }
    }
    val current = byName.get(Current) match {
      case None if !listed(Current) => Seq(s"the index lists no $Current file")
      case None                     => Nil // reported above
      case Some(c)                  =>
        val manifest = new String(Files.readAllBytes(c.toPath), UTF_8).trim
        if (listed(manifest)) Nil else Seq(s"$Current names $manifest, which the index does not list")
    }
    val extra =
      present.map(_._1).filterNot(listed).filter(readByRocksDb).sorted.map(n => s"$n is not in the index")
    files ++ current ++ extra
  }

  /** Fails, naming `location` (the snapshot's zip), when `dir` does not hold the checkpoint of `index`. */
  def verify(index: SnapshotIndex, dir: File, location: String): Unit = {
    val wrong = mismatches(index, dir)
    if (wrong.nonEmpty)
      Corrupt(location, s"the directory restored from it does not match its index: ${wrong.mkString("; ")}")
  }

  private val Current = "CURRENT"

  /** Files RocksDB reads on open, or replays (a write-ahead log): one not in the index changes the state. */
  private def readByRocksDb(name: String): Boolean =
    name.endsWith(".sst") || name.endsWith(".log") || name.startsWith("MANIFEST-") || name == Current
}

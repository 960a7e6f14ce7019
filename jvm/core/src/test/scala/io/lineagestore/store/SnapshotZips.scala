package io.lineagestore.store

import io.lineagestore.format.SnapshotZip
import java.io.{File, FileInputStream, FileOutputStream}
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files
import java.util.zip.{CRC32C, ZipEntry, ZipInputStream, ZipOutputStream}

/** Tests' access to snapshot zips on a local store: rewrite the INDEX as another build (or a bug) wrote it.
  */
object SnapshotZips {

  /** Rewrites the INDEX of `zip` with `edit` applied to its lines before the end line, a new end checksum,
    * and the other entries unchanged; drops the local filesystem's `.crc` sidecar so that only lineagestore's
    * own checks judge the result.
    */
  def rewriteIndex(zip: File)(edit: Seq[String] => Seq[String]): Unit = {
    Files.deleteIfExists(new File(zip.getParentFile, s".${zip.getName}.crc").toPath)
    val in = new ZipInputStream(new FileInputStream(zip))
    val entries =
      try
        Iterator
          .continually(in.getNextEntry)
          .takeWhile(_ != null)
          .map(e => e.getName -> in.readAllBytes())
          .toList
      finally in.close()
    require(entries.headOption.exists(_._1 == SnapshotZip.IndexEntry), s"$zip does not start with INDEX")
    val body =
      edit(new String(entries.head._2, UTF_8).split("\n").toSeq.dropRight(1)).mkString("", "\n", "\n")
    val crc = new CRC32C
    crc.update(body.getBytes(UTF_8))
    val index = (body + f"end ${crc.getValue}%08x\n").getBytes(UTF_8)
    val out = new ZipOutputStream(new FileOutputStream(zip))
    try
      ((SnapshotZip.IndexEntry -> index) :: entries.tail).foreach { case (name, bytes) =>
        out.putNextEntry(new ZipEntry(name))
        out.write(bytes)
        out.closeEntry()
      }
    finally out.close()
  }
}

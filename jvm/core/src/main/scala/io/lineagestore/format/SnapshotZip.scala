package io.lineagestore.format

import java.io._
import java.nio.file.Files
import java.util.UUID
import java.util.zip.{ZipEntry, ZipException, ZipInputStream, ZipOutputStream}

import io.lineagestore.lineage.CheckpointId

/** A snapshot `<version>_<uniqueId>.zip` and the shared area its index points into:
  * {{{
  *   <store dir>/<version>_<uniqueId>.zip   INDEX first, then one entry per small file (the index lines
  *                                          without a blob: CURRENT, MANIFEST-*, OPTIONS-*)
  *   <store dir>/shared/<uuid>.sst          immutable file bytes, stored once, named by the index lines
  * }}}
  */
object SnapshotZip {
  val IndexEntry = "INDEX"
  val SharedDir = "shared"

  /** The path of a shared blob in its store directory. */
  def sharedPath(blob: String): String = s"$SharedDir/$blob"

  /** A new shared blob's name: random, so two uploads never write one name. */
  def newBlobName(): String = s"${UUID.randomUUID()}.sst"

  /** Writes the zip of `index`: INDEX, then the bytes of every file it keeps inline, read from `local`. */
  def write(out: OutputStream, index: SnapshotIndex, local: String => File): Unit = {
    val zip = new ZipOutputStream(new BufferedOutputStream(out, 1 << 16))
    zip.putNextEntry(new ZipEntry(IndexEntry))
    zip.write(SnapshotIndex.serialize(index))
    zip.closeEntry()
    index.files.filter(_.blob.isEmpty).foreach { f =>
      zip.putNextEntry(new ZipEntry(f.name))
      Files.copy(local(f.name).toPath, zip)
      zip.closeEntry()
    }
    zip.finish()
    zip.flush()
  }

  /** Reads a snapshot zip: its INDEX at once, checked (checksum, and that it is checkpoint `id` of `store`),
    * then on request the inline files. Every failure of the zip's bytes (its structure, an entry's header or
    * name, its data, damage the blob store found) is a [[CorruptCheckpointFileException]] naming `location`;
    * the blob store's other failures (not reachable, missing) keep their types. Closing it closes `in`.
    */
  final class Reader(in: InputStream, location: String, store: StoreIdentity, id: CheckpointId)
      extends Closeable {
    private val zip = new ZipInputStream(new BufferedInputStream(in, 1 << 16))

    /** The current entry's bytes, read through [[zipRead]]; closing it leaves the zip open. */
    private val entryBytes = new FilterInputStream(zip) {
      override def read(): Int = zipRead(zip.read())
      override def read(b: Array[Byte], off: Int, len: Int): Int = zipRead(zip.read(b, off, len))
      override def skip(n: Long): Long = zipRead(zip.skip(n))
      override def close(): Unit = ()
    }

    val index: SnapshotIndex = {
      val e = zipRead(zip.getNextEntry)
      if (e == null || e.getName != IndexEntry) Corrupt(location, "no INDEX entry first in the zip")
      val index = SnapshotIndex.parse(zipRead(zip.readAllBytes()), location)
      if (index.store != store) Corrupt(location, s"it belongs to ${index.store}, not to $store")
      if (index.checkpoint != id) Corrupt(location, s"it holds checkpoint ${index.checkpoint}, not $id")
      index
    }

    /** Hands each inline file to `use` with a stream of its bytes (as stored: the caller checks them against
      * the index line); fails on an entry the index does not keep inline and, at the end, on one missing.
      * What `use` itself throws (writing its copy) keeps its type.
      */
    def foreachInline(use: (SnapshotFile, InputStream) => Unit): Unit = {
      val inline = index.files.filter(_.blob.isEmpty).map(f => f.name -> f).toMap
      val seen = scala.collection.mutable.Set.empty[String]
      var e = zipRead(zip.getNextEntry)
      while (e != null) {
        use(inline.getOrElse(e.getName, Corrupt(location, s"unexpected entry ${e.getName}")), entryBytes)
        seen += e.getName
        e = zipRead(zip.getNextEntry)
      }
      val missing = inline.keySet -- seen
      if (missing.nonEmpty) Corrupt(location, s"entries ${missing.toSeq.sorted.mkString(", ")} are missing")
    }

    override def close(): Unit = zip.close()

    /** A read of the zip's own bytes, failing on damage as a [[CorruptCheckpointFileException]]. */
    private def zipRead[T](body: => T): T =
      try Corrupt.guard(location)(body)
      catch {
        case e: ZipException => throw new CorruptCheckpointFileException(location, e.getMessage, e)
        // java.util.zip decodes an entry's name strictly (a MalformedInputException inside) and refuses header
        // fields it cannot use with these: bytes of a header that changed
        case e @ (_: IllegalArgumentException | _: IndexOutOfBoundsException) =>
          throw new CorruptCheckpointFileException(location, s"damaged zip entry header (${e.getMessage})", e)
      }
  }
}

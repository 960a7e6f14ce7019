package io.lineagestore.store

import java.io.{BufferedInputStream, File, FileInputStream, FileNotFoundException}
import java.nio.file.Files
import java.util.concurrent.atomic.AtomicLong

import scala.util.control.NonFatal

import io.lineagestore.format.{DeltaFile, DeltaHeader, DeltaRecordKind, StoreIdentity}
import io.lineagestore.lineage.CheckpointId

/** Delta files a store's local directory holds as copies of its committed ones on storage: those of a standby
  * copy it took over ([[StandbyCopy]]: `standby-deltas/` beside `db/`), so the load that takes the copy over
  * replays the deltas after its snapshot from local disk instead of the blob store.
  *
  * A copy is never trusted: the load's plan comes from storage as always (which deltas, in which lineage), a
  * copy is used only under its plan's exact name (`<version>_<uniqueId>.delta`, one attempt's file), and it
  * is read through whole and verified as a download is ([[DeltaFile.read]]: identity, checkpoint, record
  * count, checksum) before any of its records is replayed. One that fails is deleted and the delta is read
  * from storage; one that was read is deleted (the store's RocksDB holds it now). Thread-safe: the files are
  * the only state, each taken by an atomic delete; the counters are atomics.
  */
final class LocalDeltaCopies(val dir: File) {
  val filesRead = new AtomicLong // replayed from a local copy
  val rejected = new AtomicLong // failed verification, read from storage instead

  /** Streams the local copy of `id`'s delta into `onRecord` if there is one and it verifies, returning its
    * header; None (nothing passed to `onRecord`) when there is none or it failed verification.
    */
  def read(id: CheckpointId, store: StoreIdentity)(
      onRecord: (DeltaRecordKind, Array[Byte], Array[Byte]) => Unit
  ): Option[DeltaHeader] = {
    val file = new File(dir, id.deltaFileName)
    if (!file.isFile) return None
    val location = file.getAbsolutePath
    // None when the file is gone (another reader took it): nothing was passed on yet
    def open(): Option[BufferedInputStream] =
      try Some(new BufferedInputStream(new FileInputStream(file), 1 << 16))
      catch { case _: FileNotFoundException => None }
    val verified = open().map { in =>
      try { DeltaFile.read(in, location, store, id)((_, _, _) => ()); true }
      catch {
        case NonFatal(_) =>
          rejected.incrementAndGet()
          Files.deleteIfExists(file.toPath)
          false
      } finally in.close()
    }
    if (!verified.contains(true)) None
    else
      open().map { in =>
        // the file verified a moment ago: a failure now is the local disk's, and fails the caller as a failed
        // download would (its records may be staged); the copy goes either way
        val header =
          try DeltaFile.read(in, location, store, id)(onRecord)
          finally { in.close(); Files.deleteIfExists(file.toPath) }
        filesRead.incrementAndGet()
        header
      }
  }
}

object LocalDeltaCopies {

  /** Where a store's directory keeps the deltas of a standby copy it took over. */
  val DirName = "standby-deltas"

  def in(storeDir: File): LocalDeltaCopies = new LocalDeltaCopies(new File(storeDir, DirName))
}

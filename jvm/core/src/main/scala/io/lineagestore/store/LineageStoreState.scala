package io.lineagestore.store

import java.io.File

import io.lineagestore.format.CorruptCheckpointFileException
import io.lineagestore.lineage.{CheckpointId, LineageException}
import io.lineagestore.storage.BlobNotFoundException

/** The values [[LineageStore]] keeps and the rules it applies to failures, apart from its sequencing. */
private[store] object LineageStoreState {

  /** How often one load plans again after finding a chosen file gone (see `load`). */
  val MaxReplans = 2

  /** How many damaged snapshots one load routes around before it gives up. */
  val MaxDetours = 8

  /** Restoring snapshot `id` failed on a damaged or missing file of it (zip, INDEX or SST). A zip that is
    * missing is not damage: clean-up deleted it after the plan was made (see `load`), and a new plan will not
    * choose it.
    */
  final case class DamagedSnapshot(id: CheckpointId, cause: CorruptCheckpointFileException)
      extends RuntimeException(cause)
  object DamagedSnapshot {
    def of(id: CheckpointId, t: Throwable, zip: String): Throwable =
      Iterator.iterate(t)(_.getCause).takeWhile(_ != null).collectFirst {
        case c: CorruptCheckpointFileException => c
      } match {
        case Some(c) if !(c.file == zip && c.getCause.isInstanceOf[BlobNotFoundException]) =>
          DamagedSnapshot(id, c)
        case _ => t
      }
  }

  /** Uploads remembered for crediting a lineage (a lineage descends from at most a few recent freezes). */
  val RecentUploadsKept = 16

  /** A file the load chose does not exist (any other damage is not something a new plan routes around). */
  def isMissingFile(t: Throwable): Boolean = t match {
    case l: LineageException               => l.missing
    case c: CorruptCheckpointFileException => c.getCause.isInstanceOf[BlobNotFoundException]
    case _                                 => false
  }

  /** The file a failed load found unusable (damaged, foreign or missing), as the error naming it; None for a
    * failure that is not about a file (the blob store unreachable, the local disk).
    */
  def unusableFile(t: Throwable): Option[CorruptCheckpointFileException] =
    Iterator.iterate(t)(_.getCause).takeWhile(_ != null).collectFirst {
      case c: CorruptCheckpointFileException => c
      case l: LineageException               => new CorruptCheckpointFileException(l.file, l.getMessage, l)
    }

  /** What the local DB holds, as one value.
    *
    * @param loaded
    *   the checkpoint it holds; None while unknown (before the first load, or after one failed midway)
    * @param ancestors
    *   loaded's ancestors, newest first, back to the snapshot the lineage presumes (exclusive once that
    *   snapshot is loaded's own freeze)
    * @param presumedSnapshotVersion
    *   the version of that snapshot (0: none)
    * @param emptyAtVersion
    *   with `loaded` the empty state: the version it stands at (0, or the version given to `loadEmpty`)
    * @param hashes
    *   what is known of the directory's files (one cache per generation of the directory)
    * @param uploadedSnapshotVersion
    *   the newest snapshot of loaded's lineage known to be uploaded (0: none known); the presumed one may
    *   still be frozen, or lost with a process that ended before uploading it
    */
  private[store] final case class LocalState(
      loaded: Option[CheckpointId],
      ancestors: Seq[CheckpointId],
      presumedSnapshotVersion: Long,
      emptyAtVersion: Long,
      hashes: HashCache,
      uploadedSnapshotVersion: Long
  ) {
    def version: Option[Long] = loaded.map(l => if (l.isEmptyState) emptyAtVersion else l.version)
  }

  private[store] object LocalState {
    def Unknown(hashes: HashCache): LocalState = LocalState(None, Nil, 0, 0, hashes, 0)
  }

  /** A checkpoint frozen for upload into `dir`, which holds it once `checkpointed` completes (a commit's
    * freeze runs on an apply thread after the commit returned); a failed freeze fails `checkpointed`.
    */
  private[store] final case class Frozen(
      id: CheckpointId,
      ancestors: Seq[CheckpointId],
      dir: File,
      hashes: HashCache,
      checkpointed: java.util.concurrent.Future[Unit]
  )

  /** Runs `upload` on its own thread and waits at most `timeoutMs` for it; past that the thread is
    * interrupted (it interrupts its transfers in flight and ends once they have: PoolTasks), and waited for a
    * further [[UploadEndGraceMs]] at most, so that a store closing after it has nothing of its own still
    * reading its frozen checkpoints or writing blobs (an upload stuck past both is left to end on its own).
    */
  def runWithin(timeoutMs: Long, name: String)(upload: () => Unit): Unit = {
    val done = new java.util.concurrent.CompletableFuture[Unit]()
    val uploader = new Thread(
      () =>
        try done.complete(upload())
        catch { case t: Throwable => done.completeExceptionally(t) },
      name
    )
    uploader.setDaemon(true)
    uploader.start()
    try done.get(timeoutMs, java.util.concurrent.TimeUnit.MILLISECONDS)
    catch {
      case _: java.util.concurrent.TimeoutException   => uploader.interrupt(); uploader.join(UploadEndGraceMs)
      case e: java.util.concurrent.ExecutionException => throw e.getCause
      case e: InterruptedException                    => uploader.interrupt(); throw e
    }
  }

  /** How long an interrupted upload gets to end: a transfer ends at its next blocking call once interrupted.
    */
  val UploadEndGraceMs = 10000L
}

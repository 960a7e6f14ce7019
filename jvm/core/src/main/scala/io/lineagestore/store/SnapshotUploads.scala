package io.lineagestore.store

import java.io.File
import java.util.concurrent.{ConcurrentLinkedDeque, ConcurrentLinkedQueue}
import java.util.concurrent.locks.ReentrantReadWriteLock

import scala.jdk.CollectionConverters._

import io.lineagestore.format.SnapshotIndex
import io.lineagestore.lineage.{CheckpointFile, CheckpointId}

/** One store's frozen checkpoints on their way to the blob store: the queue a commit's freeze adds to and an
  * upload drains, oldest first, each snapshot diffed against the last one completed; and how far a lineage
  * stands past the snapshots known uploaded (its lag), with the catch-up upload that bounds it.
  *
  * Threads: the task thread adds (a freeze, whose checkpoint an apply thread may still be writing: an upload
  * waits for it), reads [[recentUploads]] and runs [[catchUp]]; maintenance, a commit's catch-up and a close
  * may all upload, one at a time (`uploading`). The queue and the recent uploads are concurrent collections,
  * `lastUploaded` is volatile (a restore sets it too). Blob deletion by clean-up and uploads exclude each
  * other through [[pausingUploads]]: an upload's new blobs are referenced by no zip until it finishes. What
  * the local DB holds is the caller's ([[LineageStore]]): the methods that need it are given it.
  */
private[store] final class SnapshotUploads(
    files: CheckpointFiles,
    frozenRoot: File,
    crash: CrashPoints,
    clock: () => Long,
    counters: StoreCounters,
    cleanups: LineageCleanup,
    pendingBlobs: PendingBlobs
) {
  import LineageStoreState._

  /** Where the snapshot of checkpoint `id` is frozen. */
  def frozenDir(id: CheckpointId): File = new File(frozenRoot, id.toString)

  /** [[frozenDir]], emptied, for a new checkpoint. */
  def emptyFrozenDir(id: CheckpointId): File = {
    val dir = frozenDir(id)
    LocalDirectories.deleteRecursively(dir)
    dir.getParentFile.mkdirs()
    dir
  }

  /** Forgets every frozen directory (a store opening on a reused local directory, or closing). */
  def deleteFrozenDirs(): Unit = LocalDirectories.deleteRecursively(frozenRoot)

  /** The newest snapshot version known uploaded on `lineage` (a commit's parent and ancestors): `known`, or
    * one this store uploaded since (the maintenance thread records them in [[recentUploads]]).
    */
  def uploadedOn(lineage: Seq[CheckpointId], known: Long): Long = {
    val onLineage = lineage.toSet
    (known +: recentUploads.filter(onLineage.contains).map(_.version)).max
  }

  /** Deltas between the checkpoint loaded in `now` and the newest snapshot known uploaded on its lineage (0
    * when nothing is loaded): what a cold restore replays at most.
    */
  def lag(now: LocalState): Long =
    now.loaded.filterNot(_.isEmptyState) match {
      case Some(l) => l.version - uploadedOn(l +: now.ancestors, now.uploadedSnapshotVersion)
      case None    => 0L
    }

  /** The catch-up snapshot of commit `id`: its lineage went more than `maxSnapshotLagDeltas` deltas without a
    * snapshot known to be uploaded (maintenance did not run before the process or the provider went away, as
    * with short availableNow runs, or uploads failed). The commit uploads what is frozen itself, on the
    * batch's path: without it, nothing bounds the lag when every run ends before maintenance. Its cost is one
    * snapshot upload per `maxSnapshotLagDeltas` commits at most, and none while maintenance keeps up. A
    * failed upload does not fail the commit (its delta is written): the next commit tries again. Returns
    * whether `id`'s own snapshot is uploaded now.
    */
  def catchUp(id: CheckpointId): Boolean = {
    counters.catchUpSnapshots.incrementAndGet()
    crash.at(CrashPoints.CatchUpBeforeUpload)
    try {
      upload()
      files.hasSnapshot(id)
    } catch {
      case scala.util.control.NonFatal(e) =>
        counters.catchUpFailures.incrementAndGet()
        lastCatchUpFailure.set(e)
        false
    }
  }

  /** Why the last catch-up upload failed, if one did since the last call (the provider logs it). */
  def takeCatchUpFailure(): Option[Throwable] = Option(lastCatchUpFailure.getAndSet(null))
  private val lastCatchUpFailure = new java.util.concurrent.atomic.AtomicReference[Throwable]()

  private val frozen = new ConcurrentLinkedQueue[Frozen]()
  // the checkpoints whose snapshots were uploaded last, newest first (a commit credits its lineage with the
  // newest of them it descends from)
  private val recent = new ConcurrentLinkedDeque[CheckpointId]()
  // uploads hold it shared; clean-up deletes blobs only if it gets it exclusively
  private val uploadsVsBlobDeletion = new ReentrantReadWriteLock()
  private val uploading = new Object

  /** The last snapshot uploaded or restored: the base the next upload diffs against. */
  @volatile var lastUploaded: Option[SnapshotIndex] = None

  def add(f: Frozen): Unit = frozen.add(f)
  def frozenIds: Seq[CheckpointId] = frozen.asScala.map(_.id).toSeq
  def frozenCount: Int = frozen.size
  def recentUploads: Seq[CheckpointId] = recent.asScala.toSeq

  /** Uploads every frozen checkpoint, oldest first; returns how many were uploaded. */
  def upload(): Int = {
    uploadsVsBlobDeletion.readLock().lock()
    try uploading.synchronized(uploadFrozen())
    finally uploadsVsBlobDeletion.readLock().unlock()
  }

  /** Runs `body` with `true` if no upload is in flight (and none starts until it returns), else with `false`.
    */
  def pausingUploads[T](body: Boolean => T): T = {
    val paused = uploadsVsBlobDeletion.writeLock().tryLock()
    try body(paused)
    finally if (paused) uploadsVsBlobDeletion.writeLock().unlock()
  }

  /** Uploads what is frozen before the store closes, waiting at most `timeoutMs` (see
    * [[LineageStore.uploadBeforeClose]]); returns the checkpoints still frozen.
    */
  def beforeClose(timeoutMs: Long): Seq[CheckpointId] = {
    if (frozen.isEmpty || timeoutMs <= 0) return frozenIds
    crash.at(CrashPoints.CloseBeforeUpload)
    runWithin(timeoutMs, s"lineagestore-close-upload-${files.store}")(() => upload())
    crash.at(CrashPoints.CloseAfterUpload)
    frozenIds
  }

  /** Why the last freeze failed, if one did since the last call (the provider logs it). */
  def takeFreezeFailure(): Option[Throwable] = Option(lastFreezeFailure.getAndSet(null))
  // set by an uploader, taken by the provider's maintenance
  private val lastFreezeFailure = new java.util.concurrent.atomic.AtomicReference[Throwable]()

  private def uploadFrozen(): Int = {
    var n = 0
    var next = frozen.peek()
    while (next != null) {
      val start = clock()
      // a freeze that failed leaves nothing to upload; the lineage presumed its snapshot, so the lag grows
      // until a later commit freezes and catches up (maxSnapshotLagDeltas), as after a crash before upload
      if (checkpointed(next)) {
        if (!files.hasSnapshot(next.id)) {
          uploadOne(next)
          n += 1
        }
        recent.addFirst(next.id)
        while (recent.size > RecentUploadsKept) recent.pollLast()
        cleanups.fileWritten(CheckpointFile(next.id, CheckpointId.Snapshot))
      }
      frozen.poll()
      LocalDirectories.deleteRecursively(next.dir)
      counters.lastSnapshotUploadMs.set(clock() - start)
      next = frozen.peek()
    }
    n
  }

  /** Waits until `f`'s freeze is complete; false if it failed. */
  private def checkpointed(f: Frozen): Boolean =
    try { f.checkpointed.get(); true }
    catch {
      case e: java.util.concurrent.ExecutionException =>
        counters.freezeFailures.incrementAndGet()
        lastFreezeFailure.set(e.getCause)
        false
    }

  private def uploadOne(f: Frozen): Unit = {
    val (index, stats) =
      files.uploadSnapshot(
        f.id,
        f.ancestors,
        f.dir,
        lastUploaded.orElse(presumedBase(f)),
        f.hashes,
        pendingBlobs.written,
        () => crash.at(CrashPoints.SnapshotAfterBlobs)
      )
    pendingBlobs.referenced(index.sharedBlobs)
    crash.at(CrashPoints.SnapshotAfterZip)
    lastUploaded = Some(index)
    cleanups.indexKnown(f.id, index)
    counters.filesUploaded.addAndGet(stats.filesMoved)
    counters.bytesUploaded.addAndGet(stats.bytesMoved)
    counters.filesReused.addAndGet(stats.filesReused)
    counters.bytesReused.addAndGet(stats.bytesReused)
    counters.snapshotsUploaded.incrementAndGet()
  }

  /** A store that resumed from a clean close has uploaded nothing yet: diff against the snapshot the frozen
    * checkpoint's lineage presumes (the oldest ancestor), if it exists; one small read.
    */
  private def presumedBase(f: Frozen): Option[SnapshotIndex] =
    f.ancestors.lastOption.filter(a => !a.isEmptyState && files.hasSnapshot(a)).flatMap(cleanups.readIndex)
}

package io.lineagestore.store

import scala.collection.mutable

import io.lineagestore.format.SnapshotIndex
import io.lineagestore.lineage._
import io.lineagestore.snapshot.SnapshotPlanner

/** One store's clean-up: what it knows of the committed lineage and of the files that exist, and the run that
  * deletes what the retention window no longer needs (decided by [[RetentionPlanner]] and
  * [[SnapshotPlanner.unreferencedBlobs]], both pure).
  *
  * Knowledge instead of listing: the committed lineage comes from the loads Spark asked for (and delta
  * headers read back to a snapshot), existing files from this store's own commits and uploads. The store is
  * listed only by the orphan sweep: on the first run and every `orphanSweepEveryCleanups` runs.
  *
  * Threads: the task thread reports loads, commits and uploads; Spark's maintenance thread runs [[run]]. Each
  * piece of shared state is guarded by its own monitor.
  */
private[store] final class LineageCleanup(
    files: CheckpointFiles,
    settings: StoreSettings,
    crash: CrashPoints,
    clock: () => Long,
    pendingBlobs: PendingBlobs
) {

  // committed lineage (version -> unique ID) as far as known, and its head: the newest checkpoint Spark loaded
  private val committed = mutable.Map.empty[Long, String]
  @volatile private var committedHead: Option[CheckpointId] = None
  // the committed checkpoint whose delta starts from the empty state, when the committed lineage has one
  @volatile private var committedFreshStart: Option[CheckpointId] = None
  private val knownFiles = mutable.Set.empty[CheckpointFile]
  private val indexCache = mutable.Map.empty[CheckpointId, SnapshotIndex]
  private var runsSinceSweep = Int.MaxValue

  // ---- what the store reports -----------------------------------------------------------------------------

  /** Spark loaded `head` (so it is committed) by `plan`, whose lineage is committed too. */
  def loaded(head: CheckpointId, plan: LoadPlan): Unit = committed.synchronized {
    if (!head.isEmptyState) {
      committed(head.version) = head.uniqueId
      plan.lineage.foreach(a => committed(a.version) = a.uniqueId)
      // a newer head may disagree with what an older load believed: versions above it are not committed
      committed.keys.filter(_ > head.version).toSeq.foreach(committed.remove)
      plan.freshStart.foreach(noteFreshStart)
      if (committedFreshStart.exists(f => !committed.get(f.version).contains(f.uniqueId)))
        committedFreshStart = None
      committedHead = Some(head)
    }
  }

  /** What was committed before belongs to another lineage now; the next load tells the new one. */
  def forgetCommitted(): Unit = committed.synchronized {
    committed.clear()
    committedHead = None
    committedFreshStart = None
  }

  def fileWritten(f: CheckpointFile): Unit = knownFiles.synchronized(knownFiles += f)

  def indexKnown(id: CheckpointId, index: SnapshotIndex): Unit =
    indexCache.synchronized(indexCache(id) = index)

  def readIndex(id: CheckpointId): Option[SnapshotIndex] =
    indexCache.synchronized(indexCache.get(id)).orElse {
      val read = scala.util.Try(files.readSnapshotIndex(id)).toOption
      read.foreach(indexKnown(id, _))
      read
    }

  // ---- the run --------------------------------------------------------------------------------------------

  /** Deletes what the committed lineage no longer needs: files of versions below the snapshot base of the
    * oldest retained version, losing attempts that left the retention window, and shared blobs no retained
    * snapshot references. `mayDeleteBlobs` is false while a snapshot upload of this store is in flight: its
    * new blobs are referenced by no zip yet. Returns the paths deleted.
    */
  def run(mayDeleteBlobs: Boolean): Seq[String] = {
    val head = committedHead.getOrElse(return Nil)
    // the sweep waits for a run that may delete blobs: it is the one listing, not to be spent on nothing
    val sweep = mayDeleteBlobs && runsSinceSweep >= settings.orphanSweepEveryCleanups
    if (sweep) {
      val listed = files.listCheckpointFiles()
      knownFiles.synchronized { knownFiles.clear(); knownFiles ++= listed }
      runsSinceSweep = 0
    } else if (mayDeleteBlobs) runsSinceSweep += 1
    val existing = knownFiles.synchronized(knownFiles.toSeq)
    val chain = extendCommittedLineage(head, existing)
    val plan =
      RetentionPlanner.plan(head, chain, existing, settings.minVersionsToRetain, committedFreshStart)
    val (expiredSnapshots, droppedDeltas) = plan.delete.partition(_.kind == CheckpointId.Snapshot)
    // While an upload is in flight no blob may go, so expired snapshots stay too (until a later clean-up):
    // deleting their zips now would lose the indexes that say which blobs they leave unreferenced, and
    // finding those again would take a listing (the orphan sweep).
    val droppedSnapshots = if (mayDeleteBlobs) expiredSnapshots else Nil
    val dropped = droppedSnapshots.flatMap(f => readIndex(f.id))
    val retainedRead = plan.retainedSnapshots.map(id => id -> readIndex(id))
    val retained = retainedRead.flatMap(_._2)
    // A retained snapshot whose index cannot be read right now (a transient store error, or damage) may
    // reference any blob: delete no blob this time, as the gc tool does (StoreCleaner). Zips and deltas
    // below the window are still deleted; their blobs wait for a later clean-up or the orphan sweep.
    val blobsKnown = mayDeleteBlobs && retainedRead.forall(_._2.isDefined)
    val blobs =
      if (blobsKnown) SnapshotPlanner.unreferencedBlobs(dropped, retained)
      else Set.empty[String]
    val deleted = mutable.ArrayBuffer.empty[String]
    def delFile(f: CheckpointFile): Unit = { files.deleteCheckpointFile(f); deleted += f.name }
    def delBlob(b: String): Unit = {
      files.deleteSharedBlob(b)
      pendingBlobs.deleted(b)
      deleted += CheckpointFiles.sharedPath(b)
    }
    // zips first: a crash then leaves at most unreferenced blobs, which the orphan sweep removes
    droppedSnapshots.foreach(delFile)
    crash.at(CrashPoints.CleanupAfterZips)
    blobs.toSeq.sorted.foreach(delBlob)
    crash.at(CrashPoints.CleanupAfterBlobs)
    droppedDeltas.foreach(delFile)
    crash.at(CrashPoints.CleanupAfterDeltas)
    if (sweep && blobsKnown) sweepOrphanBlobs(retained).foreach(delBlob)
    // a retained index could not be read: sweep next time, which finds the blobs skipped now
    if (mayDeleteBlobs && !blobsKnown) runsSinceSweep = Int.MaxValue
    knownFiles.synchronized { knownFiles --= droppedSnapshots; knownFiles --= droppedDeltas }
    indexCache.synchronized(droppedSnapshots.foreach(f => indexCache.remove(f.id)))
    deleted.toSeq
  }

  /** Shared blobs referenced by no existing snapshot and older than the grace period (crash leftovers). The
    * younger ones are pending: an upload in another process, or leftovers still inside the grace period.
    */
  private def sweepOrphanBlobs(retained: Seq[SnapshotIndex]): Seq[String] = {
    val referenced = retained.flatMap(_.sharedBlobs).toSet
    val cutoff = clock() - settings.orphanGracePeriodMs
    val (expired, young) =
      files.listSharedBlobs().filterNot(b => referenced(b.name)).partition(_.modificationTimeMs < cutoff)
    pendingBlobs.swept(unreferenced = young.map(_.name).toSet)
    expired.map(_.name)
  }

  /** Committed lineage down to a snapshot at or below the oldest retained version, reading delta headers. */
  private def extendCommittedLineage(head: CheckpointId, existing: Seq[CheckpointFile]): Map[Long, String] = {
    val snapshots = existing.filter(_.kind == CheckpointId.Snapshot).map(_.id).toSet
    val oldestRetained = math.max(1L, head.version - settings.minVersionsToRetain + 1)
    committed.synchronized {
      def reachedBase: Boolean = {
        val known = committed.filter(_._1 <= oldestRetained)
        known.exists { case (v, id) => snapshots(CheckpointId(v, id)) } || committed.contains(1L) ||
        committedFreshStart.isDefined
      }
      var guard = 0
      while (!reachedBase && guard < 1000) {
        guard += 1
        val oldest = CheckpointId(committed.minBy(_._1)._1, committed.minBy(_._1)._2)
        files.lineageOf(oldest) match {
          case Some(l) if l.fromEmpty          => noteFreshStart(oldest)
          case Some(l) if l.ancestors.nonEmpty => l.ancestors.foreach(x => committed(x.version) = x.uniqueId)
          case _                               => guard = Int.MaxValue
        }
      }
      committed.toMap
    }
  }

  /** The committed lineage starts afresh at `f`: versions below it belong to another lineage. */
  private def noteFreshStart(f: CheckpointId): Unit = committed.synchronized {
    committed.keys.filter(_ < f.version).toSeq.foreach(committed.remove)
    committedFreshStart = Some(f)
  }
}

package io.lineagestore.store

import java.util.concurrent.atomic.AtomicReference

import scala.collection.mutable
import scala.util.Try

import io.lineagestore.format.SnapshotIndex
import io.lineagestore.lineage._

/** One store's clean-up in the provider: what it knows of the committed lineage and of the files that exist,
  * and the run that gathers a [[CleanupInput]], asks [[CleanupPlanner]] (the one clean-up decision, shared
  * with `lineagestore gc`) and executes it with [[CleanupSteps]].
  *
  * Knowledge instead of listing: the committed lineage comes from the loads Spark asked for (and delta
  * headers read back to a snapshot), existing files from this store's own commits and uploads. The store is
  * listed only by the orphan sweep: on the first run and every `orphanSweepEveryCleanups` runs.
  *
  * Threads: the task thread reports loads, commits and uploads; Spark's maintenance thread runs [[run]]. The
  * committed lineage is one immutable [[CommittedLineage]] replaced atomically; the known files and the index
  * cache are each guarded by their own monitor; `runsSinceSweep` belongs to the maintenance thread.
  */
private[store] final class LineageCleanup(
    files: CheckpointFiles,
    settings: StoreSettings,
    crash: CrashPoints,
    clock: () => Long,
    pendingBlobs: PendingBlobs
) {

  private val lineage = new AtomicReference(CommittedLineage.Unknown)
  private val knownFiles = mutable.Set.empty[CheckpointFile]
  private val indexCache = mutable.Map.empty[CheckpointId, SnapshotIndex]
  private var runsSinceSweep = Int.MaxValue
  // the delta the task thread is writing (set before its temporary exists, cleared once it is renamed or
  // given up); read by the maintenance thread after it listed the temporaries, so a listed temporary of the
  // batch in progress is always seen as such
  @volatile private var deltaInProgress: Option[CheckpointId] = None

  // ---- what the store reports -----------------------------------------------------------------------------

  /** Spark loaded `head` (so it is committed) by `plan`, whose lineage is committed too. */
  def loaded(head: CheckpointId, plan: LoadPlan): Unit =
    lineage.updateAndGet(_.loaded(head, plan.lineage, plan.freshStart))

  /** What was committed before belongs to another lineage now; the next load tells the new one. */
  def forgetCommitted(): Unit = lineage.set(CommittedLineage.Unknown)

  def fileWritten(f: CheckpointFile): Unit = knownFiles.synchronized(knownFiles += f)

  /** The task thread writes (Some) or no longer writes (None) the delta of checkpoint `id`. */
  def writingDelta(id: Option[CheckpointId]): Unit = deltaInProgress = id

  def indexKnown(id: CheckpointId, index: SnapshotIndex): Unit =
    indexCache.synchronized(indexCache(id) = index)

  def readIndex(id: CheckpointId): Option[SnapshotIndex] = readIndexOrError(id).toOption

  private def readIndexOrError(id: CheckpointId): Either[String, SnapshotIndex] =
    indexCache.synchronized(indexCache.get(id)).map(Right(_)).getOrElse {
      val read =
        Try(files.readSnapshotIndex(id)).toEither.left.map(e => Option(e.getMessage).getOrElse(e.toString))
      read.foreach(indexKnown(id, _))
      read
    }

  // ---- the run --------------------------------------------------------------------------------------------

  /** Deletes what the committed lineage no longer needs, as [[CleanupPlanner]] decides. `mayDeleteBlobs` is
    * false while a snapshot upload of this store is in flight: its new blobs are referenced by no zip yet.
    * Returns the paths deleted; throws the first deletion that failed (what it deleted before stays deleted,
    * which the decision's order makes safe).
    */
  def run(mayDeleteBlobs: Boolean): Seq[String] = {
    val known = lineage.get()
    if (known.head.isEmpty) return Nil
    // the sweep waits for a run that may delete blobs: it is the one listing, not to be spent on nothing
    val sweep = mayDeleteBlobs && runsSinceSweep >= settings.orphanSweepEveryCleanups
    val temporaries = if (sweep) {
      val (listed, temporaries) = files.listRoot()
      knownFiles.synchronized { knownFiles.clear(); knownFiles ++= listed }
      runsSinceSweep = 0
      Some(temporaries)
    } else {
      if (mayDeleteBlobs) runsSinceSweep += 1
      None
    }
    val existing = knownFiles.synchronized(knownFiles.toSeq)
    val snapshots = existing.filter(_.kind == CheckpointId.Snapshot).map(_.id).toSet
    val retain = settings.minVersionsToRetain
    val extended = known.oldestKnown.fold(known) { oldest =>
      known.extendDown(oldest, files, CleanupPlanner.knowsEnough(_, retain, snapshots))
    }
    // keep what the walk learned, unless a load replaced the lineage meanwhile
    lineage.compareAndSet(known, extended)
    val listing =
      if (sweep) Some(files.listSharedBlobs().map(b => SharedBlob(b.name, b.size, b.modificationTimeMs)))
      else None
    val input = CleanupInput(
      extended,
      existing,
      existingIsListing = false, // a listing from an earlier sweep plus what this store wrote since
      retain,
      listing,
      mayDeleteBlobs,
      clock(),
      settings.orphanGracePeriodMs,
      temporaries = temporaries,
      deltaBeingWritten = deltaInProgress // read after the listing above
    )
    val decision = CleanupPlanner.decide(input, id => readIndexOrError(id).map(_.sharedBlobs))
    if (listing.isDefined && decision.blobsDecided)
      pendingBlobs.swept(decision.youngOrphans.map(_.name).toSet)
    // a retained index could not be read: sweep next time, which finds the blobs skipped now
    if (mayDeleteBlobs && !decision.blobsDecided) runsSinceSweep = Int.MaxValue
    val outcome = CleanupSteps.run(decision, files, crash, pendingBlobs.deleted)
    val gone = outcome.deleted.toSet
    knownFiles.synchronized(knownFiles.filterInPlace(f => !gone(f.name)))
    indexCache.synchronized(decision.zips.filter(f => gone(f.name)).foreach(f => indexCache.remove(f.id)))
    outcome.failure.foreach { case (_, e) => throw e }
    outcome.deleted
  }
}

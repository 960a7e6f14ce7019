package io.lineagestore.lineage

/** A shared blob as a listing of the shared area shows it. */
final case class SharedBlob(name: String, size: Long, modifiedMs: Long)

/** A temporary file of an unfinished write in the store's directory (io.lineagestore.storage.TemporaryBlobs),
  * as listed: left by a writer that died (a batch's delta written while it ran, an upload's zip), or still
  * being written. `target`: the checkpoint file it was for, when its name says.
  */
final case class TemporaryFile(name: String, size: Long, modifiedMs: Long, target: Option[CheckpointFile])

/** Why clean-up deletes a shared blob. */
sealed trait BlobVerdict
object BlobVerdict {

  /** Every snapshot that referenced it is deleted by the same clean-up. */
  final case class OfDeletedSnapshots(snapshots: Seq[CheckpointId]) extends BlobVerdict

  /** No snapshot references it and it is older than the grace period: a crash leftover. */
  final case class Orphan(ageMs: Long) extends BlobVerdict
}

/** Why clean-up deletes nothing at all. */
sealed trait CleanupRefusal
object CleanupRefusal {

  /** No committed checkpoint of the store is known yet. */
  case object NoHead extends CleanupRefusal

  /** Spark's commit log and the delta headers disagree on the committed lineage. */
  final case class Inconsistent(conflicts: Seq[String]) extends CleanupRefusal

  /** A listing of the store does not show the newest committed checkpoint. */
  final case class HeadMissing(head: CheckpointId) extends CleanupRefusal
}

/** What clean-up could not read, so it deletes less than it would; `error`: the failure's own message. Data,
  * not sentences: the command line words them (python/lineagestore/cli/gc.py).
  */
sealed trait CleanupWarning
object CleanupWarning {

  /** A delta header read to learn the committed lineage could not be read: what is known stops there. */
  final case class LineageUnreadable(error: String) extends CleanupWarning

  /** The index of `snapshot`, which clean-up deletes, cannot be read: its blobs are left to the orphan sweep.
    */
  final case class ExpiredIndexUnreadable(snapshot: CheckpointId, error: String) extends CleanupWarning

  /** The index of retained `snapshot` cannot be read: it may reference any blob, so no blob is deleted. */
  final case class RetainedIndexUnreadable(snapshot: CheckpointId, error: String) extends CleanupWarning
}

/** What one clean-up of one store may know, gathered by its caller.
  *
  * @param lineage
  *   the committed lineage as known, extended down to what retention needs ([[CleanupPlanner.knowsEnough]])
  * @param existing
  *   checkpoint files known to exist
  * @param existingIsListing
  *   `existing` comes from listing the store, so the head's files must be in it
  * @param sharedListing
  *   the shared area as listed, when it was (the tools; the provider's orphan sweep); None: only the blobs of
  *   deleted snapshots are candidates
  * @param mayDeleteBlobs
  *   false while a snapshot upload of this store is in flight in this process: its new blobs are referenced
  *   by no zip yet. Expired snapshots then stay too (their indexes say which blobs they leave unreferenced).
  * @param temporaries
  *   the temporaries of unfinished writes in the store's directory, when it was listed (with `sharedListing`)
  * @param deltaBeingWritten
  *   the delta this process is writing now for the store's batch in progress (known after the listing was
  *   made): its temporary is never deleted, whatever its version (a re-run from an older version writes a
  *   delta at or below the committed head) and however old
  * @param retired
  *   the store's partition no longer exists and no batch Spark retains names it ([[CleanupPlanner.retired]]):
  *   nothing of its committed lineage is retained
  */
final case class CleanupInput(
    lineage: CommittedLineage,
    existing: Seq[CheckpointFile],
    existingIsListing: Boolean,
    minVersionsToRetain: Int,
    sharedListing: Option[Seq[SharedBlob]],
    mayDeleteBlobs: Boolean,
    nowMs: Long,
    graceMs: Long,
    retired: Boolean = false,
    temporaries: Option[Seq[TemporaryFile]] = None,
    deltaBeingWritten: Option[CheckpointId] = None
)

/** The deletions of one clean-up, in the order they must run (see [[CleanupPlanner]]). `blobsDecided` is
  * false when a retained snapshot's index could not be read: then no blob is deleted this time.
  */
final case class CleanupDecision(
    refused: Option[CleanupRefusal],
    retention: Option[RetentionPlan],
    zips: Seq[CheckpointFile],
    blobs: Seq[(String, BlobVerdict)],
    deltas: Seq[CheckpointFile],
    youngOrphans: Seq[SharedBlob],
    blobsDecided: Boolean,
    warnings: Seq[CleanupWarning],
    temporaries: Seq[TemporaryFile] = Nil
) {
  def isEmpty: Boolean = zips.isEmpty && blobs.isEmpty && deltas.isEmpty && temporaries.isEmpty
}

/** The one clean-up decision, used by the provider's maintenance and by `lineagestore gc`; pure (it reads
  * snapshot indexes only through the function it is given). The steps, in this order:
  *   1. zips of snapshots the retention window no longer needs ([[RetentionPlanner]]);
  *   1. shared blobs that only those snapshots referenced, and, when the shared area was listed, blobs no
  *      remaining snapshot references that are older than the grace period (a younger one may belong to an
  *      upload in flight in another process);
  *   1. deltas the retention window no longer needs;
  *   1. temporaries of unfinished writes older than the grace period, with the same listing and under the
  *      same condition as orphans (no upload of this store in flight), except a delta's of a version above
  *      the committed head (a batch may still be writing it, however long it runs) and the delta this process
  *      is writing (`deltaBeingWritten`, of any version).
  * Zips go first: a crash part-way then leaves at most unreferenced blobs, which a later listing finds. A
  * retained snapshot whose index cannot be read may reference any blob: no blob is deleted then (zips and
  * deltas still are).
  */
object CleanupPlanner {

  /** Whether a store is retired: a repartition shrank its operator below its partition (`partitionId >=
    * currentPartitions`, the count the newest committed batch names) and the newest batch naming the store,
    * `lastNamedBatch`, has left the window of batches Spark retains (`retainBatches` up to `latestBatch`), so
    * no restart, not even from an older retained batch, reads it again. Its files then go like any expired
    * version's (see [[decide]]); until then they stay, because restarting from a batch before the repartition
    * needs them.
    */
  def retired(
      partitionId: Int,
      currentPartitions: Int,
      lastNamedBatch: Long,
      latestBatch: Long,
      retainBatches: Int
  ): Boolean =
    shrunkBelow(partitionId, currentPartitions) && lastNamedBatch <= latestBatch - retainBatches

  /** Whether a repartition shrank the store's operator below its partition: `currentPartitions` (the count
    * the newest committed batch names; 0 when unknown) no longer includes `partitionId`.
    */
  def shrunkBelow(partitionId: Int, currentPartitions: Int): Boolean =
    currentPartitions > 0 && partitionId >= currentPartitions

  /** Whether `lineage` reaches far enough down for retention to decide: to a committed snapshot at or below
    * the oldest retained version (below it nothing else is needed). The walk ends by itself at version 1 and
    * at a fresh start.
    */
  def knowsEnough(
      lineage: CommittedLineage,
      minVersionsToRetain: Int,
      snapshots: Set[CheckpointId]
  ): Boolean =
    lineage.head.forall { head =>
      val oldestRetained = math.max(1L, head.version - minVersionsToRetain + 1)
      lineage.committed.exists { case (v, id) => v <= oldestRetained && snapshots(CheckpointId(v, id)) }
    }

  /** @param blobsOf
    *   the shared blobs snapshot `id` references, read from its index, or why the index cannot be read
    */
  def decide(input: CleanupInput, blobsOf: CheckpointId => Either[String, Set[String]]): CleanupDecision = {
    val lineage = input.lineage
    def refuse(why: CleanupRefusal) =
      CleanupDecision(Some(why), None, Nil, Nil, Nil, Nil, blobsDecided = false, Nil)
    val head = lineage.head.getOrElse(return refuse(CleanupRefusal.NoHead))
    if (lineage.conflicts.nonEmpty) return refuse(CleanupRefusal.Inconsistent(lineage.conflicts))
    // a retired store's head may already be gone (an earlier clean-up stopped part-way): nothing is retained
    if (!input.retired && input.existingIsListing && !input.existing.exists(_.id == head))
      return refuse(CleanupRefusal.HeadMissing(head))

    val plan =
      if (input.retired) RetentionPlanner.retire(head, input.existing)
      else
        RetentionPlanner.plan(
          head,
          lineage.committed,
          input.existing,
          input.minVersionsToRetain,
          lineage.freshStart
        )
    val (expiredZips, deltas) = plan.delete.partition(_.kind == CheckpointId.Snapshot)
    val zips = if (input.mayDeleteBlobs) expiredZips else Nil
    val warnings = Seq.newBuilder[CleanupWarning] ++= lineage.errors.map(CleanupWarning.LineageUnreadable(_))
    val dropped = zips.map(f => f.id -> blobsOf(f.id))
    warnings ++= dropped.collect { case (id, Left(err)) => CleanupWarning.ExpiredIndexUnreadable(id, err) }
    val retainedIndexes = plan.retainedSnapshots.map(id => id -> blobsOf(id))
    val retained = retainedIndexes.map(_._2)
    val unreadable = retainedIndexes.collect { case (id, Left(err)) =>
      CleanupWarning.RetainedIndexUnreadable(id, err)
    }
    warnings ++= unreadable
    val blobsDecided = input.mayDeleteBlobs && unreadable.isEmpty

    val (blobs, young) =
      if (!blobsDecided) (Nil, Nil)
      else {
        val referenced = retained.collect { case Right(b) => b }.flatten.toSet
        val listed = input.sharedListing.map(_.map(b => b.name -> b).toMap)
        val byDropped = dropped
          .collect { case (id, Right(bs)) => bs.toSeq.map(_ -> id) }
          .flatten
          .filterNot { case (b, _) => referenced(b) || listed.exists(!_.contains(b)) }
          .groupBy(_._1)
          .map { case (b, xs) => b -> xs.map(_._2).sortBy(_.version) }
        val orphans =
          input.sharedListing.getOrElse(Nil).filter(b => !referenced(b.name) && !byDropped.contains(b.name))
        val (old, recent) = orphans.partition(_.modifiedMs < input.nowMs - input.graceMs)
        val ofDropped =
          byDropped.toSeq.sortBy(_._1).map { case (b, ids) => b -> BlobVerdict.OfDeletedSnapshots(ids) }
        val expired =
          old.sortBy(_.name).map(b => b.name -> BlobVerdict.Orphan(math.max(0L, input.nowMs - b.modifiedMs)))
        (ofDropped ++ expired, recent.sortBy(_.name))
      }
    val temporaries =
      if (!input.mayDeleteBlobs) Nil
      else
        input.temporaries.getOrElse(Nil).filter { t =>
          t.modifiedMs < input.nowMs - input.graceMs &&
          !t.target.exists(f =>
            f.kind == CheckpointId.Delta &&
              (f.id.version > head.version || input.deltaBeingWritten.contains(f.id))
          )
        }
    CleanupDecision(
      None,
      Some(plan),
      zips,
      blobs,
      deltas,
      young,
      blobsDecided,
      warnings.result(),
      temporaries.sortBy(_.name)
    )
  }
}

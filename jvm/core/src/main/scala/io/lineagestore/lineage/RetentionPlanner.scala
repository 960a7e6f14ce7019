package io.lineagestore.lineage

import io.lineagestore.lineage.CheckpointId.{Delta, FileKind, Snapshot}

/** A checkpoint file known to exist. */
final case class CheckpointFile(id: CheckpointId, kind: FileKind) {
  def name: String = if (kind == Delta) id.deltaFileName else id.snapshotFileName
}

/** Result of retention planning. `delete` never contains a file the retained versions need; `snapshotBase` is
  * the checkpoint every retained version can be rebuilt from (the empty state when it is version 0).
  */
final case class RetentionPlan(
    oldestRetained: Long,
    snapshotBase: CheckpointId,
    delete: Seq[CheckpointFile],
    retainedSnapshots: Seq[CheckpointId]
)

/** Pure clean-up planning from the committed lineage. Retains versions [head - minVersionsToRetain + 1, head]
  * (what Spark's minBatchesToRetain asks for) and everything needed to rebuild each of them: the newest
  * snapshot of the committed lineage at or below the oldest retained version, and every committed delta after
  * it. Losing attempts (another unique ID at a version) are removed only once their version left the window.
  */
object RetentionPlanner {

  /** @param committed
    *   committed unique ID per version, covering at least head down to the snapshot base; if it does not
    *   reach that far, nothing below the known part is deleted.
    * @param existing
    *   checkpoint files known to exist
    * @param freshStart
    *   the committed checkpoint whose delta starts from the empty state (see [[Lineage.fromEmpty]]), if the
    *   committed lineage has one: a base like a snapshot, below which nothing belongs to the lineage. While
    *   it is newer than the oldest retained version, the versions below it are another lineage (the state
    *   before a repartition) that the commit log may still name: nothing below it is deleted until the
    *   retention window has moved past it.
    */
  def plan(
      head: CheckpointId,
      committed: Map[Long, String],
      existing: Seq[CheckpointFile],
      minVersionsToRetain: Int,
      freshStart: Option[CheckpointId] = None
  ): RetentionPlan = {
    require(minVersionsToRetain >= 1, "minVersionsToRetain must be >= 1")
    require(committed.get(head.version).contains(head.uniqueId), s"committed lineage must contain head $head")
    val oldestRetained = math.max(1L, head.version - minVersionsToRetain + 1)
    val snapshots = existing.filter(_.kind == Snapshot).map(_.id).toSet
    if (freshStart.exists(_.version > oldestRetained)) {
      // the window still reaches below the fresh start, into another lineage: keep everything for now
      return RetentionPlan(oldestRetained, freshStart.get, Nil, snapshots.toSeq.sortBy(_.version))
    }

    // newest committed snapshot at or below the oldest retained version; walking down needs a known lineage
    var v = oldestRetained
    var base: Option[CheckpointId] = None
    var lineageKnown = true
    while (base.isEmpty && v >= 1 && lineageKnown) {
      committed.get(v) match {
        case Some(id) if isBase(CheckpointId(v, id), snapshots, freshStart) =>
          base = Some(CheckpointId(v, id))
        case Some(_) => v -= 1
        case None    => lineageKnown = false
      }
    }
    val snapshotBase = base.getOrElse(CheckpointId.Empty)
    if (base.isEmpty && !lineageKnown) {
      // cannot prove what the oldest retained version needs: delete nothing
      return RetentionPlan(oldestRetained, snapshotBase, Nil, snapshots.toSeq.sortBy(_.version))
    }
    val delete = existing.filter { f =>
      val ver = f.id.version
      val isCommitted = committed.get(ver).contains(f.id.uniqueId)
      ver < snapshotBase.version || (ver < oldestRetained && !isCommitted)
    }
    val deleted = delete.toSet
    val retainedSnapshots = existing.filter(f => f.kind == Snapshot && !deleted(f)).map(_.id)
    RetentionPlan(oldestRetained, snapshotBase, delete.sortBy(f => (f.id.version, f.name)), retainedSnapshots)
  }

  /** A committed checkpoint retention can keep the window from: one with a snapshot, or the fresh start (its
    * delta holds the whole state). Retention deletes every file below the base it keeps ([[plan]]).
    */
  private def isBase(id: CheckpointId, snapshots: Set[CheckpointId], freshStart: Option[CheckpointId]) =
    snapshots.contains(id) || freshStart.contains(id)

  /** The oldest version of the committed lineage that retention still holds, judged from the files alone (no
    * window given): what `lineagestore verify` and `inspect` check by default, so that what a clean-up
    * ([[plan]], by gc or the provider's maintenance, with any window) removed is not called damage.
    *
    * Retention keeps everything from a committed base up (a snapshot or the fresh start) and deletes whatever
    * is below it: the oldest committed base still present is where retention holds from, unless every
    * committed delta below it is still there down to version 1 (or down to what is known of the lineage),
    * which no clean-up has touched: then all of it is held. Without any base retention removed nothing
    * committed, and the oldest known version is held. A missing file at or above the result is damage; below
    * it, the next clean-up's to delete (a clean-up stopped part-way leaves deltas without their base).
    * Nothing below a fresh start is on the lineage (a repartition or migrate wrote it; what the commit log
    * names below it is another lineage, possibly another provider's files under the same names): retention
    * holds from the fresh start at the lowest.
    *
    * A store a repartition shrank its operator below (`shrunk`, [[CleanupPlanner.shrunkBelow]]) that holds no
    * file of its committed lineage any more is one a clean-up retired whole ([[retire]]): nothing of it is
    * held (the result is past its newest version), so its missing files are not damage. One that still holds
    * some is judged like any store: restarting from a batch before the repartition reads it.
    *
    * @return
    *   None when no committed version is known
    */
  def heldFrom(
      committedAll: Map[Long, String],
      existing: Seq[CheckpointFile],
      freshStart: Option[CheckpointId] = None,
      shrunk: Boolean = false
  ): Option[Long] = {
    val committed = freshStart.fold(committedAll)(f => committedAll.filter(_._1 >= f.version))
    if (committed.isEmpty) return None
    val snapshots = existing.filter(_.kind == Snapshot).map(_.id).toSet
    val deltas = existing.filter(_.kind == Delta).map(_.id).toSet
    val onLineage = (snapshots ++ deltas).exists(id => committed.get(id.version).contains(id.uniqueId))
    if (shrunk && !onLineage) return Some(committed.keys.max + 1)
    val oldestKnown = committed.keys.min
    val oldestBase = committed.toSeq
      .map { case (v, id) => CheckpointId(v, id) }
      .filter(isBase(_, snapshots, freshStart))
      .sortBy(_.version)
      .headOption
    oldestBase match {
      case None       => Some(oldestKnown)
      case Some(base) =>
        val below = (oldestKnown until base.version).reverse
        val untouched = below.forall(v => committed.get(v).exists(id => deltas(CheckpointId(v, id))))
        Some(if (untouched) oldestKnown else base.version)
    }
  }

  /** A retired store ([[CleanupPlanner.retired]]): every file up to its committed `head` goes, snapshots
    * included; files above it stay (they belong to no batch Spark has committed: a repartition that grows the
    * operator again may be writing them right now, and they are the next clean-up's to judge).
    */
  def retire(head: CheckpointId, existing: Seq[CheckpointFile]): RetentionPlan = {
    val (delete, keep) = existing.partition(_.id.version <= head.version)
    RetentionPlan(
      head.version + 1,
      CheckpointId.Empty,
      delete.sortBy(f => (f.id.version, f.name)),
      keep.filter(_.kind == Snapshot).map(_.id).sortBy(_.version)
    )
  }
}

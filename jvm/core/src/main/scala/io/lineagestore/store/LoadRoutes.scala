package io.lineagestore.store

import scala.collection.mutable

import io.lineagestore.format.CorruptCheckpointFileException
import io.lineagestore.lineage.{CheckpointId, LoadPlan}

/** How a load reaches its target when a file it chose is gone or unsound. `attempt(unusable)` plans without
  * the snapshots in `unusable` and executes the plan; a failed attempt means:
  *   - a damaged snapshot (its zip, INDEX or an SST: [[LineageStoreState.DamagedSnapshot]]): a detour,
  *     planned again without it (an older snapshot and more deltas, or the deltas down to the empty state),
  *     at most [[LineageStoreState.MaxDetours]] times, each counted;
  *   - a file gone: clean-up (in this process or another) deleted an older base once a newer snapshot of the
  *     lineage was complete, between planning and reading; planned again from what exists now, at most
  *     [[LineageStoreState.MaxReplans]] times;
  *   - a file gone or damaged on a detour's route (or more damaged snapshots than detours allowed): no route
  *     is left, and the load fails naming every damaged file and the versions they leave unbuildable
  *     ([[NoRouteException]]);
  *   - anything else fails the load as it is (a damaged file with no detour taken names itself).
  * `failed` runs after every failed attempt (what the local directory holds is unknown then).
  */
private[store] object LoadRoutes {
  import LineageStoreState._

  /** The plan that loaded the target, and the snapshots routed around on the way (file and why). */
  final case class Routed(plan: LoadPlan, detours: Seq[String])

  def load(target: CheckpointId, counters: StoreCounters, failed: () => Unit)(
      attempt: Set[CheckpointId] => LoadPlan
  ): Routed = {
    val skipped = mutable.LinkedHashMap.empty[CheckpointId, CorruptCheckpointFileException]
    def go(replans: Int): LoadPlan = {
      var detoured = false
      val plan =
        try attempt(skipped.keySet.toSet)
        catch {
          case t: Throwable =>
            failed()
            t match {
              case DamagedSnapshot(id, cause) if skipped.size < MaxDetours =>
                skipped(id) = cause
                counters.snapshotDetours.incrementAndGet()
                detoured = true
                null
              case DamagedSnapshot(_, cause) if skipped.nonEmpty =>
                throw NoRouteException(target, skipped.values.toSeq :+ cause)
              case DamagedSnapshot(_, cause)                     => throw cause
              case _ if replans < MaxReplans && isMissingFile(t) =>
                counters.loadsReplanned.incrementAndGet()
                null
              case _ if skipped.nonEmpty && unusableFile(t).isDefined =>
                throw NoRouteException(target, skipped.values.toSeq :+ unusableFile(t).get)
              case _ => throw t
            }
        }
      if (plan != null) plan
      else go(if (detoured) replans else replans + 1)
    }
    val plan = go(0)
    Routed(plan, skipped.toSeq.map { case (id, e) => s"snapshot $id skipped: ${e.file} ${e.detail}" })
  }
}

package io.lineagestore.store

/** Which commits freeze a snapshot: the one decision, asked by [[LineageStore]] at every commit. Pure.
  *
  * A store freezes at least every `minDeltasForSnapshot` (m) versions, on a phase of its own: partition p
  * freezes at the versions v with (v - p) mod m = 0, so partition 0 at m, 2m, 3m, ... (where every store of a
  * query started at version 0 froze before phases), partition 1 at 1, m + 1, ..., and so on. A query's stores
  * then spread their freezes, and their snapshots' uploads, over the interval instead of all freezing at one
  * version. Measured why: at 10M keys of 1 KiB on S3, the 16 stores of one query froze together and uploaded
  * 11.9 GB within three batches, whose commits took 4.7-6.3 s against 1.2-1.6 s in the others, the commit p95
  * (docs/benchmarks.md). Spark's provider spreads them by accident: its maintenance thread uploads one store
  * at a time. With phases, the same run's commit p95 went from 6.1 to 3.7 s and its slowest batch from 35.6
  * to 19.4 s, the mean batch unchanged; the median batch, which had carried no snapshot, now carries its
  * share.
  *
  * A commit also freezes:
  *   - at a fresh start (a lineage begun from the empty state at a version above 0, `loadEmpty`: a
  *     repartitioned or migrated store): its lineage has no older snapshot to restore from;
  *   - when its lineage lags more than `maxSnapshotLagDeltas` behind the newest uploaded snapshot (then it
  *     uploads in the batch, a catch-up: [[LineageStore]]);
  *   - when m versions or more passed since the presumed snapshot, on phase or not (a store whose presumed
  *     snapshot is older than its phase allows: one restored from an old snapshot).
  *
  * After a freeze off its phase (a fresh start, a catch-up, a forced freeze), the store's next on-phase
  * version comes within m: one shorter interval, then the store is on its phase again. Snapshots are never
  * more than m versions apart, so what a restore replays is bounded as it was without phases.
  */
object SnapshotSchedule {

  /** The phase of partition `partitionId` in an interval of `every` versions: 0 until `every` - 1. */
  def phase(partitionId: Int, every: Int): Int = Math.floorMod(partitionId, math.max(1, every))

  /** Whether version `version` is on phase `phase` of an interval of `every` versions. */
  def onPhase(version: Long, phase: Int, every: Int): Boolean =
    Math.floorMod(version - phase, math.max(1, every).toLong) == 0L

  /** Whether the commit of `version` freezes a snapshot (see the object's doc for the rule).
    *
    * @param presumedSnapshotVersion
    *   the version of the snapshot the lineage presumes before this commit (0: none)
    * @param freshStart
    *   the commit's lineage starts at the empty state given at a version above 0 (it has no older snapshot)
    * @param lagging
    *   the commit leaves its lineage more than `maxSnapshotLagDeltas` deltas past its newest uploaded
    *   snapshot
    */
  def freezes(
      version: Long,
      presumedSnapshotVersion: Long,
      freshStart: Boolean,
      lagging: Boolean,
      phase: Int,
      every: Int
  ): Boolean =
    freshStart || lagging || version - presumedSnapshotVersion >= every || onPhase(version, phase, every)
}

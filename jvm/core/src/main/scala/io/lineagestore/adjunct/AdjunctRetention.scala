package io.lineagestore.adjunct

import io.lineagestore.lineage.CheckpointId

/** What an adjunct table's bookkeeping may lose (docs/adjunct-tables.md "Clean-up"): pure decisions over
  * names and numbers; the glue lists, reads and deletes.
  */
object AdjunctRetention {

  /** Whether the sweep runs at step `n` (a batch id or a table version): every `every` steps, so its listing
    * costs one request per `every` batches, not one per batch.
    */
  def sweepsAt(n: Long, every: Int): Boolean = every > 0 && n > 0 && n % every == 0

  /** The enriching query's per-batch version records (`<checkpoint>/adjunct/<table>/<batch>`) no run can read
    * again, while batch `running` runs: Spark runs a batch only once every earlier one is in its commit log,
    * and keeps the last `minBatchesToRetain` batches' offsets and commits, so only those can be run again (a
    * re-run of the last one after a crash, or of any of them after a user rolls the checkpoint back). Older
    * records go; `running`'s and those of the kept batches stay.
    */
  def expiredBatchRecords(recorded: Seq[Long], running: Long, minBatchesToRetain: Int): Seq[Long] =
    recorded.filter(_ < running - math.max(minBatchesToRetain, 1))

  /** Which replica markers to delete: those whose replica holds a store checkpoint no kept table version
    * names (`held`: by marker, the partition, -1 for a table of one store, and the checkpoint). Such a
    * replica cannot serve any lookup without loading a kept version first, which writes it a new marker; a
    * gone executor's marker ends here too, once the table has moved `retain` versions past it.
    */
  def staleMarkers[M](
      markers: Seq[M],
      held: M => (Int, CheckpointId),
      named: Set[(Int, CheckpointId)]
  ): Seq[M] =
    markers.filterNot(m => named(held(m)))
}

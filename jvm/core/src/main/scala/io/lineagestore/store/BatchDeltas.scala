package io.lineagestore.store

import scala.util.control.NonFatal

import io.lineagestore.engine.{BatchLog, PendingWrites}
import io.lineagestore.format.{DeltaCodec, DeltaHeader}
import io.lineagestore.lineage.CheckpointId

/** Writes each batch's delta. When every change of the batch is its key's first (a streaming aggregation, a
  * deduplication: each key written once per batch), the delta is written while the batch runs
  * ([[DeltaInProgress]], opened by [[openLog]] at the batch's first change, fed by its [[PendingWrites]]),
  * and the commit only ends it; otherwise the commit writes the batch's net changes, as before, and the
  * partial delta is given up (no blob appears under its name).
  *
  * A store whose batches change keys twice (or append to lists) would write most of every batch twice, so
  * after such a batch the next [[UnstreamedAfterRefusal]] batches are not streamed, then streaming is tried
  * again. Task thread only.
  */
private[store] final class BatchDeltas(files: CheckpointFiles, codec: DeltaCodec, counters: StoreCounters) {
  import BatchDeltas._

  private var unstreamedBatches = 0

  /** The log of a batch about to make its first change, to be committed as `next` (null: this batch's delta
    * is written at commit). A blob store that cannot start the delta leaves it to the commit, which reports
    * the failure if it persists.
    */
  def openLog(next: NextCheckpoint): BatchLog =
    if (unstreamedBatches > 0 || next == null) null
    else
      try new DeltaRecords.Streamed(files.startDelta(next.id, next.lineage, next.fromEmpty, codec))
      catch { case NonFatal(_) => null }

  /** Writes the delta of the batch `pending` holds as checkpoint `next`. */
  def write(pending: PendingWrites, next: NextCheckpoint): Unit = {
    val header = DeltaHeader(files.store, next.id, next.lineage, next.fromEmpty)
    pending.takeLog() match {
      case streamed: DeltaRecords.Streamed
          if streamed.delta.failure.isEmpty && streamed.delta.header == header =>
        streamed.delta.finish()
        counters.deltasStreamed.incrementAndGet()
      case other =>
        if (other != null) other.discard()
        // a delta the blob store failed mid-batch is written whole below (anything else was never streamed)
        val givenUp = other match {
          case s: DeltaRecords.Streamed => s.delta.failure.isDefined; case _ => false
        }
        if (givenUp) counters.streamedDeltasGivenUp.incrementAndGet()
        if (pending.logRefused) unstreamedBatches = UnstreamedAfterRefusal
        else if (unstreamedBatches > 0) unstreamedBatches -= 1
        files.writeDelta(next.id, next.lineage, codec, next.fromEmpty, pending.hasMerges) { w =>
          DeltaRecords.write(pending, w)
        }
    }
  }
}

private[store] object BatchDeltas {
  val UnstreamedAfterRefusal = 8
}

/** The checkpoint a batch in progress commits as: drawn at its first change, when its delta's header goes
  * out, or at its commit. `fromEmpty`: the delta holds the whole state (see [[DeltaHeader.fromEmpty]]).
  */
private[store] final case class NextCheckpoint(
    id: CheckpointId,
    lineage: Seq[CheckpointId],
    fromEmpty: Boolean
)

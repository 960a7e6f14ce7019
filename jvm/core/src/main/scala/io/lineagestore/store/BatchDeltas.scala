package io.lineagestore.store

import io.lineagestore.engine.{BatchLog, PendingWrites}
import io.lineagestore.format.DeltaCodec
import io.lineagestore.lineage.CheckpointId

/** Writes each batch's delta. When every change of the batch was its key's first (a streaming aggregation, a
  * deduplication: each key written once per batch), the records were encoded and compressed while the batch
  * ran ([[DeltaRecords.Streamed]], opened by [[openLog]] for the batch's [[PendingWrites]]), and the commit
  * only writes them after the header; otherwise the commit encodes the batch's net changes, as before.
  *
  * A store whose batches change keys twice (or append to lists) would encode most of every batch twice, so
  * after such a batch the next [[UnstreamedAfterRefusal]] batches are not streamed, then streaming is tried
  * again. Task thread only.
  */
private[store] final class BatchDeltas(files: CheckpointFiles, codec: DeltaCodec, counters: StoreCounters) {
  import BatchDeltas._

  private var unstreamedBatches = 0

  /** The log of a batch about to make its first change (null: this batch's delta is written at commit). */
  def openLog(): BatchLog = if (unstreamedBatches > 0) null else new DeltaRecords.Streamed(codec)

  /** Writes the delta of the batch `pending` holds as checkpoint `id`. */
  def write(pending: PendingWrites, id: CheckpointId, lineage: Seq[CheckpointId], fromEmpty: Boolean): Unit =
    pending.takeLog() match {
      case streamed: DeltaRecords.Streamed =>
        files.writeDelta(id, lineage, fromEmpty, streamed.body)
        counters.deltasStreamed.incrementAndGet()
      case other =>
        if (other != null) other.discard()
        if (pending.logRefused) unstreamedBatches = UnstreamedAfterRefusal
        else if (unstreamedBatches > 0) unstreamedBatches -= 1
        files.writeDelta(id, lineage, codec, fromEmpty, pending.hasMerges) { w =>
          DeltaRecords.write(pending, w)
        }
    }
}

private[store] object BatchDeltas {
  val UnstreamedAfterRefusal = 8
}

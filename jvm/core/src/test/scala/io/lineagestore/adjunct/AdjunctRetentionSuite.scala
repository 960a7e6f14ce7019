package io.lineagestore.adjunct

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.lineage.CheckpointId

/** The adjunct clean-up decisions on examples: which version records and replica markers may go. */
class AdjunctRetentionSuite extends AnyFunSuite {

  test("sweeps run every `every` steps, never at step 0 or when disabled") {
    assert((0L to 12L).filter(AdjunctRetention.sweepsAt(_, 4)) == Seq(4L, 8L, 12L))
    assert(!(0L to 12L).exists(AdjunctRetention.sweepsAt(_, 0)))
  }

  test("version records: the running batch's and the last minBatchesToRetain batches' stay") {
    val recorded = (0L to 9L) :+ 20L // 20: a record past the running batch (a rolled-back checkpoint) stays
    assert(AdjunctRetention.expiredBatchRecords(recorded, running = 9, minBatchesToRetain = 3) == (0L to 5L))
    assert(AdjunctRetention.expiredBatchRecords(recorded, running = 3, minBatchesToRetain = 100).isEmpty)
    // a nonsensical retention still keeps the batch before the running one (a re-run of it reads its record)
    assert(AdjunctRetention.expiredBatchRecords(recorded, running = 5, minBatchesToRetain = 0) == (0L to 3L))
  }

  test("replica markers: those holding a checkpoint no kept version names go, per partition") {
    val a2 = CheckpointId(2, "a2")
    val a3 = CheckpointId(3, "a3")
    val named = Set(-1 -> a3, 0 -> a2, 1 -> a3)
    val markers = Seq(
      "one-store-old" -> (-1, a2),
      "one-store-kept" -> (-1, a3),
      "p0-kept" -> (0, a2),
      "p1-same-checkpoint-other-partition" -> (1, a2),
      "p1-kept" -> (1, a3)
    )
    val stale = AdjunctRetention.staleMarkers[(String, (Int, CheckpointId))](markers, _._2, named)
    assert(stale.map(_._1) == Seq("one-store-old", "p1-same-checkpoint-other-partition"))
  }
}

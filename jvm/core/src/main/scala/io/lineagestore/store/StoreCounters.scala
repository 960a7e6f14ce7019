package io.lineagestore.store

import java.util.concurrent.atomic.AtomicLong

/** Counters a store exposes as metrics; all cumulative over the store's life unless named "last". */
final class StoreCounters {
  val bytesUploaded = new AtomicLong
  val filesUploaded = new AtomicLong
  val bytesReused = new AtomicLong
  val filesReused = new AtomicLong
  val bytesDownloaded = new AtomicLong
  val filesDownloaded = new AtomicLong
  val snapshotsUploaded = new AtomicLong
  val deltasReplayed = new AtomicLong
  // loads that planned again after a file they chose was cleaned meanwhile
  val loadsReplanned = new AtomicLong
  val filesDeleted = new AtomicLong
  // commits that uploaded their lineage's snapshot themselves (lag past maxSnapshotLagDeltas), and failed to
  val catchUpSnapshots = new AtomicLong
  // damaged snapshots loads routed around (an older snapshot and more deltas)
  val snapshotDetours = new AtomicLong
  val catchUpFailures = new AtomicLong
  // freezes whose checkpoint could not be written (their snapshot is never uploaded; a later one catches up)
  val freezeFailures = new AtomicLong
  // deltas whose records were encoded while their batch ran (each change its key's first)
  val deltasStreamed = new AtomicLong
  // deltas written while their batch ran that the blob store failed mid-batch (the commit wrote them again)
  val streamedDeltasGivenUp = new AtomicLong
  val lastLoadMs = new AtomicLong
  val lastCommitMs = new AtomicLong
  // the last commit's two parts that can wait on something else: ending its delta in the blob store, and
  // handing the batch to the apply thread (which first waits for the previous batch's write and checkpoint)
  val lastCommitDeltaMs = new AtomicLong
  val lastCommitApplyWaitMs = new AtomicLong
  val lastSnapshotUploadMs = new AtomicLong
  val lastDeltaBytes = new AtomicLong
  // bytes the last committed batch spilled to local disk past maxPendingBytes (its runs' files)
  val lastSpilledBytes = new AtomicLong
}

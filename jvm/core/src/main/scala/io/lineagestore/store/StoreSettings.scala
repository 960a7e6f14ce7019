package io.lineagestore.store

import io.lineagestore.engine.RocksDbTuning
import io.lineagestore.format.DeltaCodec

/** Everything one store needs to know from configuration, already validated by the caller. */
final case class StoreSettings(
    minDeltasForSnapshot: Int = 10,
    minVersionsToRetain: Int = 100,
    maxPendingBytes: Long = 1L << 30,
    maxPendingBytesKey: String = "maxPendingBytes",
    orphanGracePeriodMs: Long = 6L * 60 * 60 * 1000,
    orphanSweepEveryCleanups: Int = 100,
    tuning: RocksDbTuning = RocksDbTuning(),
    deltaCodec: DeltaCodec = DeltaCodec.Default,
    flushAheadOfFreeze: Boolean = true // a measuring switch for CommitMicroBench, not a configuration
)

/** Named steps of commit, snapshot upload, clean-up and restore. A test passes a hook that stops the process
  * (or throws) at a step; production passes [[CrashPoints.None]]. The list is the single source of step
  * names.
  */
trait CrashPoints { def at(step: CrashPoints.Step): Unit }

object CrashPoints {
  final case class Step(name: String)
  val CommitBeforeDelta: Step = Step("commit.before-delta")
  val CommitAfterDelta: Step = Step("commit.after-delta")
  val CommitAfterLocalApply: Step = Step("commit.after-local-apply")
  val SnapshotAfterFreeze: Step = Step("snapshot.after-freeze")
  val SnapshotAfterBlobs: Step = Step("snapshot.after-blobs")
  val SnapshotAfterZip: Step = Step("snapshot.after-zip")
  val CleanupAfterZips: Step = Step("cleanup.after-zips")
  val CleanupAfterBlobs: Step = Step("cleanup.after-blobs")
  val CleanupAfterDeltas: Step = Step("cleanup.after-deltas")
  // a load that rebuilds the local directory: a snapshot's files are in it, RocksDB not reopened yet
  val RestoreAfterSnapshotFiles: Step = Step("restore.after-snapshot-files")
  // a load's deltas are replayed (WAL off: only in the memtable), the checkpoint not yet marked loaded
  val RestoreAfterReplay: Step = Step("restore.after-replay")
  val All: Seq[Step] = Seq(
    CommitBeforeDelta,
    CommitAfterDelta,
    CommitAfterLocalApply,
    SnapshotAfterFreeze,
    SnapshotAfterBlobs,
    SnapshotAfterZip,
    CleanupAfterZips,
    CleanupAfterBlobs,
    CleanupAfterDeltas,
    RestoreAfterSnapshotFiles,
    RestoreAfterReplay
  )
  val None: CrashPoints = (_: Step) => ()
}

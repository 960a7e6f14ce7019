package io.lineagestore.store

import io.lineagestore.config.LineageConf
import io.lineagestore.engine.RocksDbTuning
import io.lineagestore.format.DeltaCodec

/** Everything one store needs to know from configuration, already validated. Build it with
  * [[StoreSettings.from]], whose every default is [[LineageConf]]'s (or, for the two keys Spark owns,
  * Spark's); a test that departs from them uses `copy` and says why.
  */
final case class StoreSettings(
    minDeltasForSnapshot: Int,
    minVersionsToRetain: Int,
    maxSnapshotLagDeltas: Int,
    maxPendingBytes: Long,
    orphanGracePeriodMs: Long,
    orphanSweepEveryCleanups: Int,
    tuning: RocksDbTuning,
    deltaCodec: DeltaCodec
) {

  /** The key to raise when a batch's pending writes exceed `maxPendingBytes` (named in the error). */
  def maxPendingBytesKey: String = LineageConf.MaxPendingBytes.key
}

object StoreSettings {

  /** Spark's own defaults of `spark.sql.streaming.stateStore.minDeltasForSnapshot` and
    * `spark.sql.streaming.minBatchesToRetain`: the provider always passes Spark's values; these serve where
    * no Spark session is (the core tests, benchmarks).
    */
  val SparkMinDeltasForSnapshot = 10
  val SparkMinBatchesToRetain = 100

  /** The settings `confs` (Spark's forwarded `spark.sql.streaming.stateStore.*` keys) give, each checked. */
  def from(
      confs: Map[String, String],
      minDeltasForSnapshot: Int = SparkMinDeltasForSnapshot,
      minVersionsToRetain: Int = SparkMinBatchesToRetain
  ): StoreSettings = StoreSettings(
    minDeltasForSnapshot = math.max(1, minDeltasForSnapshot),
    minVersionsToRetain = math.max(1, minVersionsToRetain),
    // below minDeltasForSnapshot every commit between two freezes would count as lagging
    maxSnapshotLagDeltas =
      math.max(LineageConf.MaxSnapshotLagDeltas.from(confs), math.max(1, minDeltasForSnapshot)),
    maxPendingBytes = LineageConf.MaxPendingBytes.from(confs),
    orphanGracePeriodMs = LineageConf.OrphanGracePeriodMs.from(confs),
    orphanSweepEveryCleanups = LineageConf.OrphanSweepEveryCleanups.from(confs),
    tuning = RocksDbTuning(
      LineageConf.MemoryBytes.from(confs),
      LineageConf.WriteBufferBytes.from(confs),
      LineageConf.SstCompression.from(confs)
    ),
    deltaCodec = DeltaCodec.byName(LineageConf.DeltaCompression.from(confs)).getOrElse(DeltaCodec.Default)
  )

  /** Spark's own key for the snapshot interval (the provider gets it from Spark's StateStoreConf). */
  val SparkMinDeltasForSnapshotKey = "spark.sql.streaming.stateStore.minDeltasForSnapshot"

  /** [[from]], with the snapshot interval `confs` sets under Spark's key (Spark's default when absent): for
    * the settings of a session read as entries (adjunct tables' copies, the snapshot lag's bound).
    */
  def fromEntries(
      confs: Map[String, String],
      minVersionsToRetain: Int = SparkMinBatchesToRetain
  ): StoreSettings =
    from(
      confs,
      confs
        .get(SparkMinDeltasForSnapshotKey)
        .flatMap(_.trim.toIntOption)
        .getOrElse(SparkMinDeltasForSnapshot),
      minVersionsToRetain
    )

  /** Production's defaults throughout. */
  val Default: StoreSettings = from(Map.empty)
}

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
  // a commit whose lineage lags more than maxSnapshotLagDeltas: delta written and frozen, upload not begun
  val CatchUpBeforeUpload: Step = Step("catch-up.before-upload")
  // a store closing with frozen snapshots: before and after their upload
  val CloseBeforeUpload: Step = Step("close.before-upload")
  val CloseAfterUpload: Step = Step("close.after-upload")

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
    RestoreAfterReplay,
    CatchUpBeforeUpload,
    CloseBeforeUpload,
    CloseAfterUpload
  )

  /** The steps of an adjunct table's maintain (docs/adjunct-tables.md "Maintain"), kept apart from [[All]]:
    * those are the steps every store reaches (the store crash suites iterate them), these only a maintain
    * does. After the task committed its partition's checkpoint (snapshots uploaded), its result not yet
    * returned: the task fails, Spark retries it, and the retry commits a second child of the same parent.
    */
  val AdjunctAfterPartitionCommit: Step = Step("adjunct.after-partition-commit")
  // on the driver: every partition's checkpoint is committed, the table record not written yet
  val AdjunctBeforeRecord: Step = Step("adjunct.before-record")
  val AdjunctMaintain: Seq[Step] = Seq(AdjunctAfterPartitionCommit, AdjunctBeforeRecord)

  /** The steps of a standby copy (StandbyCopy, the follower), kept apart from [[All]] as the adjunct's are:
    * only an executor holding standbys reaches them. A refresh's files are in place (restored and checked),
    * its record not written yet.
    */
  val StandbyAfterFiles: Step = Step("standby.after-files")
  val Standby: Seq[Step] = Seq(StandbyAfterFiles)

  /** Every step a test may name. */
  val Known: Seq[Step] = All ++ AdjunctMaintain ++ Standby

  val None: CrashPoints = (_: Step) => ()
}

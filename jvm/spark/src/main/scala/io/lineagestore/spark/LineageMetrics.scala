package io.lineagestore.spark

import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.sql.execution.streaming.state.lineagestore.SnapshotLagInstanceMetric

import io.lineagestore.store.{LineageStore, LocalDeltaCopies, StandbyTaken}

/** Custom metrics reported in StreamingQueryProgress (stateOperators[].customMetrics): summed over an
  * operator's stores. One instance metric, the snapshot lag of each store, names the worst stores there too.
  */
private[spark] object LineageMetrics {
  private def sum(name: String, desc: String) = StateStoreCustomSumMetric(name, desc)
  private def timing(name: String, desc: String) = StateStoreCustomTimingMetric(name, desc)

  val BytesUploaded = sum("lineagestoreBytesUploaded", "bytes uploaded to the blob store by snapshots")
  val FilesUploaded = sum("lineagestoreFilesUploaded", "files uploaded by snapshots")
  val BytesReused = sum("lineagestoreBytesReused", "bytes referenced from earlier snapshots, not moved")
  val FilesReused = sum("lineagestoreFilesReused", "files referenced from earlier snapshots or kept locally")
  val BytesDownloaded = sum("lineagestoreBytesDownloaded", "bytes downloaded to restore snapshots")
  val FilesDownloaded = sum("lineagestoreFilesDownloaded", "files downloaded to restore snapshots")
  val DeltasReplayed = sum("lineagestoreDeltasReplayed", "delta files replayed by loads")
  val SnapshotsUploaded = sum("lineagestoreSnapshotsUploaded", "snapshots uploaded")
  val FilesDeleted = sum("lineagestoreFilesDeleted", "files deleted by clean-up")
  val PendingSnapshots = sum("lineagestorePendingSnapshots", "frozen snapshots waiting for upload (lag)")
  val PendingBlobs =
    sum("lineagestorePendingBlobs", "shared blobs no snapshot references yet (uploads in flight, leftovers)")
  val SnapshotLag = sum(
    "lineagestoreSnapshotLag",
    "deltas past the newest uploaded snapshot of each store's lineage (what a cold restore replays)"
  )
  val CatchUpSnapshots =
    sum("lineagestoreCatchUpSnapshots", "commits that uploaded a snapshot themselves (lag past the bound)")
  val SnapshotDetours =
    sum(
      "lineagestoreSnapshotDetours",
      "damaged snapshots loads routed around (older snapshot and more deltas)"
    )
  val DeltasStreamed = sum(
    "lineagestoreDeltasStreamed",
    "commits whose delta was written to the blob store while the batch ran (each change its key's first); " +
      "the rest write it whole at commit"
  )
  val StreamedDeltasGivenUp = sum(
    "lineagestoreStreamedDeltasGivenUp",
    "deltas written while the batch ran that the blob store failed mid-batch (each commit wrote its delta whole)"
  )
  val DeltaBytes = sum("lineagestoreDeltaBytes", "uncommitted bytes the last commit held in memory")
  val SpilledBytes = sum(
    "lineagestoreSpilledBytes",
    "bytes the last commit's batch spilled to local disk past maxPendingBytes (read back when it was applied)"
  )
  val LoadsFromStandby = sum(
    "lineagestoreLoadsFromStandby",
    "stores whose local directory was taken over from a standby copy on their executor (standbyReplicas)"
  )
  val StandbyBytesTaken =
    sum(
      "lineagestoreStandbyBytesTaken",
      "bytes of the standby copies those stores' directories were taken from"
    )
  val StandbyDeltasReplayed = sum(
    "lineagestoreStandbyDeltasReplayed",
    "deltas those stores' loads replayed from the standby copy's local files (each verified first) instead of " +
      "the blob store"
  )
  val StandbyDeltasRefused = sum(
    "lineagestoreStandbyDeltasRefused",
    "local delta copies of a standby that failed verification (damaged on the executor's disk); their deltas " +
      "were read from the blob store"
  )
  val StandbyBytesFetched = sum(
    "lineagestoreStandbyBytesFetched",
    "bytes the executors' standby copies fetched from the blob store since the previous report"
  )
  val LoadMs = timing("lineagestoreLoadMs", "time to load the version a batch started from")
  val CommitMs = timing(
    "lineagestoreCommitMs",
    "time to commit (ending the delta written as the batch ran, or writing it whole; the write into the local " +
      "RocksDB, and a snapshot's checkpoint, follow on an apply thread)"
  )
  val CommitDeltaMs = timing(
    "lineagestoreCommitDeltaMs",
    "part of lineagestoreCommitMs spent ending the delta in the blob store (its last part and the upload's " +
      "completion), or writing it whole"
  )
  val CommitApplyWaitMs = timing(
    "lineagestoreCommitApplyWaitMs",
    "part of lineagestoreCommitMs spent waiting for the apply thread to finish the previous batch (its write " +
      "into the local RocksDB, a snapshot's checkpoint) and for room in the apply backlog"
  )
  val SnapshotUploadMs = timing(
    "lineagestoreSnapshotUploadMs",
    "time of the last snapshot upload (with the wait for its checkpoint, if the apply thread was still " +
      "writing it)"
  )

  val all: Seq[StateStoreCustomMetric] = Seq(
    BytesUploaded,
    FilesUploaded,
    BytesReused,
    FilesReused,
    BytesDownloaded,
    FilesDownloaded,
    DeltasReplayed,
    SnapshotsUploaded,
    FilesDeleted,
    PendingSnapshots,
    PendingBlobs,
    SnapshotLag,
    CatchUpSnapshots,
    SnapshotDetours,
    DeltasStreamed,
    StreamedDeltasGivenUp,
    DeltaBytes,
    SpilledBytes,
    LoadsFromStandby,
    StandbyBytesTaken,
    StandbyDeltasReplayed,
    StandbyDeltasRefused,
    StandbyBytesFetched,
    LoadMs,
    CommitMs,
    CommitDeltaMs,
    CommitApplyWaitMs,
    SnapshotUploadMs
  )

  val instance: Seq[StateStoreInstanceMetric] = Seq(SnapshotLagInstanceMetric())

  def of(
      store: LineageStore,
      id: StateStoreId,
      standby: Option[StandbyTaken] = None,
      standbyDeltas: Option[LocalDeltaCopies] = None
  ): StateStoreMetrics = {
    val c = store.counters
    val counts = store.columnFamilies.counts
    val userKeys = counts.filter { case (name, _) => !name.startsWith("$") }.values.sum
    val custom: Map[StateStoreCustomMetric, Long] = Map(
      BytesUploaded -> c.bytesUploaded.get,
      FilesUploaded -> c.filesUploaded.get,
      BytesReused -> c.bytesReused.get,
      FilesReused -> c.filesReused.get,
      BytesDownloaded -> c.bytesDownloaded.get,
      FilesDownloaded -> c.filesDownloaded.get,
      DeltasReplayed -> c.deltasReplayed.get,
      SnapshotsUploaded -> c.snapshotsUploaded.get,
      FilesDeleted -> c.filesDeleted.get,
      PendingSnapshots -> store.frozenCount.toLong,
      PendingBlobs -> store.pendingBlobs.count.toLong,
      SnapshotLag -> store.snapshotLag,
      CatchUpSnapshots -> c.catchUpSnapshots.get,
      SnapshotDetours -> c.snapshotDetours.get,
      DeltasStreamed -> c.deltasStreamed.get,
      StreamedDeltasGivenUp -> c.streamedDeltasGivenUp.get,
      DeltaBytes -> c.lastDeltaBytes.get,
      SpilledBytes -> c.lastSpilledBytes.get,
      LoadsFromStandby -> standby.size.toLong,
      StandbyBytesTaken -> standby.map(_.bytes).getOrElse(0L),
      StandbyDeltasReplayed -> standbyDeltas.map(_.filesRead.get).getOrElse(0L),
      StandbyDeltasRefused -> standbyDeltas.map(_.rejected.get).getOrElse(0L),
      StandbyBytesFetched -> StandbyFollowers.running.map(_.takeUnreportedBytes()).getOrElse(0L),
      LoadMs -> c.lastLoadMs.get,
      CommitMs -> c.lastCommitMs.get,
      CommitDeltaMs -> c.lastCommitDeltaMs.get,
      CommitApplyWaitMs -> c.lastCommitApplyWaitMs.get,
      SnapshotUploadMs -> c.lastSnapshotUploadMs.get
    )
    val perStore: Map[StateStoreInstanceMetric, Long] =
      Map(SnapshotLagInstanceMetric().withNewId(id.partitionId, id.storeName) -> store.snapshotLag)
    StateStoreMetrics(userKeys, store.approximateMemoryBytes, custom, perStore)
  }
}

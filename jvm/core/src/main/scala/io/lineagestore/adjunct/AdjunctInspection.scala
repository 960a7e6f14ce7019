package io.lineagestore.adjunct

import java.util.concurrent.Executors

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path

import io.lineagestore.config.LineageConf
import io.lineagestore.format.StoreIdentity
import io.lineagestore.lineage.{CheckpointFile, CheckpointId}
import io.lineagestore.storage.HadoopBlobStore
import io.lineagestore.store.CheckpointFiles

/** What `lineagestore inspect` shows of an adjunct table (docs/adjunct-tables.md): its committed versions,
  * its schema and the size of its stores (one per partition), from the table commit log and the stores'
  * listings (no data is read). Data only: `io.lineagestore.tools.CheckpointTools.inspectAdjunctTable` renders
  * it as the command line's JSON.
  */
object AdjunctInspection {

  /** One kept version and the files it committed: of each partition whose store it moved (all, for the first
    * kept version), named `<partition>/<file>` in a partitioned table.
    */
  final case class VersionFiles(commit: AdjunctCommit, files: Seq[String])

  /** The checkpoint files of the table's stores together. */
  final case class StoreSizes(
      deltas: Long,
      deltaBytes: Long,
      snapshots: Long,
      snapshotBytes: Long,
      sharedBlobs: Long,
      sharedBytes: Long
  ) {
    def totalBytes: Long = deltaBytes + snapshotBytes + sharedBytes
  }

  /** A replica's newest marker and the table version it is current as of: a partition's replica holds a store
    * checkpoint, current as of the newest version whose record names it. `lag`: how many versions it is
    * behind the latest committed one when it last loaded (`mark.loadedAtMs` tells how old that is, so a
    * replica of a gone executor shows as an old marker, not as a live one).
    */
  final case class ReplicaLag(mark: ReplicaMark, version: Long, lag: Long, storeLag: Long = 0)

  /** Partition `partition` at the latest version: the store checkpoint its record names, the oldest kept
    * version naming that same checkpoint (`since`: the partition has not changed since; None before any
    * version), and the replicas of the partition with their lag (of a table of one store: its replicas). What
    * is known offline is each replica's lag as of its last load (its marker): a replica moves only when a
    * lookup asks for a newer version, and whether its executor still runs is not recorded.
    */
  final case class PartitionState(
      partition: Int,
      checkpoint: CheckpointId,
      since: Option[Long],
      replicas: Seq[ReplicaLag]
  ) {

    /** The most versions (of the table) any replica of the partition is behind; None: no replica marker. */
    def maxLag: Option[Long] = replicas.map(_.lag).maxOption

    /** The most versions of the partition's store any replica is behind; None: no replica marker. */
    def maxStoreLag: Option[Long] = replicas.map(_.storeLag).maxOption
  }

  /** A table's tombstone bound and, at the latest version, its highest ordering and the floor the next batch
    * purges and refuses at ([[TombstoneRetention]]).
    */
  final case class TombstoneState(retention: Long, highestOrdering: Option[Long], floor: Option[Long])

  /** `uncommitted`: checkpoint files no record names, past the latest version (a maintain batch that did not
    * finish), named as in [[VersionFiles]].
    */
  final case class TableInspection(
      table: String,
      partitions: Int,
      keySchema: String,
      valueSchema: String,
      versions: Seq[VersionFiles],
      sizes: StoreSizes,
      uncommitted: Seq[String],
      replicas: Seq[ReplicaLag],
      partitionStates: Seq[PartitionState] = Nil,
      tombstones: Option[TombstoneState] = None
  )

  private def open(root: Path, conf: Configuration) =
    new HadoopBlobStore(root, conf, LineageConf.DeltaUploadPartBytes.default) // reads only

  /** Whether `uri` holds an adjunct table (its `_adjunct/table.properties`). */
  def isTable(uri: String, conf: Configuration): Boolean =
    new AdjunctTableLog(open(new Path(uri), conf)).readMeta().isDefined

  def inspect(uri: String, conf: Configuration): TableInspection = {
    val log = new AdjunctTableLog(open(new Path(uri), conf))
    val meta = log.readMeta().getOrElse(throw new IllegalArgumentException(s"$uri holds no adjunct table"))
    val n = meta.get(AdjunctTableLog.PartitionsKey).map(_.toInt).getOrElse(1)
    val commits = log.commits()
    val latest = commits.lastOption.map(_.version).getOrElse(0L)
    val partitions = (0 until n).map(p => inspectPartition(uri, conf, p, commits))
    def total(field: PartitionFiles => Long) = partitions.map(field).sum
    val latestCommit = commits.lastOption
    val replicas = log.replicas().map { r =>
      // a partition's replica holds a store checkpoint: it is current as of the newest version naming it
      val version =
        if (r.partition < 0) r.version
        else
          commits
            .filter(_.storeCheckpoint(r.partition).version <= r.version)
            .lastOption
            .map(_.version)
            .getOrElse(commits.headOption.fold(0L)(_.version - 1))
      val storeLatest = latestCommit.fold(0L)(_.storeCheckpoint(math.max(r.partition, 0)).version)
      ReplicaLag(r, version, latest - version, math.max(0L, storeLatest - r.version))
    }
    val partitionStates = (0 until n).map { p =>
      val at = latestCommit.map(_.storeCheckpoint(p))
      PartitionState(
        p,
        at.getOrElse(CheckpointId.Empty),
        at.flatMap(id => commits.find(_.storeCheckpoint(p) == id).map(_.version)),
        replicas.filter(r => r.mark.partition == (if (n == 1) -1 else p))
      )
    }
    val retention = TombstoneRetention.of(meta, uri)
    TableInspection(
      table = uri,
      partitions = n,
      keySchema = meta.getOrElse("keySchema", "?"),
      valueSchema = meta.getOrElse("valueSchema", "?"),
      versions = commits.zipWithIndex.map { case (c, i) =>
        // the files this version committed: of each partition whose store it moved (all, for the first kept)
        val moved =
          (0 until n).filter(p => i == 0 || commits(i - 1).storeCheckpoint(p) != c.storeCheckpoint(p))
        VersionFiles(
          c,
          moved.flatMap { p =>
            partitions(p).files.filter(_.id == c.storeCheckpoint(p)).map(f => prefix(n, p) + f.name)
          }
        )
      },
      sizes = StoreSizes(
        total(_.deltas),
        total(_.deltaBytes),
        total(_.snapshots),
        total(_.snapshotBytes),
        total(_.sharedBlobs),
        total(_.sharedBytes)
      ),
      uncommitted = partitions.flatMap(_.uncommitted),
      replicas = replicas,
      partitionStates = partitionStates,
      tombstones = retention.map { r =>
        TombstoneState(
          r,
          latestCommit.flatMap(_.tombstones).flatMap(_.highestOrdering),
          TombstoneRetention.floor(retention, latestCommit)
        )
      }
    )
  }

  private def prefix(n: Int, p: Int): String = if (n == 1) "" else s"$p/"

  /** One partition's store: its checkpoint files and sizes, and those no record names past the latest. */
  private final case class PartitionFiles(
      files: Seq[CheckpointFile],
      deltas: Long,
      deltaBytes: Long,
      snapshots: Long,
      snapshotBytes: Long,
      sharedBlobs: Long,
      sharedBytes: Long,
      uncommitted: Seq[String]
  )

  private def inspectPartition(
      uri: String,
      conf: Configuration,
      p: Int,
      commits: Seq[AdjunctCommit]
  ): PartitionFiles = {
    val blobs = open(new Path(new Path(uri), AdjunctTableLog.storeDir(p)), conf)
    // CheckpointFiles' transfer pool: listings run on the calling thread, so one idle thread, closed after
    val pool = Executors.newSingleThreadExecutor()
    try {
      val store = new CheckpointFiles(blobs, StoreIdentity(0, p, "default"), pool)
      val files = store.listCheckpointFiles()
      val sizes = blobs.list("").map(b => b.name -> b.size).toMap
      def bytes(fs: Seq[CheckpointFile]) = fs.map(f => sizes.getOrElse(f.name, 0L)).sum
      val (snapshots, deltas) = files.partition(_.kind == CheckpointId.Snapshot)
      val shared = store.listSharedBlobs()
      val recorded = commits.map(_.storeCheckpoint(p)).toSet
      val newest = commits.lastOption.fold(0L)(_.storeCheckpoint(p).version)
      PartitionFiles(
        files,
        deltas.size.toLong,
        bytes(deltas),
        snapshots.size.toLong,
        bytes(snapshots),
        shared.size.toLong,
        shared.map(_.size).sum,
        files
          .filter(f => !recorded(f.id) && f.id.version > newest)
          .map(f => prefix(commits.headOption.fold(1)(_.partitions), p) + f.name)
      )
    } finally pool.shutdownNow()
  }
}

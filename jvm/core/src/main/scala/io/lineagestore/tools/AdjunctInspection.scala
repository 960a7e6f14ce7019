package io.lineagestore.tools

import org.apache.hadoop.fs.Path

import io.lineagestore.config.LineageConf
import io.lineagestore.format.{AdjunctCommit, AdjunctTableLog}
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.storage.HadoopBlobStore
import io.lineagestore.tools.Json._

/** `lineagestore inspect` on an adjunct table (docs/adjunct-tables.md): its committed versions, its schema
  * and the size of its stores (one per partition), from the table commit log and the stores' listings (no
  * data is read).
  */
object AdjunctInspection {

  /** Whether `uri` holds an adjunct table (its `_adjunct/table.properties`). */
  def isTable(uri: String): Boolean =
    new AdjunctTableLog(
      new HadoopBlobStore(new Path(uri), ToolEnv.hadoopConf, LineageConf.DeltaUploadPartBytes.default)
    ).readMeta().isDefined

  /** JSON: `{"table", "partitions", "schema": {...}, "versions": [{"version", "uniqueId", "sourceBatchId",
    * "files"}], "store": {"deltas", "deltaBytes", "snapshots", "snapshotBytes", "sharedBlobs", "sharedBytes",
    * "totalBytes"}, "uncommitted": [checkpoint file names no record names, past the latest version],
    * "replicas": [{"replica", "version", "uniqueId", "lag", "loadedAtMs", "bytesDownloaded",
    * "deltasReplayed"}]}`. A replica's `lag` is how many versions it is behind the latest committed one when
    * it last loaded (its marker: [[io.lineagestore.format.ReplicaMark]]; a partition's replica, with its
    * `partition`, is at the newest version whose record names the store checkpoint it holds, and its `files`
    * and `uncommitted` names start with `<partition>/`); `loadedAtMs` tells how old that is, so a replica of
    * a gone executor shows as an old marker, not as a live one.
    */
  def inspect(uri: String): Json = {
    val log = new AdjunctTableLog(
      new HadoopBlobStore(new Path(uri), ToolEnv.hadoopConf, LineageConf.DeltaUploadPartBytes.default)
    )
    val meta = log.readMeta().getOrElse(throw new IllegalArgumentException(s"$uri holds no adjunct table"))
    val n = meta.get(AdjunctTableLog.PartitionsKey).map(_.toInt).getOrElse(1)
    val commits = log.commits()
    val latest = commits.lastOption.map(_.version).getOrElse(0L)
    val partitions = (0 until n).map(p => inspectPartition(uri, p, commits))
    def total(field: PartitionFiles => Long) = partitions.map(field).sum
    obj(
      "table" -> uri,
      "partitions" -> n,
      "schema" -> obj(
        "keys" -> Str(meta.getOrElse("keySchema", "?")),
        "values" -> Str(meta.getOrElse("valueSchema", "?"))
      ),
      "versions" -> arr(commits.zipWithIndex.map { case (c, i) =>
        // the files this version committed: of each partition whose store it moved (all, for the first kept)
        val moved =
          (0 until n).filter(p => i == 0 || commits(i - 1).storeCheckpoint(p) != c.storeCheckpoint(p))
        obj(
          "version" -> c.version,
          "uniqueId" -> c.uniqueId,
          "sourceBatchId" -> c.sourceBatchId,
          "files" -> strs(moved.flatMap { p =>
            partitions(p).files.filter(_.id == c.storeCheckpoint(p)).map(f => prefix(n, p) + f.name)
          })
        )
      }),
      "store" -> obj(
        "deltas" -> total(_.deltas),
        "deltaBytes" -> total(_.deltaBytes),
        "snapshots" -> total(_.snapshots),
        "snapshotBytes" -> total(_.snapshotBytes),
        "sharedBlobs" -> total(_.sharedBlobs),
        "sharedBytes" -> total(_.sharedBytes),
        "totalBytes" -> total(p => p.deltaBytes + p.snapshotBytes + p.sharedBytes)
      ),
      "uncommitted" -> strs(partitions.flatMap(_.uncommitted)),
      "replicas" -> arr(log.replicas().map { r =>
        // a partition's replica holds a store checkpoint: it is current as of the newest version naming it
        val version =
          if (r.partition < 0) r.version
          else
            commits
              .filter(_.storeCheckpoint(r.partition).version <= r.version)
              .lastOption
              .map(_.version)
              .getOrElse(commits.headOption.fold(0L)(_.version - 1))
        val mark = obj(
          "replica" -> Str(r.name),
          "version" -> version,
          "uniqueId" -> Str(r.uniqueId),
          "lag" -> (latest - version),
          "loadedAtMs" -> r.loadedAtMs,
          "bytesDownloaded" -> r.bytesDownloaded,
          "deltasReplayed" -> r.deltasReplayed
        )
        if (r.partition < 0) mark else Obj(mark.fields :+ ("partition" -> Num(r.partition.toLong)))
      })
    )
  }

  private def prefix(n: Int, p: Int): String = if (n == 1) "" else s"$p/"

  /** One partition's store: its checkpoint files and sizes, and those no record names past the latest. */
  private final case class PartitionFiles(
      files: Seq[io.lineagestore.lineage.CheckpointFile],
      deltas: Long,
      deltaBytes: Long,
      snapshots: Long,
      snapshotBytes: Long,
      sharedBlobs: Long,
      sharedBytes: Long,
      uncommitted: Seq[String]
  )

  private def inspectPartition(uri: String, p: Int, commits: Seq[AdjunctCommit]): PartitionFiles =
    ToolStore.using(
      StoreRef(0, p, "default", new Path(new Path(uri), AdjunctTableLog.storeDir(p)).toString)
    ) { s =>
      val files = s.files.listCheckpointFiles()
      val sizes = s.blobs.list("").map(b => b.name -> b.size).toMap
      def bytes(fs: Seq[io.lineagestore.lineage.CheckpointFile]) =
        fs.map(f => sizes.getOrElse(f.name, 0L)).sum
      val (snapshots, deltas) = files.partition(_.kind == CheckpointId.Snapshot)
      val shared = s.files.listSharedBlobs()
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
    }
}

package io.lineagestore.tools

import org.apache.hadoop.fs.Path

import io.lineagestore.format.AdjunctTableLog
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.storage.HadoopBlobStore
import io.lineagestore.tools.Json._

/** `lineagestore inspect` on an adjunct table (docs/adjunct-tables.md): its committed versions, its schema
  * and the size of its store, from the table commit log and the store's listing (no data is read).
  */
object AdjunctInspection {

  /** Whether `uri` holds an adjunct table (its `_adjunct/table.properties`). */
  def isTable(uri: String): Boolean =
    new AdjunctTableLog(new HadoopBlobStore(new Path(uri), ToolEnv.hadoopConf)).readMeta().isDefined

  /** JSON: `{"table", "schema": {...}, "versions": [{"version", "uniqueId", "sourceBatchId", "files"}],
    * "store": {"deltas", "deltaBytes", "snapshots", "snapshotBytes", "sharedBlobs", "sharedBytes",
    * "totalBytes"}, "uncommitted": [checkpoint file names no record names, past the latest version],
    * "replicas": [{"replica", "version", "uniqueId", "lag", "loadedAtMs", "bytesDownloaded",
    * "deltasReplayed"}]}`. A replica's `lag` is how many versions it is behind the latest committed one when
    * it last loaded (its marker: [[io.lineagestore.format.ReplicaMark]]); `loadedAtMs` tells how old that is,
    * so a replica of a gone executor shows as an old marker, not as a live one.
    */
  def inspect(uri: String): Json = {
    val log = new AdjunctTableLog(new HadoopBlobStore(new Path(uri), ToolEnv.hadoopConf))
    val meta = log.readMeta().getOrElse(throw new IllegalArgumentException(s"$uri holds no adjunct table"))
    val commits = log.commits()
    ToolStore.using(StoreRef(0, 0, "default", new Path(new Path(uri), AdjunctTableLog.StoreDir).toString)) {
      s =>
        val files = s.files.listCheckpointFiles()
        val sizes = s.blobs.list("").map(b => b.name -> b.size).toMap
        def bytes(fs: Seq[io.lineagestore.lineage.CheckpointFile]) =
          fs.map(f => sizes.getOrElse(f.name, 0L)).sum
        val (snapshots, deltas) = files.partition(_.kind == CheckpointId.Snapshot)
        val shared = s.files.listSharedBlobs()
        val recorded = commits.map(c => CheckpointId(c.version, c.uniqueId)).toSet
        val latest = commits.lastOption.map(_.version).getOrElse(0L)
        val total = bytes(deltas) + bytes(snapshots) + shared.map(_.size).sum
        obj(
          "table" -> uri,
          "schema" -> obj(
            "keys" -> Str(meta.getOrElse("keySchema", "?")),
            "values" -> Str(meta.getOrElse("valueSchema", "?"))
          ),
          "versions" -> arr(commits.map { c =>
            obj(
              "version" -> c.version,
              "uniqueId" -> c.uniqueId,
              "sourceBatchId" -> c.sourceBatchId,
              "files" -> strs(files.filter(_.id == CheckpointId(c.version, c.uniqueId)).map(_.name))
            )
          }),
          "store" -> obj(
            "deltas" -> deltas.size,
            "deltaBytes" -> bytes(deltas),
            "snapshots" -> snapshots.size,
            "snapshotBytes" -> bytes(snapshots),
            "sharedBlobs" -> shared.size,
            "sharedBytes" -> shared.map(_.size).sum,
            "totalBytes" -> total
          ),
          "uncommitted" -> strs(files.filter(f => !recorded(f.id) && f.id.version > latest).map(_.name)),
          "replicas" -> arr(log.replicas().map { r =>
            obj(
              "replica" -> Str(r.name),
              "version" -> r.version,
              "uniqueId" -> Str(r.uniqueId),
              "lag" -> (latest - r.version),
              "loadedAtMs" -> r.loadedAtMs,
              "bytesDownloaded" -> r.bytesDownloaded,
              "deltasReplayed" -> r.deltasReplayed
            )
          })
        )
    }
  }
}

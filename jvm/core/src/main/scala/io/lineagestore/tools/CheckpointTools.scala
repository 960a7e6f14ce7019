package io.lineagestore.tools

import java.io.{File, FileNotFoundException}
import java.nio.charset.StandardCharsets.UTF_8

import org.apache.hadoop.fs.Path

import io.lineagestore.adjunct.AdjunctInspection
import io.lineagestore.lineage.{CheckpointId, CleanupPlanner, CommitLogEntry, StateLayout}
import io.lineagestore.storage.HadoopBlobStore
import io.lineagestore.storage.HadoopBlobStore.wrapAccess
import io.lineagestore.tools.Json._

/** Entry points of the `lineagestore` command line, called from Python through py4j. Plain types in (the
  * commit log as text lines `<batchId> <version> <uniqueId>`), JSON text out. Spark's own files (commit log,
  * offsets, metadata) are parsed in Python; everything of lineagestore's format is read here, through
  * [[io.lineagestore.store.CheckpointFiles]] and the planners.
  *
  * Each store call opens the store directory, does its work and closes it; Python drives the loop over stores
  * (and shows progress).
  */
object CheckpointTools {

  // ---- configuration and Spark's files ---------------------------------------------------------------------

  /** Adds a Hadoop setting (e.g. `fs.s3a.endpoint`) for every later call. */
  def setHadoopConf(key: String, value: String): Unit = ToolEnv.set(key, value)

  /** Entries directly under `uri`: JSON `[{"name", "dir", "bytes", "modifiedMs"}]`, or `null` when `uri` does
    * not exist. Hadoop's `.crc` sidecars are not listed.
    */
  def list(uri: String): String = wrapAccess("list", uri, ToolEnv.hadoopConf) {
    val p = new Path(uri)
    val fs = p.getFileSystem(ToolEnv.hadoopConf)
    val statuses =
      try fs.listStatus(p).toSeq
      catch { case _: FileNotFoundException => return "null" }
    arr(statuses.sortBy(_.getPath.getName).map { s =>
      obj(
        "name" -> s.getPath.getName,
        "dir" -> s.isDirectory,
        "bytes" -> s.getLen,
        "modifiedMs" -> s.getModificationTime
      )
    }).render
  }

  /** Every file under `uri`, recursively: JSON `[{"path": relative path, "bytes"}]` (`null` if absent). */
  def listTree(uri: String): String = wrapAccess("list", uri, ToolEnv.hadoopConf) {
    val root = new Path(uri)
    val fs = root.getFileSystem(ToolEnv.hadoopConf)
    if (!fs.exists(root)) return "null"
    val prefix = fs.makeQualified(root).toUri.getPath.stripSuffix("/") + "/"
    val it = fs.listFiles(root, true)
    val out = Seq.newBuilder[Json]
    while (it.hasNext) {
      val s = it.next()
      val path = fs.makeQualified(s.getPath).toUri.getPath
      out += obj("path" -> path.stripPrefix(prefix), "bytes" -> s.getLen)
    }
    arr(out.result()).render
  }

  /** The text of a small file (Spark's commit log entry, metadata), or null when it does not exist. */
  def readText(uri: String): String = wrapAccess("read", uri, ToolEnv.hadoopConf) {
    val p = new Path(uri)
    val fs = p.getFileSystem(ToolEnv.hadoopConf)
    val in =
      try fs.open(p)
      catch { case _: FileNotFoundException => return null }
    try new String(in.readAllBytes(), UTF_8)
    finally in.close()
  }

  /** Writes a small file whole or not at all (an offset or commit log entry of a repartition, a file sink's
    * log entry), replacing it if `overwrite` (the clone's new query id).
    */
  def writeText(uri: String, text: String, overwrite: Boolean): Unit = {
    val p = new Path(uri)
    HadoopBlobStore.writeWhole(p.getFileSystem(ToolEnv.hadoopConf), p, text.getBytes(UTF_8), overwrite)
  }

  /** Deletes one file (the `--undo` of an unfinished repartition's offset entry); false if it was absent. */
  def delete(uri: String): Boolean = wrapAccess("delete", uri, ToolEnv.hadoopConf) {
    val p = new Path(uri)
    p.getFileSystem(ToolEnv.hadoopConf).delete(p, false)
  }

  /** Where Spark keeps store `storeName` of partition `partitionId` of operator `operatorId` under
    * `checkpoint` ([[StateLayout]]): `<checkpoint>/state/<operatorId>/<partitionId>[/<storeName>]`, relative
    * (`state/...`) when `checkpoint` is empty.
    */
  def stateStoreDir(checkpoint: String, operatorId: Long, partitionId: Int, storeName: String): String =
    StateLayout.storeDir(checkpoint, operatorId, partitionId, storeName)

  // ---- adjunct tables ------------------------------------------------------------------------------------------

  /** [[AdjunctInspection.inspect]] as JSON: `{"table", "partitions", "schema": {"keys", "values"},
    * "versions": [{"version", "uniqueId", "sourceBatchId", "files"}], "store": {"deltas", "deltaBytes",
    * "snapshots", "snapshotBytes", "sharedBlobs", "sharedBytes", "totalBytes"}, "uncommitted": [checkpoint
    * file names no record names, past the latest version], "replicas": [{"replica", "version", "uniqueId",
    * "lag", "storeLag", "loadedAtMs", "bytesDownloaded", "deltasReplayed"}], "partitionStates":
    * [{"partition", "checkpoint", "storeVersion", "since", "replicas", "maxLag", "maxStoreLag"}],
    * "tombstones": null | {"retention", "highestOrdering", "floor"}}` (a partition's replica adds its
    * `partition`; in a partitioned table `files` and `uncommitted` names start with `<partition>/`; `lag`
    * counts table versions, `storeLag` the versions of the replica's store; `maxLag` is null for a partition
    * no replica marker names).
    */
  def inspectAdjunctTable(uri: String): String =
    wrapAccess("read", uri, ToolEnv.hadoopConf)(
      adjunctJson(AdjunctInspection.inspect(uri, ToolEnv.hadoopConf)).render
    )

  private def adjunctJson(t: AdjunctInspection.TableInspection): Json = obj(
    "table" -> t.table,
    "partitions" -> t.partitions,
    "schema" -> obj("keys" -> t.keySchema, "values" -> t.valueSchema),
    "versions" -> arr(t.versions.map { v =>
      obj(
        "version" -> v.commit.version,
        "uniqueId" -> v.commit.uniqueId,
        "sourceBatchId" -> v.commit.sourceBatchId,
        "files" -> strs(v.files)
      )
    }),
    "store" -> obj(
      "deltas" -> t.sizes.deltas,
      "deltaBytes" -> t.sizes.deltaBytes,
      "snapshots" -> t.sizes.snapshots,
      "snapshotBytes" -> t.sizes.snapshotBytes,
      "sharedBlobs" -> t.sizes.sharedBlobs,
      "sharedBytes" -> t.sizes.sharedBytes,
      "totalBytes" -> t.sizes.totalBytes
    ),
    "uncommitted" -> strs(t.uncommitted),
    "replicas" -> arr(t.replicas.map { r =>
      val mark = obj(
        "replica" -> r.mark.name,
        "version" -> r.version,
        "uniqueId" -> r.mark.uniqueId,
        "lag" -> r.lag,
        "storeLag" -> r.storeLag,
        "loadedAtMs" -> r.mark.loadedAtMs,
        "bytesDownloaded" -> r.mark.bytesDownloaded,
        "deltasReplayed" -> r.mark.deltasReplayed
      )
      if (r.mark.partition < 0) mark else Obj(mark.fields :+ ("partition" -> Num(r.mark.partition.toLong)))
    }),
    "partitionStates" -> arr(t.partitionStates.map { ps =>
      obj(
        "partition" -> ps.partition,
        "checkpoint" -> (if (ps.checkpoint.isEmptyState) ""
                         else s"${ps.checkpoint.version}_${ps.checkpoint.uniqueId}"),
        "storeVersion" -> ps.checkpoint.version,
        "since" -> ps.since.fold[Json](Null)(v => Num(v)),
        "replicas" -> ps.replicas.size,
        "maxLag" -> ps.maxLag.fold[Json](Null)(v => Num(v)),
        "maxStoreLag" -> ps.maxStoreLag.fold[Json](Null)(v => Num(v))
      )
    }),
    "tombstones" -> t.tombstones.fold[Json](Null) { ts =>
      obj(
        "retention" -> ts.retention,
        "highestOrdering" -> ts.highestOrdering.fold[Json](Null)(v => Num(v)),
        "floor" -> ts.floor.fold[Json](Null)(v => Num(v))
      )
    }
  )

  // ---- one store ---------------------------------------------------------------------------------------------

  /** [[StoreVerifier.retained]]: which batches of `commitLog` retention still holds in this store, JSON
    * `{"retained": [batchId, ...], "beyondRetention": [batchId, ...]}`.
    */
  def retainedBatches(
      dir: String,
      operatorId: Long,
      partitionId: Int,
      storeName: String,
      commitLog: String,
      currentPartitions: Int // of this operator in the newest committed batch (0: unknown)
  ): String =
    ToolStore.using(StoreRef(operatorId, partitionId, storeName, dir)) { s =>
      val shrunk = CleanupPlanner.shrunkBelow(partitionId, currentPartitions)
      val (held, beyond) = StoreVerifier.retained(s, CommitLogEntry.parseLines(commitLog), shrunk)
      obj(
        "retained" -> arr(held.map(e => Num(e.batchId))),
        "beyondRetention" -> arr(beyond.map(e => Num(e.batchId)))
      ).render
    }

  /** See [[StoreInspection.inspect]]. */
  def inspectStore(
      dir: String,
      operatorId: Long,
      partitionId: Int,
      storeName: String,
      commitLog: String,
      currentPartitions: Int // of this operator in the newest committed batch (0: unknown)
  ): String =
    ToolStore.using(StoreRef(operatorId, partitionId, storeName, dir)) { s =>
      val shrunk = CleanupPlanner.shrunkBelow(partitionId, currentPartitions)
      StoreInspection
        .inspect(s, CommitLogEntry.parseLines(commitLog), System.currentTimeMillis(), shrunk)
        .render
    }

  /** See [[StoreVerifier.verify]]; `targets` are the commit log lines of the batches to check; restores go
    * into a scratch directory under `scratchDir` (empty: java.io.tmpdir).
    */
  def verifyStore(
      dir: String,
      operatorId: Long,
      partitionId: Int,
      storeName: String,
      targets: String,
      scratchDir: String
  ): String = {
    val scratch = new File(
      Option(scratchDir).filter(_.nonEmpty).getOrElse(System.getProperty("java.io.tmpdir"))
    )
    ToolStore.using(StoreRef(operatorId, partitionId, storeName, dir)) { s =>
      StoreVerifier.verify(s, CommitLogEntry.parseLines(targets), scratch).toJson.render
    }
  }

  /** Plans the clean-up of one store (see [[StoreCleaner]]) and runs it when `apply`. */
  def gcStore(
      dir: String,
      operatorId: Long,
      partitionId: Int,
      storeName: String,
      commitLog: String,
      retain: Int,
      graceMs: Long,
      apply: Boolean,
      currentPartitions: Int, // of this operator in the newest committed batch (0: unknown)
      latestBatch: Long
  ): String =
    ToolStore.using(StoreRef(operatorId, partitionId, storeName, dir)) { s =>
      val log = CommitLogEntry.parseLines(commitLog)
      val retirement = log.map(_.batchId).maxOption.collect {
        case last if CleanupPlanner.retired(partitionId, currentPartitions, last, latestBatch, retain) =>
          DeletionReason.RetiredStore(operatorId, partitionId, currentPartitions, latestBatch, last)
      }
      val plan =
        StoreCleaner.plan(s, log, retain, graceMs, System.currentTimeMillis(), retirement)
      val errors = if (apply && plan.refused.isEmpty) StoreCleaner.apply(s, plan) else Nil
      plan.toJson(applied = apply && plan.refused.isEmpty, errors).render
    }

  // ---- clone -------------------------------------------------------------------------------------------------

  /** Clones files `names` (one per line) of directory `relDir`; see [[CheckpointCloner.cloneFiles]]. */
  def cloneFiles(srcRoot: String, dstRoot: String, relDir: String, names: String): String = {
    val stats = CheckpointCloner.cloneFiles(
      srcRoot,
      dstRoot,
      relDir,
      Option(names).getOrElse("").split("\n").toSeq.filter(_.nonEmpty)
    )
    obj(
      "linked" -> stats.linked,
      "copied" -> stats.copied,
      "serverCopied" -> stats.serverCopied,
      "bytes" -> stats.bytes
    ).render
  }

  // ---- repartition -------------------------------------------------------------------------------------------

  /** Rewrites store `storeName` of operator `operatorId` into `placement.partitions` new partitions; see
    * [[StoreRepartitioner]]. `sources` has one line `<partitionId> <version> <uniqueId> <dir>` per old
    * partition (its committed checkpoint); new partition `p` goes to `<operatorDir>/<p>[/<storeName>]`. JSON
    * out: `{"uniqueIds": [...], "rowsRead", "rowsPerPartition": [...]}`.
    */
  def repartitionStore(
      operatorDir: String,
      operatorId: Long,
      storeName: String,
      sources: String,
      emptyVersion: Long,
      placement: KeyPlacement,
      generalPathOnly: Boolean
  ): String = {
    val parsed = RepartitionSource.parseLines(sources)
    val r = StoreRepartitioner.run(
      operatorId,
      storeName,
      parsed,
      p => StateLayout.storeDir(operatorDir, p, storeName),
      emptyVersion,
      placement,
      generalPathOnly = generalPathOnly
    )
    obj(
      "uniqueIds" -> strs(r.uniqueIds),
      "rowsRead" -> r.rowsRead,
      "rowsPerPartition" -> arr(r.rowsPerPartition.map(Num)),
      "groups" -> r.groups,
      "phasesMs" -> Obj(r.phasesMs.toSeq.sortBy(_._1).map { case (k, v) => k -> (Num(v): Json) })
    ).render
  }
}

package io.lineagestore.tools

import scala.util.Try

import io.lineagestore.format.SnapshotIndex
import io.lineagestore.lineage.{CheckpointFile, CheckpointId, RetentionPlanner}
import io.lineagestore.snapshot.SnapshotPlanner
import io.lineagestore.store.CheckpointFiles
import io.lineagestore.tools.Json._

/** One file clean-up would delete: its name in the store directory (`shared/<blob>` for a blob), size and
  * why.
  */
final case class Deletion(name: String, bytes: Long, reason: String)

/** What clean-up of one store would do. Deleting runs zips, then blobs, then deltas (the store's own order: a
  * crash part-way leaves at most unreferenced blobs). `refused` says why nothing may be deleted.
  */
final case class CleanupPlan(
    store: StoreRef,
    head: Option[CheckpointId],
    oldestRetained: Option[Long],
    snapshotBase: Option[CheckpointId],
    zips: Seq[Deletion],
    blobs: Seq[Deletion],
    deltas: Seq[Deletion],
    keptYoungOrphans: Seq[Deletion],
    keptFiles: Int,
    keptBytes: Long,
    refused: Option[String],
    warnings: Seq[String]
) {
  def deletions: Seq[Deletion] = zips ++ blobs ++ deltas

  def toJson(applied: Boolean, errors: Seq[String]): Json = obj(
    "operatorId" -> store.operatorId,
    "partitionId" -> store.partitionId,
    "storeName" -> store.storeName,
    "dir" -> store.dir,
    "head" -> opt(head.map(_.toString)),
    "oldestRetained" -> oldestRetained.map(Num).getOrElse(Null),
    "snapshotBase" -> opt(snapshotBase.map(_.toString)),
    "delete" -> arr(deletions.map(d => obj("file" -> d.name, "bytes" -> d.bytes, "reason" -> d.reason))),
    "deleteBytes" -> deletions.map(_.bytes).sum,
    "keptYoungOrphans" -> arr(
      keptYoungOrphans.map(d => obj("file" -> d.name, "bytes" -> d.bytes, "reason" -> d.reason))
    ),
    "keptFiles" -> keptFiles,
    "keptBytes" -> keptBytes,
    "refused" -> opt(refused),
    "warnings" -> strs(warnings),
    "applied" -> applied,
    "errors" -> strs(errors)
  )
}

/** Plans (and on request runs) the clean-up of one store offline, with the planners the store itself uses:
  * [[RetentionPlanner]] on the committed lineage (Spark's commit log plus delta headers),
  * [[SnapshotPlanner.unreferencedBlobs]] for the blobs of dropped snapshots, and the orphan sweep's rule for
  * blobs no remaining snapshot references (deleted only once older than the grace period: a younger one may
  * belong to a snapshot upload in flight).
  */
object StoreCleaner {

  def plan(
      store: ToolStore,
      log: Seq[CommitLogEntry],
      retain: Int,
      graceMs: Long,
      nowMs: Long
  ): CleanupPlan = {
    require(retain >= 1, s"versions to retain must be >= 1, got $retain")
    val files = store.files
    val listed = store.blobs.list("")
    val sizes = listed.map(b => b.name -> b.size).toMap
    val existing = files.listCheckpointFiles()
    val shared = files.listSharedBlobs()
    val allBytes = listed.filterNot(_.name.startsWith(".")).map(_.size).sum + shared.map(_.size).sum
    val allFiles = listed.count(!_.name.startsWith(".")) + shared.size
    val lineage = CommittedLineage.resolve(files, log)
    def nothing(head: Option[CheckpointId], why: String) =
      CleanupPlan(store.ref, head, None, None, Nil, Nil, Nil, Nil, allFiles, allBytes, Some(why), Nil)

    val head =
      lineage.head.getOrElse(return nothing(None, "Spark's commit log names no checkpoint of this store"))
    if (lineage.conflicts.nonEmpty)
      return nothing(
        Some(head),
        s"the committed lineage is inconsistent: ${lineage.conflicts.mkString("; ")}"
      )
    if (!existing.exists(f => f.id == head))
      return nothing(
        Some(head),
        s"the newest committed checkpoint $head has no file here (${store.locate(head.deltaFileName)}); run verify"
      )

    val plan = RetentionPlanner.plan(head, lineage.committed, existing, retain, lineage.freshStart)
    val (droppedZips, droppedDeltas) = plan.delete.partition(_.kind == CheckpointId.Snapshot)
    def index(id: CheckpointId): Either[String, SnapshotIndex] =
      Try(files.readSnapshotIndex(id)).toEither.left.map(e => Option(e.getMessage).getOrElse(e.toString))
    val dropped = droppedZips.map(f => f.id -> index(f.id))
    val retained = plan.retainedSnapshots.map(id => id -> index(id))
    val unreadable = retained.collect { case (_, Left(err)) => err }
    val warnings = Seq.newBuilder[String]
    warnings ++= lineage.errors
    dropped.collect { case (id, Left(err)) =>
      warnings += s"cannot read ${id.snapshotFileName} before deleting it ($err): its blobs are left to the " +
        "orphan sweep"
    }

    def reason(f: CheckpointFile): String = {
      val base = plan.snapshotBase.version
      val window =
        if (plan.oldestRetained == head.version) s"version ${head.version}"
        else s"versions ${plan.oldestRetained}..${head.version}"
      val rebuilds =
        if (lineage.freshStart.contains(plan.snapshotBase))
          s"whose delta holds the whole state after a repartition and rebuilds the retained $window"
        else s"whose snapshot rebuilds the retained $window"
      if (f.id.version < base) {
        if (lineage.freshStart.contains(plan.snapshotBase))
          s"before the repartition at version $base, $rebuilds"
        else if (lineage.isCommitted(f.id)) s"committed, below version $base $rebuilds"
        else s"attempt outside the committed lineage, below version $base $rebuilds"
      } else s"${lineage.status(f.id)} attempt outside the committed lineage, older than the retained $window"
    }
    def deletion(f: CheckpointFile) = Deletion(f.name, sizes.getOrElse(f.name, 0L), reason(f))

    val sharedSizes = shared.map(b => b.name -> b).toMap
    val (blobDeletions, young) =
      if (unreadable.nonEmpty) {
        warnings ++= unreadable.map(err =>
          s"no shared blob is deleted: a retained snapshot is unreadable ($err)"
        )
        (Nil, Nil)
      } else {
        val retainedIndexes = retained.collect { case (_, Right(i)) => i }
        val ofDropped = SnapshotPlanner
          .unreferencedBlobs(dropped.collect { case (_, Right(i)) => i }, retainedIndexes)
          .filter(sharedSizes.contains)
        val referenced = retainedIndexes.flatMap(_.sharedBlobs).toSet
        val orphans = shared.filter(b => !referenced(b.name) && !ofDropped(b.name))
        val (old, recent) = orphans.partition(b => b.modificationTimeMs < nowMs - graceMs)
        val byDropped = dropped
          .collect { case (id, Right(i)) => i.sharedBlobs.toSeq.map(_ -> id.snapshotFileName) }
          .flatten
          .groupBy(_._1)
          .map { case (b, xs) => b -> xs.map(_._2).sorted.mkString(", ") }
        val a = ofDropped.toSeq.sorted.map { b =>
          Deletion(
            CheckpointFiles.sharedPath(b),
            sharedSizes(b).size,
            s"referenced only by deleted snapshots: ${byDropped.getOrElse(b, "?")}"
          )
        }
        def age(b: io.lineagestore.storage.BlobInfo) = duration(math.max(0L, nowMs - b.modificationTimeMs))
        val o = old.sortBy(_.name).map { b =>
          Deletion(
            CheckpointFiles.sharedPath(b.name),
            b.size,
            s"referenced by no snapshot, ${age(b)} old (older than the ${duration(graceMs)} grace period)"
          )
        }
        val y = recent.sortBy(_.name).map { b =>
          Deletion(
            CheckpointFiles.sharedPath(b.name),
            b.size,
            s"referenced by no snapshot but only ${age(b)} old (grace period ${duration(graceMs)}): it may " +
              "belong to a snapshot upload in progress"
          )
        }
        (a ++ o, y)
      }
    val zips = droppedZips.map(deletion)
    val deltas = droppedDeltas.map(deletion)
    val deleted = zips ++ blobDeletions ++ deltas
    CleanupPlan(
      store.ref,
      Some(head),
      Some(plan.oldestRetained),
      Some(plan.snapshotBase),
      zips,
      blobDeletions,
      deltas,
      young,
      allFiles - deleted.size,
      allBytes - deleted.map(_.bytes).sum,
      None,
      warnings.result()
    )
  }

  /** `90s`, `5m`, `6h`, `2d` (whole units only when exact; seconds otherwise). */
  def duration(ms: Long): String =
    Seq("d" -> 86400000L, "h" -> 3600000L, "m" -> 60000L)
      .collectFirst { case (u, size) if ms >= size && ms % size == 0 => s"${ms / size}$u" }
      .getOrElse(s"${ms / 1000}s")

  /** Deletes what `plan` lists, zips first, then blobs, then deltas; returns the errors (file: message). */
  def apply(store: ToolStore, plan: CleanupPlan): Seq[String] = {
    val errors = Seq.newBuilder[String]
    def del(name: String)(body: => Unit): Unit =
      try body
      catch { case e: Exception => errors += s"${store.locate(name)}: ${e.getMessage}" }
    def checkpointFile(d: Deletion) = CheckpointId.parseFileName(d.name).map { case (id, kind) =>
      CheckpointFile(id, kind)
    }
    plan.zips.foreach(d => del(d.name)(checkpointFile(d).foreach(store.files.deleteCheckpointFile)))
    plan.blobs.foreach { d =>
      del(d.name)(store.files.deleteSharedBlob(d.name.stripPrefix(CheckpointFiles.SharedDir + "/")))
    }
    plan.deltas.foreach(d => del(d.name)(checkpointFile(d).foreach(store.files.deleteCheckpointFile)))
    errors.result()
  }
}

package io.lineagestore.tools

import scala.util.Try

import io.lineagestore.format.SnapshotZip
import io.lineagestore.lineage._
import io.lineagestore.store.{CheckpointFiles, CleanupSteps}
import io.lineagestore.tools.Json._

/** One file clean-up would delete: its name in the store directory (`shared/<blob>` for a blob), size and
  * why.
  */
final case class Deletion(name: String, bytes: Long, reason: String)

/** What clean-up of one store would do, as shown to the user: the [[CleanupDecision]] with each file's size
  * and reason. `refused` says why nothing may be deleted.
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
    warnings: Seq[String],
    decision: Option[CleanupDecision] = None,
    temporaries: Seq[Deletion] = Nil
) {
  def deletions: Seq[Deletion] = zips ++ blobs ++ deltas ++ temporaries

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

/** Plans (and on request runs) the clean-up of one store offline. The decision is [[CleanupPlanner]]'s, the
  * one the provider's maintenance takes too, on the committed lineage from Spark's commit log plus delta
  * headers and a listing of the store; running it is [[CleanupSteps]]'. This object adds the I/O that gathers
  * the input and the reasons shown to the user.
  */
object StoreCleaner {

  def plan(
      store: ToolStore,
      log: Seq[CommitLogEntry],
      retain: Int,
      graceMs: Long,
      nowMs: Long,
      retirement: Option[String] = None
  ): CleanupPlan = {
    require(retain >= 1, s"versions to retain must be >= 1, got $retain")
    val files = store.files
    val listed = store.blobs.list("")
    val sizes = listed.map(b => b.name -> b.size).toMap
    val (existing, temporaries) = files.listRoot()
    val shared = files.listSharedBlobs().map(b => SharedBlob(b.name, b.size, b.modificationTimeMs))
    val sharedSizes = shared.map(b => b.name -> b.size).toMap
    val allBytes = listed.filterNot(_.name.startsWith(".")).map(_.size).sum + shared.map(_.size).sum
    val allFiles = listed.count(!_.name.startsWith(".")) + shared.size
    val lineage = CommittedLineage.resolve(files, log)
    val input = CleanupInput(
      lineage,
      existing,
      existingIsListing = true,
      retain,
      Some(shared),
      mayDeleteBlobs = true, // an upload in flight elsewhere is protected by the grace period
      nowMs,
      graceMs,
      retired = retirement.isDefined,
      temporaries = Some(temporaries)
    )
    def blobsOf(id: CheckpointId): Either[String, Set[String]] =
      Try(files.readSnapshotIndex(id).sharedBlobs).toEither.left.map(e =>
        Option(e.getMessage).getOrElse(e.toString)
      )
    val decision = CleanupPlanner.decide(input, blobsOf)

    decision.refused.foreach { refusal =>
      val why = refusal match {
        case CleanupRefusal.NoHead                  => "Spark's commit log names no checkpoint of this store"
        case CleanupRefusal.Inconsistent(conflicts) =>
          s"the committed lineage is inconsistent: ${conflicts.mkString("; ")}"
        case CleanupRefusal.HeadMissing(head) =>
          s"the newest committed checkpoint $head has no file here (${store.locate(head.deltaFileName)}); run verify"
      }
      return CleanupPlan(
        store.ref,
        lineage.head,
        None,
        None,
        Nil,
        Nil,
        Nil,
        Nil,
        allFiles,
        allBytes,
        Some(why),
        Nil
      )
    }
    val head = lineage.head.get
    val plan = decision.retention.get

    def reason(f: CheckpointFile): String = retirement.getOrElse {
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
    def blobDeletion(blob: String, verdict: BlobVerdict) = Deletion(
      SnapshotZip.sharedPath(blob),
      sharedSizes.getOrElse(blob, 0L),
      verdict match {
        case BlobVerdict.OfDeletedSnapshots(ids) =>
          s"referenced only by deleted snapshots: ${ids.map(_.snapshotFileName).sorted.mkString(", ")}"
        case BlobVerdict.Orphan(age) =>
          s"referenced by no snapshot, ${duration(age)} old (older than the ${duration(graceMs)} grace period)"
      }
    )
    val young = decision.youngOrphans.map { b =>
      Deletion(
        SnapshotZip.sharedPath(b.name),
        b.size,
        s"referenced by no snapshot but only ${duration(math.max(0L, nowMs - b.modifiedMs))} old (grace period " +
          s"${duration(graceMs)}): it may belong to a snapshot upload in progress"
      )
    }
    val zips = decision.zips.map(deletion)
    val blobs = decision.blobs.map { case (b, v) => blobDeletion(b, v) }
    val deltas = decision.deltas.map(deletion)
    val unfinished = decision.temporaries.map { t =>
      val of = t.target.fold("")(f => s" of ${f.name}")
      Deletion(
        t.name,
        t.size,
        s"an unfinished write$of, ${duration(math.max(0L, nowMs - t.modifiedMs))} old (older than the " +
          s"${duration(graceMs)} grace period): its writer died or gave it up"
      )
    }
    // temporaries are hidden files, not counted among the store's files (allFiles)
    val deleted = zips ++ blobs ++ deltas
    CleanupPlan(
      store.ref,
      Some(head),
      Some(plan.oldestRetained),
      Some(plan.snapshotBase),
      zips,
      blobs,
      deltas,
      young,
      allFiles - deleted.size,
      allBytes - deleted.map(_.bytes).sum,
      None,
      decision.warnings,
      Some(decision),
      unfinished
    )
  }

  /** `90s`, `5m`, `6h`, `2d` (whole units only when exact; seconds otherwise). */
  def duration(ms: Long): String =
    Seq("d" -> 86400000L, "h" -> 3600000L, "m" -> 60000L)
      .collectFirst { case (u, size) if ms >= size && ms % size == 0 => s"${ms / size}$u" }
      .getOrElse(s"${ms / 1000}s")

  /** Runs `plan`'s decision with [[CleanupSteps]] (zips, then blobs, then deltas, then temporaries); returns
    * the error that stopped it, if one did (file: message).
    */
  def apply(store: ToolStore, plan: CleanupPlan): Seq[String] =
    plan.decision.toSeq.flatMap { d =>
      CleanupSteps.run(d, store.files).failure.map { case (file, e) => s"$file: ${e.getMessage}" }
    }
}

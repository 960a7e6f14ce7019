package io.lineagestore.tools

import scala.util.Try

import io.lineagestore.format.SnapshotZip
import io.lineagestore.lineage._
import io.lineagestore.store.{CheckpointFiles, CleanupSteps}
import io.lineagestore.tools.Json._

/** One file clean-up would delete (or, a young unreferenced blob, keeps): its name in the store directory
  * (`shared/<blob>` for a blob), size and why.
  */
final case class Deletion(name: String, bytes: Long, reason: DeletionReason) {
  def toJson: Json = obj("file" -> name, "bytes" -> bytes, "reason" -> reason.toJson)
}

/** Why clean-up deletes or keeps a file, as data: a `kind` and the facts behind it. The command line words it
  * (python/lineagestore/cli/gc.py), so the JVM returns no sentences and a wording lives in one language.
  * Versions are store versions; `oldestRetained..head` is the window kept loadable.
  */
sealed trait DeletionReason {
  def kind: String
  protected def facts: Seq[(String, Json)]
  def toJson: Json = Obj(("kind" -> Str(kind)) +: facts)
}

object DeletionReason {

  /** The store's partition is above the operator's partition count in batch `batch` and no retained batch
    * names it: every file up to its last committed checkpoint (of batch `lastBatch`) goes.
    */
  final case class RetiredStore(
      operatorId: Long,
      partitionId: Int,
      partitions: Int,
      batch: Long,
      lastBatch: Long
  ) extends DeletionReason {
    def kind = "retiredStore"
    def facts = Seq(
      "operatorId" -> Num(operatorId),
      "partitionId" -> Num(partitionId.toLong),
      "partitions" -> Num(partitions.toLong),
      "batch" -> Num(batch),
      "lastBatch" -> Num(lastBatch)
    )
  }

  /** A file of the lineage before a fresh start at version `base` (a repartition's delta holding the whole
    * state), which rebuilds the window.
    */
  final case class BeforeFreshStart(base: Long, oldestRetained: Long, head: Long) extends DeletionReason {
    def kind = "beforeFreshStart"
    def facts = Seq("base" -> Num(base), "oldestRetained" -> Num(oldestRetained), "head" -> Num(head))
  }

  /** A file below the snapshot base `base`, whose snapshot rebuilds the window; `committed`: on the committed
    * lineage (else another attempt).
    */
  final case class BelowSnapshotBase(committed: Boolean, base: Long, oldestRetained: Long, head: Long)
      extends DeletionReason {
    def kind = "belowSnapshotBase"
    def facts = Seq(
      "committed" -> Bool(committed),
      "base" -> Num(base),
      "oldestRetained" -> Num(oldestRetained),
      "head" -> Num(head)
    )
  }

  /** An attempt outside the committed lineage (`status`: orphan, pending, unknown) older than the window. */
  final case class OutsideLineage(status: String, oldestRetained: Long, head: Long) extends DeletionReason {
    def kind = "outsideLineage"
    def facts = Seq("status" -> Str(status), "oldestRetained" -> Num(oldestRetained), "head" -> Num(head))
  }

  /** A shared blob only deleted snapshots (`snapshots`: their zip names) reference. */
  final case class OfDeletedSnapshots(snapshots: Seq[String]) extends DeletionReason {
    def kind = "ofDeletedSnapshots"
    def facts = Seq("snapshots" -> strs(snapshots))
  }

  /** A shared blob no snapshot references, `ageMs` old; deleted past the grace period, kept (`young`) before
    * it: it may belong to a snapshot upload in progress.
    */
  final case class Unreferenced(ageMs: Long, graceMs: Long, young: Boolean) extends DeletionReason {
    def kind = if (young) "unreferencedYoung" else "unreferenced"
    def facts = Seq("ageMs" -> Num(ageMs), "graceMs" -> Num(graceMs))
  }

  /** A temporary of an unfinished write (of file `target`, when its name tells), `ageMs` old, past the grace
    * period: its writer died or gave it up.
    */
  final case class UnfinishedWrite(target: Option[String], ageMs: Long, graceMs: Long)
      extends DeletionReason {
    def kind = "unfinishedWrite"
    def facts = Seq("target" -> opt(target), "ageMs" -> Num(ageMs), "graceMs" -> Num(graceMs))
  }
}

/** Why clean-up deletes nothing, and what it could not read, as data (a `kind` and its facts), worded by the
  * command line (python/lineagestore/cli/gc.py) like [[DeletionReason]]. An `error` is the failure's own
  * message (naming the file), which stays a message.
  */
object CleanupReport {
  def refusal(r: CleanupRefusal): Json = r match {
    case CleanupRefusal.NoHead => obj("kind" -> "noHead")
    // each conflict is the lineage's own description of it (CommittedLineage), naming versions and files
    case CleanupRefusal.Inconsistent(conflicts) =>
      obj("kind" -> "inconsistent", "conflicts" -> strs(conflicts))
    case CleanupRefusal.HeadMissing(head) =>
      obj("kind" -> "headMissing", "head" -> head.toString, "file" -> head.deltaFileName)
  }

  def warning(w: CleanupWarning): Json = w match {
    case CleanupWarning.LineageUnreadable(error) => obj("kind" -> "lineageUnreadable", "error" -> error)
    case CleanupWarning.ExpiredIndexUnreadable(id, error) =>
      obj("kind" -> "expiredIndexUnreadable", "snapshot" -> id.snapshotFileName, "error" -> error)
    case CleanupWarning.RetainedIndexUnreadable(id, error) =>
      obj("kind" -> "retainedIndexUnreadable", "snapshot" -> id.snapshotFileName, "error" -> error)
  }
}

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
    refused: Option[CleanupRefusal],
    warnings: Seq[CleanupWarning],
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
    "delete" -> arr(deletions.map(_.toJson)),
    "deleteBytes" -> deletions.map(_.bytes).sum,
    "keptYoungOrphans" -> arr(keptYoungOrphans.map(_.toJson)),
    "keptFiles" -> keptFiles,
    "keptBytes" -> keptBytes,
    "refused" -> refused.map(CleanupReport.refusal).getOrElse(Null),
    "warnings" -> arr(warnings.map(CleanupReport.warning)),
    "applied" -> applied,
    "errors" -> strs(errors)
  )
}

/** Plans (and on request runs) the clean-up of one store offline. The decision is [[CleanupPlanner]]'s, the
  * one the provider's maintenance takes too, on the committed lineage from Spark's commit log plus delta
  * headers and a listing of the store; running it is [[CleanupSteps]]'. This object adds the I/O that gathers
  * the input and the reason of each file (as data: [[DeletionReason]]).
  */
object StoreCleaner {

  def plan(
      store: ToolStore,
      log: Seq[CommitLogEntry],
      retain: Int,
      graceMs: Long,
      nowMs: Long,
      retirement: Option[DeletionReason.RetiredStore] = None
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
        Some(refusal),
        Nil
      )
    }
    val head = lineage.head.get
    val plan = decision.retention.get

    def reason(f: CheckpointFile): DeletionReason = retirement.getOrElse {
      val base = plan.snapshotBase.version
      if (f.id.version < base) {
        if (lineage.freshStart.contains(plan.snapshotBase))
          DeletionReason.BeforeFreshStart(base, plan.oldestRetained, head.version)
        else
          DeletionReason.BelowSnapshotBase(lineage.isCommitted(f.id), base, plan.oldestRetained, head.version)
      } else DeletionReason.OutsideLineage(lineage.status(f.id), plan.oldestRetained, head.version)
    }
    def deletion(f: CheckpointFile) = Deletion(f.name, sizes.getOrElse(f.name, 0L), reason(f))
    def blobDeletion(blob: String, verdict: BlobVerdict) = Deletion(
      SnapshotZip.sharedPath(blob),
      sharedSizes.getOrElse(blob, 0L),
      verdict match {
        case BlobVerdict.OfDeletedSnapshots(ids) =>
          DeletionReason.OfDeletedSnapshots(ids.map(_.snapshotFileName).toSeq.sorted)
        case BlobVerdict.Orphan(age) => DeletionReason.Unreferenced(age, graceMs, young = false)
      }
    )
    val young = decision.youngOrphans.map { b =>
      Deletion(
        SnapshotZip.sharedPath(b.name),
        b.size,
        DeletionReason.Unreferenced(math.max(0L, nowMs - b.modifiedMs), graceMs, young = true)
      )
    }
    val zips = decision.zips.map(deletion)
    val blobs = decision.blobs.map { case (b, v) => blobDeletion(b, v) }
    val deltas = decision.deltas.map(deletion)
    val unfinished = decision.temporaries.map { t =>
      Deletion(
        t.name,
        t.size,
        DeletionReason.UnfinishedWrite(t.target.map(_.name), math.max(0L, nowMs - t.modifiedMs), graceMs)
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

  /** Runs `plan`'s decision with [[CleanupSteps]] (zips, then blobs, then deltas, then temporaries); returns
    * the error that stopped it, if one did (file: message).
    */
  def apply(store: ToolStore, plan: CleanupPlan): Seq[String] =
    plan.decision.toSeq.flatMap { d =>
      CleanupSteps.run(d, store.files).failure.map { case (file, e) => s"$file: ${e.getMessage}" }
    }
}

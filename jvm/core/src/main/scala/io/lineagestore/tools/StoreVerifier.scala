package io.lineagestore.tools

import java.io.File
import java.nio.file.Files

import scala.collection.mutable

import io.lineagestore.format.{CorruptCheckpointFileException, SnapshotFile}
import io.lineagestore.lineage.{
  CheckpointId,
  CommitLogEntry,
  CommittedLineage,
  LineageException,
  LineageResolver,
  LoadBase,
  LoadPlan,
  RetentionPlanner
}
import io.lineagestore.store.{HashCache, LocalDirectories}
import io.lineagestore.tools.Json._

/** One problem found by [[StoreVerifier]]: the file (full location) and what is wrong with it, the batches
  * whose checkpoint needs it, and `via`, the checkpoint file being read when the problem is in another file
  * (a shared blob of a snapshot).
  */
final case class VerifyProblem(
    file: String,
    what: VerifyProblem.What,
    batches: Seq[Long],
    via: Option[String]
)

/** What is wrong with a file, as data (a `kind` and its facts), worded by python/lineagestore/cli/verify.py.
  */
object VerifyProblem {
  sealed trait What { def toJson: Seq[(String, Json)] }

  /** Reading or verifying it failed: `error` is the failure's own message (naming the file, what to do). */
  final case class Failed(error: String) extends What {
    def toJson = Seq("kind" -> Str("error"), "error" -> Str(error))
  }

  /** The delta of the checkpoint batch `batch` committed is gone, and so is its snapshot `snapshot`. */
  final case class Missing(snapshot: String, batch: Long) extends What {
    def toJson = Seq("kind" -> Str("missing"), "snapshot" -> Str(snapshot), "batch" -> Num(batch))
  }

  /** Thrown inside [[StoreVerifier]] to record a [[Missing]] problem like any other. */
  private[tools] final class MissingException(val file: String, val missing: Missing) extends Exception(file)
}

final case class VerifyResult(
    store: StoreRef,
    checked: Seq[(CommitLogEntry, Option[LoadPlan])],
    problems: Seq[VerifyProblem],
    filesVerified: Int,
    bytesVerified: Long,
    // batch -> the damaged snapshots its checkpoint loads only by routing around (as a load would)
    detours: Map[Long, Seq[CheckpointId]] = Map.empty
) {
  def ok: Boolean = problems.isEmpty

  def toJson: Json = obj(
    "operatorId" -> store.operatorId,
    "partitionId" -> store.partitionId,
    "storeName" -> store.storeName,
    "dir" -> store.dir,
    "ok" -> ok,
    "checked" -> arr(checked.map { case (e, plan) =>
      obj(
        "batchId" -> e.batchId,
        "version" -> e.id.version,
        "uniqueId" -> e.id.uniqueId,
        "base" -> plan.map(p => Str(describe(p.base))).getOrElse(Null),
        "deltas" -> plan.map(p => Num(p.deltas.size.toLong)).getOrElse(Null),
        "ok" -> plan.isDefined,
        "detourAround" -> strs(detours.getOrElse(e.batchId, Nil).map(_.snapshotFileName))
      )
    }),
    "problems" -> arr(
      problems.map(p =>
        Obj(
          ("file" -> Str(p.file)) +: p.what.toJson :+ ("batches" -> arr(p.batches.map(Num))) :+ ("via" -> opt(
            p.via
          ))
        )
      )
    ),
    "filesVerified" -> filesVerified,
    "bytesVerified" -> bytesVerified
  )

  private def describe(b: LoadBase): String = b match {
    case LoadBase.Empty       => "empty"
    case LoadBase.Snapshot(s) => s"snapshot ${s.snapshotFileName}"
    case LoadBase.Local(l)    => s"local $l"
  }
}

/** Proves that committed checkpoints load: for each one, resolves its load plan from scratch with
  * [[LineageResolver]] (no local state), then reads back every file the plan needs through
  * [[io.lineagestore.store.CheckpointFiles]], which verifies as it reads: each delta's header, records,
  * record count and CRC32C; each snapshot's zip entries, INDEX checksum and identity, and every shared blob's
  * size, CRC32C and identity (SHA-256, or the SST's RocksDB ID read back from the restored file: by restoring
  * the snapshot into a scratch directory). The batch's own delta is read too when the plan starts at its
  * snapshot (the change feed reads it). Each file is verified once per call however many plans need it.
  */
object StoreVerifier {

  /** The entries of `log` whose checkpoints retention still holds in this store
    * ([[io.lineagestore.lineage.RetentionPlanner.heldFrom]]), and the older ones, whose files a clean-up
    * removed (beyond retention: skipped, not damage). What `lineagestore verify` checks without `--retain`.
    * `shrunk`: a repartition shrank the store's operator below its partition, so a clean-up may have retired
    * it whole ([[io.lineagestore.lineage.CleanupPlanner.shrunkBelow]]).
    */
  def retained(
      store: ToolStore,
      log: Seq[CommitLogEntry],
      shrunk: Boolean = false
  ): (Seq[CommitLogEntry], Seq[CommitLogEntry]) = {
    val lineage = CommittedLineage.resolve(store.files, log)
    val from = RetentionPlanner.heldFrom(
      lineage.committed,
      store.files.listCheckpointFiles(),
      lineage.freshStart,
      shrunk
    )
    log.sortBy(_.batchId).partition(e => from.forall(e.id.version >= _))
  }

  def verify(store: ToolStore, targets: Seq[CommitLogEntry], scratchRoot: File): VerifyResult = {
    val files = store.files
    val outcome =
      mutable.LinkedHashMap.empty[String, Option[(String, VerifyProblem.What)]] // location -> problem
    val needers = mutable.Map.empty[String, mutable.LinkedHashSet[Long]]
    var verifiedFiles = 0
    var verifiedBytes = 0L
    val scratch = Files.createTempDirectory(scratchRoot.toPath, "verify-").toFile
    // what the scratch directory holds after the last successful restore: name -> (blob, size, identity)
    var restored = Map.empty[String, SnapshotFile]
    val detours = mutable.LinkedHashMap.empty[Long, Seq[CheckpointId]]

    def record(location: String, batch: Long)(check: => Long): Boolean = {
      needers.getOrElseUpdate(location, mutable.LinkedHashSet.empty) += batch
      val result = outcome.getOrElseUpdate(
        location, {
          try {
            verifiedBytes += check
            verifiedFiles += 1
            None
          } catch {
            case e: VerifyProblem.MissingException => Some((e.file, e.missing))
            case e: CorruptCheckpointFileException => Some((e.file, VerifyProblem.Failed(e.getMessage)))
            case e: Exception                      =>
              Some((location, VerifyProblem.Failed(Option(e.getMessage).getOrElse(e.toString))))
          }
        }
      )
      result.isEmpty
    }

    def verifyDelta(id: CheckpointId, batch: Long): Boolean =
      record(store.locate(id.deltaFileName), batch) {
        files.readDelta(id)((_, _, _) => ())
        store.blobs.size(id.deltaFileName).getOrElse(0L)
      }

    def verifySnapshot(id: CheckpointId, batch: Long): Boolean =
      record(store.locate(id.snapshotFileName), batch) {
        val index = files.readSnapshotIndex(id)
        // blobs restored by an earlier snapshot of this call were verified then: keep them
        val known = new HashCache
        index.files.foreach { f =>
          restored
            .get(f.name)
            .filter(r => f.blob.isDefined && r == f)
            .foreach(r => known.put(f.name, r.size, r.identity))
        }
        try {
          val (_, stats) = files.restoreSnapshot(id, scratch, known)
          restored = index.files.map(f => f.name -> f).toMap
          store.blobs.size(id.snapshotFileName).getOrElse(0L) + stats.bytesMoved
        } catch {
          case e: Throwable =>
            restored = Map.empty
            Option(scratch.listFiles()).getOrElse(Array.empty[File]).foreach(_.delete())
            throw e
        }
      }

    try {
      val checked = targets.sortBy(_.batchId).map { e =>
        val id = e.id
        val exists = store.blobs.exists(id.deltaFileName) || store.blobs.exists(id.snapshotFileName)
        if (!exists) {
          record(store.locate(id.deltaFileName), e.batchId) {
            throw new VerifyProblem.MissingException(
              store.locate(id.deltaFileName),
              VerifyProblem.Missing(id.snapshotFileName, e.batchId)
            )
          }
          e -> None
        } else {
          val plan =
            try Right(LineageResolver.plan(id, None, files))
            catch { case ex: Exception => Left(ex) }
          plan match {
            case Left(ex) =>
              val file = ex match {
                case l: LineageException => l.file
                case _                   => store.locate(id.deltaFileName)
              }
              record(file, e.batchId)(throw ex)
              e -> None
            case Right(first) =>
              def baseOkOf(plan: LoadPlan) = plan.base match {
                case LoadBase.Snapshot(s) => verifySnapshot(s, e.batchId)
                case _                    => true
              }
              // a damaged snapshot is routed around as a load does (LineageStore.load): plan without it.
              // Still a copy of store.LoadRoutes' detour rule (MaxDetours = 8): LoadRoutes stops at the
              // first failure and counts; here every file is recorded as a problem and checking goes on.
              var p = first
              var skipped = Vector.empty[CheckpointId]
              var baseOk = baseOkOf(p)
              var routes = true
              while (!baseOk && routes && skipped.size < 8) p.base match {
                case LoadBase.Snapshot(s) =>
                  scala.util.Try(LineageResolver.plan(id, None, files, (skipped :+ s).toSet)).toOption match {
                    case Some(next) => skipped :+= s; p = next; baseOk = baseOkOf(next)
                    case None       => routes = false
                  }
                case _ => routes = false
              }
              if (!baseOk) p = first
              else if (skipped.nonEmpty) detours(e.batchId) = skipped
              val deltasOk = p.deltas.map(d => verifyDelta(d, e.batchId)).forall(identity)
              val ownOk =
                if (p.deltas.contains(id) || !store.blobs.exists(id.deltaFileName)) true
                else verifyDelta(id, e.batchId)
              e -> Some(p).filter(_ => baseOk && deltasOk && ownOk)
          }
        }
      }
      val problems = outcome.toSeq.collect { case (location, Some((file, what))) =>
        VerifyProblem(file, what, needers(location).toSeq.sorted, Some(location).filter(_ != file))
      }
      VerifyResult(store.ref, checked, problems, verifiedFiles, verifiedBytes, detours.toMap)
    } finally LocalDirectories.deleteRecursively(scratch)
  }
}

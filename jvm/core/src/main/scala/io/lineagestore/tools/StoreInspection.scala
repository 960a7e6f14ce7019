package io.lineagestore.tools

import scala.util.Try

import io.lineagestore.format.SnapshotIndex
import io.lineagestore.lineage.{
  CheckpointFile,
  CheckpointId,
  CommitLogEntry,
  CommittedLineage,
  Lineage,
  LineageResolver,
  RetentionPlanner
}
import io.lineagestore.tools.Json._

/** Read-only report of one store directory against Spark's commit log: every checkpoint file with its lineage
  * and status (committed, orphan attempt, pending), every snapshot with the shared blobs it references, and
  * every shared blob with how many snapshots reference it (shared: more than one; unique: one; orphan: none).
  * Reads delta headers and snapshot indexes only, never whole files.
  *
  * Damage is judged as `lineagestore verify` judges it: a damaged file a retained committed batch needs (a
  * committed checkpoint at or above where retention holds from, [[RetentionPlanner.heldFrom]]) is an error;
  * one no retained committed batch needs (an orphan or pending attempt, a committed file below what retention
  * holds) is listed under `damageNotNeeded` with its status, for the command line to name as a note. A store
  * a repartition shrank its operator below (`shrunk`) and a clean-up retired whole holds nothing retention
  * needs.
  */
object StoreInspection {

  def inspect(store: ToolStore, log: Seq[CommitLogEntry], nowMs: Long, shrunk: Boolean = false): Json = {
    val files = store.files
    val listed = store.blobs.list("")
    val sizes = listed.map(b => b.name -> b.size).toMap
    def size(name: String): Long = sizes.getOrElse(name, 0L)
    val parsed = listed.flatMap(b => CheckpointId.parseFileName(b.name).map(b.name -> _))
    val other = listed.map(_.name).filterNot(n => n.startsWith(".") || parsed.exists(_._1 == n))
    val ids = parsed.map(_._2._1).distinct.sortBy(id => (id.version, id.uniqueId))
    val lineage = CommittedLineage.resolve(files, log)

    val indexes: Map[CheckpointId, Try[SnapshotIndex]] =
      ids
        .filter(id => sizes.contains(id.snapshotFileName))
        .map(id => id -> Try(files.readSnapshotIndex(id)))
        .toMap
    val shared = files.listSharedBlobs()
    val refs: Map[String, Seq[CheckpointId]] =
      indexes.toSeq
        .flatMap { case (id, t) => t.toOption.toSeq.flatMap(_.sharedBlobs.map(_ -> id)) }
        .groupBy(_._1)
        .map { case (b, xs) => b -> xs.map(_._2).sortBy(_.version) }
    val present = shared.map(_.name).toSet

    val headers = ids.map { id =>
      id -> (if (sizes.contains(id.deltaFileName)) Try(files.lineageOf(id).getOrElse(Lineage(Nil)))
             else Try(Lineage(Nil)))
    }.toMap
    val heldFrom = RetentionPlanner.heldFrom(
      lineage.committed,
      parsed.map { case (_, (id, kind)) => CheckpointFile(id, kind) },
      lineage.freshStart,
      shrunk
    )
    def needed(id: CheckpointId): Boolean = lineage.isCommitted(id) && heldFrom.forall(id.version >= _)
    // (checkpoint, file, error) per damaged header or index
    val damaged =
      ids.flatMap(id => headers(id).failed.toOption.map(e => (id, id.deltaFileName, e.getMessage))) ++
        ids.flatMap(id =>
          indexes.get(id).flatMap(_.failed.toOption).map(e => (id, id.snapshotFileName, e.getMessage))
        )
    val (neededDamage, notNeeded) = damaged.partition { case (id, _, _) => needed(id) }
    val notNeededErrors = notNeeded.map(_._3).toSet
    val checkpoints = ids.map { id =>
      val hasDelta = sizes.contains(id.deltaFileName)
      val ancestors = headers(id).map(_.ancestors)
      val status = lineage.status(id)
      Obj(
        Seq[(String, Json)](
          "version" -> id.version,
          "uniqueId" -> id.uniqueId,
          "status" -> status,
          "batchId" -> (if (status == "committed") lineage.batchOf.get(id.version).map(Num).getOrElse(Null)
                        else Null),
          "delta" -> hasDelta,
          "deltaBytes" -> size(id.deltaFileName),
          "snapshot" -> sizes.contains(id.snapshotFileName),
          "snapshotBytes" -> size(id.snapshotFileName),
          "ancestors" -> strs(ancestors.getOrElse(Nil).map(_.toString)),
          // the lineage starts afresh here (offline repartitioning): nothing older belongs to it
          "freshStart" -> headers(id).toOption.exists(_.fromEmpty)
        ) ++ ancestors.failed.toOption.map(e => "error" -> Str(e.getMessage))
      )
    }

    val snapshots = indexes.toSeq.sortBy { case (id, _) => (id.version, id.uniqueId) }.map { case (id, t) =>
      val base = Seq[(String, Json)](
        "version" -> id.version,
        "uniqueId" -> id.uniqueId,
        "status" -> lineage.status(id),
        "zipBytes" -> size(id.snapshotFileName),
        "needed" -> needed(id) // by a retained committed batch: missing blobs are a problem only then
      )
      t.fold(
        e => Obj(base :+ ("error" -> Str(e.getMessage))),
        index => {
          val blobFiles = index.files.filter(_.blob.isDefined)
          Obj(
            base ++ Seq[(String, Json)](
              "files" -> index.files.size,
              "stateBytes" -> index.totalBytes,
              "blobs" -> strs(blobFiles.flatMap(_.blob).distinct.sorted),
              "blobBytes" -> blobFiles.map(_.size).sum,
              "missingBlobs" -> strs(index.sharedBlobs.toSeq.sorted.filterNot(present))
            )
          )
        }
      )
    }

    val blobs = shared.sortBy(_.name).map { b =>
      val by = refs.getOrElse(b.name, Nil)
      obj(
        "name" -> b.name,
        "bytes" -> b.size,
        "ageMs" -> math.max(0L, nowMs - b.modificationTimeMs),
        "references" -> by.size,
        "referencedBy" -> strs(by.map(_.toString))
      )
    }

    def sum(xs: Seq[Long]) = xs.sum
    val byRefs = shared.groupBy(b => math.min(refs.getOrElse(b.name, Nil).size, 2))
    def count(k: Int) = byRefs.getOrElse(k, Nil).size
    def bytes(k: Int) = sum(byRefs.getOrElse(k, Nil).map(_.size))
    val attempts = ids.groupBy(id => lineage.status(id))
    def attemptBytes(s: String) =
      sum(
        attempts
          .getOrElse(s, Nil)
          .flatMap(id => Seq(id.deltaFileName, id.snapshotFileName).flatMap(sizes.get))
      )
    val unreadable = indexes.collect { case (id, t) if t.isFailure => id }.toSeq
    val totals = obj(
      "deltas" -> ids.count(id => sizes.contains(id.deltaFileName)),
      "deltaBytes" -> sum(ids.flatMap(id => sizes.get(id.deltaFileName))),
      "snapshots" -> indexes.size,
      "snapshotBytes" -> sum(ids.flatMap(id => sizes.get(id.snapshotFileName))),
      "blobs" -> shared.size,
      "blobBytes" -> sum(shared.map(_.size)),
      "sharedBlobs" -> count(2),
      "sharedBytes" -> bytes(2),
      "uniqueBlobs" -> count(1),
      "uniqueBytes" -> bytes(1),
      // with an unreadable index nobody can tell which blobs it references: none is called an orphan then
      "orphanBlobs" -> (if (unreadable.isEmpty) count(0) else 0),
      "orphanBlobBytes" -> (if (unreadable.isEmpty) bytes(0) else 0L),
      "orphanAttempts" -> attempts.getOrElse("orphan", Nil).size,
      "orphanAttemptBytes" -> attemptBytes("orphan"),
      "pendingAttempts" -> attempts.getOrElse("pending", Nil).size,
      "unknownCheckpoints" -> attempts.getOrElse("unknown", Nil).size
    )

    obj(
      "operatorId" -> store.ref.operatorId,
      "partitionId" -> store.ref.partitionId,
      "storeName" -> store.ref.storeName,
      "dir" -> store.ref.dir,
      "head" -> opt(lineage.head.map(_.toString)),
      // deltas a cold restore of the head replays (issue 17: bounded by maxSnapshotLagDeltas); snapshots
      // whose index cannot be read are routed around as a load would; null when no route exists
      "snapshotLag" -> lineage.head
        .flatMap(h => Try(LineageResolver.plan(h, None, files, unreadable.toSet).deltas.size.toLong).toOption)
        .map(Num)
        .getOrElse(Null),
      "chosenPath" -> arr(lineage.path.map { id =>
        obj(
          "version" -> id.version,
          "uniqueId" -> id.uniqueId,
          "batchId" -> lineage.batchOf.get(id.version).map(Num).getOrElse(Null),
          "delta" -> sizes.contains(id.deltaFileName),
          "snapshot" -> sizes.contains(id.snapshotFileName)
        )
      }),
      "checkpoints" -> arr(checkpoints),
      "snapshots" -> arr(snapshots),
      "blobs" -> arr(blobs),
      "otherFiles" -> strs(other),
      "totals" -> totals,
      "conflicts" -> strs(lineage.conflicts),
      "retainedFrom" -> heldFrom.map(Num).getOrElse(Null),
      "errors" -> strs((lineage.errors.filterNot(notNeededErrors) ++ neededDamage.map(_._3)).distinct),
      "damageNotNeeded" -> arr(notNeeded.map { case (id, file, error) =>
        obj(
          "file" -> file,
          "version" -> id.version,
          "uniqueId" -> id.uniqueId,
          "status" -> lineage.status(id),
          "error" -> error
        )
      })
    )
  }
}

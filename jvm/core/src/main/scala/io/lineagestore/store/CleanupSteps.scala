package io.lineagestore.store

import scala.util.control.NonFatal

import io.lineagestore.format.SnapshotZip
import io.lineagestore.lineage.{CheckpointFile, CleanupDecision}

/** What running a [[CleanupDecision]] did: the paths deleted (shared blobs as `shared/<blob>`), and the
  * deletion that failed, if one did (the path and why). Nothing after a failed deletion was attempted.
  */
final case class CleanupOutcome(deleted: Seq[String], failure: Option[(String, Throwable)])

/** Runs a [[CleanupDecision]] against one store's files, the provider's maintenance and `lineagestore gc`
  * alike: its steps in its order (zips, shared blobs, deltas, temporaries of unfinished writes), with a crash
  * point after each of the first three. Stops at the first deletion that fails: the order keeps every
  * retained version loadable at any point, and the next clean-up decides again from what is left.
  */
object CleanupSteps {

  def run(
      decision: CleanupDecision,
      files: CheckpointFiles,
      crash: CrashPoints = CrashPoints.None,
      blobDeleted: String => Unit = _ => ()
  ): CleanupOutcome = {
    val deleted = Seq.newBuilder[String]
    // the first deletion that fails ends the run; crash points are not deletions and always propagate
    def delete(path: String)(body: => Unit): Option[CleanupOutcome] =
      try { body; deleted += path; None }
      catch { case NonFatal(e) => Some(CleanupOutcome(deleted.result(), Some(files.locate(path) -> e))) }
    def checkpointFile(f: CheckpointFile) = delete(f.name)(files.deleteCheckpointFile(f))
    def sharedBlob(blob: String) = delete(SnapshotZip.sharedPath(blob)) {
      files.deleteSharedBlob(blob)
      blobDeleted(blob)
    }
    def step[T](xs: Seq[T])(del: T => Option[CleanupOutcome]): Option[CleanupOutcome] =
      xs.view.flatMap(del(_)).headOption
    step(decision.zips)(checkpointFile).foreach(failed => return failed)
    crash.at(CrashPoints.CleanupAfterZips)
    step(decision.blobs)(b => sharedBlob(b._1)).foreach(failed => return failed)
    crash.at(CrashPoints.CleanupAfterBlobs)
    step(decision.deltas)(checkpointFile).foreach(failed => return failed)
    crash.at(CrashPoints.CleanupAfterDeltas)
    // last, and no crash point after: deleting them changes nothing any load or later step reads
    step(decision.temporaries)(t => delete(t.name)(files.blobs.delete(t.name))).foreach(failed =>
      return failed
    )
    CleanupOutcome(deleted.result(), None)
  }
}

package io.lineagestore.store

import java.io.File
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, StandardCopyOption}

import scala.util.control.NonFatal

import io.lineagestore.lineage.CheckpointId
import io.lineagestore.snapshot.LocalFile

/** A standby copy of one store on this executor: the files of one snapshot of the store's lineage as a closed
  * RocksDB directory (`db/`, the layout a restore builds), fetched in the background by the executor's
  * standby follower while it holds the standby's lease ([[LocalDirectories.acquireStandby]]), and taken over
  * by the store's next provider on this executor ([[LocalDirectories.acquire]] moves `db/` into the store's
  * own directory). Layout and locking are [[LocalDirectories]]'.
  *
  * A copy is never trusted: the load that takes it over plans from the checkpoint Spark asks for and restores
  * that plan's snapshot into the directory as any restore does ([[CheckpointFiles.restoreSnapshot]]: a local
  * file is kept only if its identity and CRC32C match the index, [[LocalCopyCheck]] checks the result before
  * RocksDB opens it), then replays the deltas. So a copy that lags, was half fetched, is damaged or belongs
  * to an attempt that was never committed changes how much the load downloads, never what it loads. The
  * record `STANDBY` names the snapshot the copy completed (the follower's notion of "up to date" only).
  *
  * `files` reads on the standby pool (`standbyThreads`), never on the stores' transfer pool. One thread at a
  * time per copy (the lease's lock); `hashes` is the identities known of `db/`'s files (concurrent).
  */
final class StandbyCopy(
    lease: StandbyLease,
    files: CheckpointFiles,
    crash: CrashPoints = CrashPoints.None,
    hashes: HashCache = new HashCache
) {
  import StandbyCopy._

  val dir: File = lease.dir
  private val dbDir = new File(dir, DbDir)

  /** The snapshot the copy last completed (None: none, or it is being replaced). */
  def reached: Option[CheckpointId] = readRecord(dir)

  /** Bytes the copy holds on local disk. */
  def bytesHeld: Long = sizeOf(dbDir)

  /** Makes the copy one of `snapshot`, fetching only the files it lacks (by identity), if the whole copy fits
    * beside `othersBytes` held by the executor's other standbys under `maxBytes`. Fails as a restore fails (a
    * damaged or missing file named); the copy is then incomplete and has no record.
    */
  def refresh(snapshot: CheckpointId, othersBytes: Long, maxBytes: Long): Refresh = {
    if (!StandbyPlan.behind(reached, snapshot)) return Refresh.UpToDate(snapshot)
    val index = files.readSnapshotIndex(snapshot)
    val plan = StandbyPlan.fetch(index, localFiles())
    if (!StandbyPlan.fits(plan.bytesHeld, othersBytes, maxBytes))
      return Refresh.TooLarge(snapshot, plan.bytesHeld, othersBytes, maxBytes)
    // from here the directory is between two snapshots: no record claims either
    Files.deleteIfExists(new File(dir, RecordName).toPath)
    val (_, stats) = files.restoreSnapshot(snapshot, dbDir, hashes)
    crash.at(CrashPoints.StandbyAfterFiles)
    writeRecord(dir, snapshot, files.blobs.locate(""))
    dir.setLastModified(System.currentTimeMillis())
    Refresh.Fetched(snapshot, stats)
  }

  private def localFiles(): Seq[LocalFile] =
    Option(dbDir.listFiles()).getOrElse(Array.empty[File]).filter(_.isFile).toSeq.map { f =>
      LocalFile(f.getName, f.length(), hashes.get(f.getName, f.length()))
    }
}

object StandbyCopy {
  val DbDir = "db"
  val RecordName = "STANDBY"

  /** What one [[StandbyCopy.refresh]] did. */
  sealed trait Refresh { def snapshot: CheckpointId }
  object Refresh {
    final case class UpToDate(snapshot: CheckpointId) extends Refresh
    final case class Fetched(snapshot: CheckpointId, stats: TransferStats) extends Refresh
    final case class TooLarge(snapshot: CheckpointId, bytes: Long, othersBytes: Long, maxBytes: Long)
        extends Refresh
  }

  /** The record: `standby 1`, `snapshot <version> <uniqueId>`, `location <store directory>`. */
  private[store] def writeRecord(dir: File, snapshot: CheckpointId, location: String): Unit = {
    val tmp = new File(dir, s".$RecordName.tmp")
    Files.writeString(
      tmp.toPath,
      s"standby 1\nsnapshot ${snapshot.version} ${snapshot.uniqueId}\nlocation $location\n",
      UTF_8
    )
    Files.move(
      tmp.toPath,
      new File(dir, RecordName).toPath,
      StandardCopyOption.REPLACE_EXISTING,
      StandardCopyOption.ATOMIC_MOVE
    )
  }

  /** The snapshot a copy's record names; None when there is none or it cannot be read (nothing depends on it
    * for correctness: a copy is checked by content when it is used).
    */
  def readRecord(dir: File): Option[CheckpointId] = {
    val f = new File(dir, RecordName)
    if (!f.isFile) None
    else
      try
        Files
          .readAllLines(f.toPath, UTF_8)
          .toArray(Array.empty[String])
          .toSeq
          .map(_.split(" "))
          .collectFirst { case Array("snapshot", v, u) =>
            CheckpointId(v.toLong, u)
          }
      catch { case NonFatal(_) => None }
  }

  private[store] def sizeOf(f: File): Long =
    if (f.isFile) f.length()
    else Option(f.listFiles()).getOrElse(Array.empty[File]).map(sizeOf).sum
}

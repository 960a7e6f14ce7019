package io.lineagestore.store

import java.io.File
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, StandardCopyOption}

import scala.util.control.NonFatal

import io.lineagestore.lineage.CheckpointId
import io.lineagestore.engine.LocalFiles
import io.lineagestore.snapshot.LocalFile
import io.lineagestore.storage.BlobNotFoundException

/** A standby copy of one store on this executor: the files of one snapshot of the store's lineage as a closed
  * RocksDB directory (`db/`, the layout a restore builds) and the store's deltas after it (`deltas/`),
  * fetched in the background by the executor's standby follower while it holds the standby's lease
  * ([[LocalDirectories.acquireStandby]]), and taken over by the store's next provider on this executor
  * ([[LocalDirectories.acquire]] moves `db/` into the store's own directory). Layout and locking are
  * [[LocalDirectories]]'.
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
  private val deltasDir = new File(dir, DeltasDir)

  /** The snapshot the copy last completed (None: none, or it is being replaced). */
  def reached: Option[CheckpointId] = readRecord(dir)

  /** Bytes the copy holds on local disk. */
  def bytesHeld: Long = sizeOf(dbDir) + sizeOf(deltasDir)

  /** Names of the delta files the copy's `deltas/` holds. */
  def deltaNames: Set[String] =
    Option(deltasDir.listFiles())
      .getOrElse(Array.empty[File])
      .map(_.getName)
      .filter(_.endsWith(".delta"))
      .toSet

  /** Puts `fetched` ([[StandbyCopy.fetchDeltas]], downloaded without the copy's lease) into the copy's
    * `deltas/` and deletes the deltas there that `wanted` (the store's deltas on storage) no longer has above
    * `snapshot`, if the copy still holds `snapshot` (a takeover or a newer snapshot since the fetch: the
    * fetched files go instead). Each move is a rename: the lease is held for no download. Returns the newest
    * version the copy then holds contiguously from its snapshot (the snapshot's own when none).
    */
  def placeDeltas(snapshot: CheckpointId, wanted: Seq[CheckpointId], fetched: Seq[File]): Long = {
    if (!reached.contains(snapshot)) {
      fetched.foreach(f => Files.deleteIfExists(f.toPath))
      return snapshot.version
    }
    val above = wanted.filter(_.version > snapshot.version).sortBy(id => (id.version, id.uniqueId))
    val names = above.map(_.deltaFileName).toSet
    Files.createDirectories(deltasDir.toPath)
    Option(deltasDir.listFiles()).getOrElse(Array.empty[File]).foreach { f =>
      if (!names(f.getName)) Files.deleteIfExists(f.toPath) // at or below the snapshot, or gone from storage
    }
    fetched.foreach { f =>
      if (names(f.getName))
        Files.move(f.toPath, new File(deltasDir, f.getName).toPath, StandardCopyOption.ATOMIC_MOVE)
      else Files.deleteIfExists(f.toPath)
    }
    above.foldLeft(snapshot.version) { (held, id) =>
      if (id.version == held + 1 && new File(deltasDir, id.deltaFileName).isFile) id.version else held
    }
  }

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
  val DeltasDir = "deltas"
  val RecordName = "STANDBY"

  /** Downloads the deltas of `wanted` above `snapshot` that the copy lacks (`have`: [[deltaNames]]) into
    * `incoming`, oldest first, each whole (a temporary renamed) or not at all, stopping before the total
    * would pass `roomBytes` (later ones are of no use to a replay without it); one gone from storage since
    * the listing (an orphan attempt, or a clean-up) is skipped. Holds no lock, so a takeover never waits for
    * a download: `incoming` belongs to the executor's one polling thread, and [[placeDeltas]] moves the files
    * into the copy under its lease. What was in `incoming` before goes first (a fetch that died part-way).
    */
  def fetchDeltas(
      files: CheckpointFiles,
      snapshot: CheckpointId,
      wanted: Seq[CheckpointId],
      have: Set[String],
      incoming: File,
      roomBytes: Long
  ): (Seq[File], TransferStats) = {
    LocalFiles.deleteRecursively(incoming)
    Files.createDirectories(incoming.toPath)
    val missing = wanted
      .filter(id => id.version > snapshot.version && !have(id.deltaFileName))
      .sortBy(id => (id.version, id.uniqueId))
    var stats = TransferStats()
    val fetched = Seq.newBuilder[File]
    var atBound = false
    missing.foreach { id =>
      if (!atBound) {
        val tmp = new File(incoming, s".${id.deltaFileName}.part")
        val copied =
          try {
            val in = files.blobs.open(id.deltaFileName)
            try Files.copy(in, tmp.toPath, StandardCopyOption.REPLACE_EXISTING)
            finally in.close()
            true
          } catch { case _: BlobNotFoundException => false }
        if (copied && stats.bytesMoved + tmp.length() > roomBytes) {
          Files.deleteIfExists(tmp.toPath)
          atBound = true
        } else if (copied) {
          val target = new File(incoming, id.deltaFileName)
          Files.move(tmp.toPath, target.toPath, StandardCopyOption.ATOMIC_MOVE)
          stats = stats + TransferStats(filesMoved = 1, bytesMoved = target.length())
          fetched += target
        }
      }
    }
    (fetched.result(), stats)
  }

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

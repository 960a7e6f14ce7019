package io.lineagestore.store

import java.io.File
import java.util.concurrent.ConcurrentLinkedQueue

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import org.rocksdb.WriteBatch

import io.lineagestore.engine.{CloseableIterator, LocalRocksDb}
import io.lineagestore.format.SnapshotIndex
import io.lineagestore.lineage._

/** One store's state: a local RocksDB ([[LocalRocksDb]]) and its unforkable lineage of checkpoints in a blob
  * store ([[CheckpointFiles]]). This class sequences load, commit, snapshot and clean-up; what to load,
  * upload and delete is decided by the pure planners.
  *
  * Threads: one task at a time calls load/read/write/commit/abort (Spark's contract); Spark's maintenance
  * thread calls [[uploadSnapshots]] and [[cleanup]] concurrently. They share only the frozen-checkpoint
  * queue, the per-generation hash caches, [[PendingBlobs]] and what [[LineageCleanup]] knows, all safe for
  * that.
  */
final class LineageStore(
    files: CheckpointFiles,
    localRoot: File,
    settings: StoreSettings,
    crash: CrashPoints = CrashPoints.None,
    clock: () => Long = () => System.currentTimeMillis()
) extends AutoCloseable {

  import LineageStore._

  private val dbDir = new File(localRoot, "db")
  private val frozenRoot = new File(localRoot, "frozen")
  // A reused local directory (see LocalDirectories) may hold an earlier provider's RocksDB and frozen
  // checkpoints. The frozen ones were never registered here; the DB is only a source of files that the first
  // load keeps if their content matches, and is discarded if it does not even open (a crash mid-write).
  // A record of a clean close is taken (and deleted) before the directory is touched.
  deleteRecursively(frozenRoot)
  private var cleanClose = CleanCloseRecord.take(localRoot, files.store)
  private val db = {
    def open() =
      new LocalRocksDb(dbDir, settings.tuning, settings.maxPendingBytes, settings.maxPendingBytesKey)
    try open()
    catch {
      case scala.util.control.NonFatal(_) if dbDir.exists() =>
        cleanClose = None
        deleteRecursively(dbDir)
        open()
    }
  }
  val columnFamilies = new ColumnFamilies(db)
  val counters = new StoreCounters

  // what the local DB holds: checkpoint, its ancestors back to the presumed snapshot, and that snapshot's version
  private var loaded: Option[CheckpointId] = None
  private var ancestors: Seq[CheckpointId] = Nil
  private var presumedSnapshotVersion = 0L
  // with `loaded` the empty state: the version it stands at (0, or the version given to loadEmpty)
  private var emptyAtVersion = 0L
  private var generation = new Generation(mutable.Map.empty)

  private val frozen = new ConcurrentLinkedQueue[Frozen]()
  // uploads hold it shared; clean-up deletes blobs only if it gets it exclusively (see cleanup)
  private val uploadsVsBlobDeletion = new java.util.concurrent.locks.ReentrantReadWriteLock()
  @volatile private var lastUploaded: Option[SnapshotIndex] = None
  val pendingBlobs = new PendingBlobs
  private val cleanups = new LineageCleanup(files, settings, crash, clock, pendingBlobs)

  // resume from the record when the DB holds exactly the SSTs it lists
  cleanClose.filter(_.liveSsts == db.liveSstSizes).foreach { r =>
    loaded = Some(r.loaded)
    ancestors = r.ancestors
    presumedSnapshotVersion = r.presumedSnapshotVersion
    generation = new Generation(mutable.Map.empty ++= r.hashes)
    columnFamilies.reload()
  }
  cleanClose = None

  def loadedCheckpoint: Option[CheckpointId] = loaded
  def checkpointFiles: CheckpointFiles = files

  // ---- load -----------------------------------------------------------------------------------------------

  /** Makes the local DB hold `target`, loading as little as the lineage allows. */
  def load(target: CheckpointId): LoadPlan = {
    val start = clock()
    db.abort()
    emptyAtVersion = 0
    val plan = LineageResolver.plan(target, loaded, files)
    try execute(plan)
    catch {
      case t: Throwable =>
        loaded =
          None // local directory state unknown: the next load starts from a snapshot or the empty state
        throw t
    }
    cleanups.loaded(target, plan)
    counters.lastLoadMs.set(clock() - start)
    plan
  }

  /** Makes the local DB hold the empty state standing at `version` (Spark's `loadEmpty`: offline
    * repartitioning rewrites a store from scratch). The next commit is checkpoint `version + 1`; its delta
    * holds the whole state and starts from the empty state, so no load of it or of its descendants ever reads
    * a file of an older version. Reads nothing from the blob store.
    */
  def loadEmpty(version: Long): Unit = {
    require(version >= 0, s"version cannot be negative, got $version")
    val start = clock()
    db.abort()
    try
      replaceLocalDirectory { () =>
        deleteRecursively(dbDir)
        generation = new Generation(mutable.Map.empty)
      }
    catch { case t: Throwable => loaded = None; throw t }
    presumedSnapshotVersion = version
    ancestors = Nil
    emptyAtVersion = version
    loaded = Some(CheckpointId.Empty)
    columnFamilies.reload()
    // what was committed before is another lineage now: clean-up waits for the next load to learn the new one
    cleanups.forgetCommitted()
    counters.lastLoadMs.set(clock() - start)
  }

  /** The version the loaded state stands at (the empty state may stand above 0, see [[loadEmpty]]). */
  def loadedVersion: Option[Long] = loaded.map(l => if (l.isEmptyState) emptyAtVersion else l.version)

  private def execute(plan: LoadPlan): Unit = {
    plan.base match {
      case LoadBase.Local(l) =>
        // ancestors of l back to its presumed snapshot stay valid below the newly replayed part
        if (plan.deltas.nonEmpty) ancestors = plan.lineage ++ (if (loaded.contains(l)) ancestors else Nil)
      case LoadBase.Empty =>
        replaceLocalDirectory { () =>
          deleteRecursively(dbDir)
          generation = new Generation(mutable.Map.empty)
        }
        presumedSnapshotVersion = 0
        ancestors = plan.lineage
      case LoadBase.Snapshot(s) =>
        replaceLocalDirectory { () =>
          val hashes = mutable.Map.empty[String, (Long, String)] ++= generation.hashes
          val (index, stats) = files.restoreSnapshot(s, dbDir, hashes)
          generation = new Generation(hashes)
          lastUploaded = Some(index)
          cleanups.indexKnown(s, index)
          counters.filesDownloaded.addAndGet(stats.filesMoved)
          counters.bytesDownloaded.addAndGet(stats.bytesMoved)
          counters.filesReused.addAndGet(stats.filesReused)
          crash.at(CrashPoints.RestoreAfterSnapshotFiles)
        }
        presumedSnapshotVersion = s.version
        ancestors = plan.lineage.takeWhile(_.version >= s.version)
    }
    plan.deltas.foreach(replay)
    if (plan.deltas.nonEmpty) crash.at(CrashPoints.RestoreAfterReplay)
    loaded = Some(plan.target)
    if (plan.deltas.nonEmpty && plan.base.isInstanceOf[LoadBase.Local]) {
      ancestors = ancestors.takeWhile(_.version >= presumedSnapshotVersion)
    }
    columnFamilies.reload()
  }

  private def replaceLocalDirectory(body: () => Unit): Unit = {
    loaded = None
    db.closeForReplace()
    try body()
    finally db.reopen()
  }

  /** Replays one verified delta into the local DB in a single atomic write. */
  private def replay(id: CheckpointId): Unit = {
    val batch = new WriteBatch()
    try {
      files.readDelta(id) { (k, v) => if (v == null) batch.delete(k) else batch.put(k, v) }
      db.applyCommitted(batch)
    } finally batch.close()
    counters.deltasReplayed.incrementAndGet()
  }

  /** The committed changes of versions `fromVersion` .. target.version, oldest first, each delta verified
    * before any of its records is returned. Family ids are in the keys (see [[ColumnFamilies]]).
    */
  def changes(target: CheckpointId, fromVersion: Long): Iterator[(CheckpointId, Array[Byte], Array[Byte])] =
    LineageResolver.chain(target, fromVersion, files).iterator.flatMap { id =>
      val records = mutable.ArrayBuffer.empty[(CheckpointId, Array[Byte], Array[Byte])]
      files.readDelta(id)((k, v) => records += ((id, k, v)))
      records
    }

  // ---- reads and writes of the batch in progress ----------------------------------------------------------

  def get(cf: Int, key: Array[Byte]): Array[Byte] = db.get(ColumnFamilies.fullKey(cf, key))

  def put(cf: Int, key: Array[Byte], value: Array[Byte]): Unit = {
    val full = ColumnFamilies.fullKey(cf, key)
    if (db.get(full) == null) columnFamilies.adjustCount(cf, 1)
    db.put(full, value)
  }

  def delete(cf: Int, key: Array[Byte]): Unit = {
    val full = ColumnFamilies.fullKey(cf, key)
    if (db.get(full) != null) {
      columnFamilies.adjustCount(cf, -1)
      db.delete(full)
    }
  }

  /** Keys of family `cf` in [from, until) (user keys; until null = to the family's end). */
  def scan(cf: Int, from: Array[Byte], until: Array[Byte]): CloseableIterator[(Array[Byte], Array[Byte])] = {
    val inner = db.scan(
      ColumnFamilies.fullKey(cf, from),
      if (until == null) ColumnFamilies.prefix(cf + 1) else ColumnFamilies.fullKey(cf, until)
    )
    new CloseableIterator[(Array[Byte], Array[Byte])] {
      override def hasNext: Boolean = inner.hasNext
      override def next(): (Array[Byte], Array[Byte]) = {
        val (k, v) = inner.next(); (ColumnFamilies.userKey(k), v)
      }
      override def close(): Unit = inner.close()
    }
  }

  def pendingBytes: Long = db.pending.sizeBytes

  // ---- commit and abort -----------------------------------------------------------------------------------

  /** Commits the batch in progress as checkpoint (loaded + 1, uniqueId): writes its delta (lineage first),
    * then applies it locally. Freezes a snapshot when enough deltas accumulated since the presumed one.
    */
  def commit(uniqueId: String): CheckpointId = {
    val start = clock()
    val parent = loaded.getOrElse(throw new IllegalStateException("commit without a loaded checkpoint"))
    val freshStart = parent.isEmptyState && emptyAtVersion > 0
    val id = CheckpointId(loadedVersion.get + 1, uniqueId)
    val lineage = if (parent.isEmptyState) Nil else parent +: ancestors
    columnFamilies.stageCounts()
    crash.at(CrashPoints.CommitBeforeDelta)
    // from the empty state the batch in progress is the whole state, so the delta is complete by itself
    val records = files.writeDelta(id, lineage, settings.deltaCodec, fromEmpty = freshStart) { w =>
      db.pending.range(Array.emptyByteArray, null).foreach { case (k, v) =>
        if (v == null) w.delete(k) else w.put(k, v)
      }
    }
    crash.at(CrashPoints.CommitAfterDelta)
    counters.lastDeltaBytes.set(db.pending.sizeBytes)
    db.commit()
    crash.at(CrashPoints.CommitAfterLocalApply)
    loaded = Some(id)
    emptyAtVersion = 0
    ancestors = lineage
    val sinceSnapshot = id.version - presumedSnapshotVersion
    // a fresh start is snapshotted at once: its lineage has no older snapshot to restore from
    if (freshStart || sinceSnapshot >= settings.minDeltasForSnapshot) freeze(id)
    // the next commit freezes: flush now, off the commit path, so that freeze waits for one batch's memtable
    else if (settings.flushAheadOfFreeze && sinceSnapshot + 1 >= settings.minDeltasForSnapshot)
      db.flushInBackground()
    counters.lastCommitMs.set(clock() - start)
    cleanups.fileWritten(CheckpointFile(id, CheckpointId.Delta))
    require(records >= 0)
    id
  }

  def abort(): Unit = {
    db.abort()
    columnFamilies.discardCounts()
    columnFamilies.reload()
  }

  /** The synchronous part of a snapshot: a hard-link checkpoint of the committed state, uploaded later. */
  private def freeze(id: CheckpointId): Unit = {
    val dir = new File(frozenRoot, id.toString)
    deleteRecursively(dir)
    dir.getParentFile.mkdirs()
    db.checkpointTo(dir)
    frozen.add(Frozen(id, ancestors, dir, generation))
    presumedSnapshotVersion = id.version
    ancestors = Nil
    crash.at(CrashPoints.SnapshotAfterFreeze)
  }

  /** Forces a snapshot of the loaded checkpoint at the next upload (tools and tests). */
  def freezeNow(): Unit = loaded.filterNot(_.isEmptyState).foreach(freeze)

  // ---- maintenance ----------------------------------------------------------------------------------------

  /** Uploads every frozen checkpoint, oldest first; each diffed against the last completed upload. */
  def uploadSnapshots(): Int = {
    uploadsVsBlobDeletion.readLock().lock()
    try uploadFrozen()
    finally uploadsVsBlobDeletion.readLock().unlock()
  }

  private def uploadFrozen(): Int = {
    var n = 0
    var next = frozen.peek()
    while (next != null) {
      val start = clock()
      if (!files.hasSnapshot(next.id)) {
        val (index, stats) =
          files.uploadSnapshot(
            next.id,
            next.ancestors,
            next.dir,
            lastUploaded.orElse(presumedBase(next)),
            next.gen.hashes,
            pendingBlobs.written,
            () => crash.at(CrashPoints.SnapshotAfterBlobs)
          )
        pendingBlobs.referenced(index.sharedBlobs)
        crash.at(CrashPoints.SnapshotAfterZip)
        lastUploaded = Some(index)
        cleanups.indexKnown(next.id, index)
        counters.filesUploaded.addAndGet(stats.filesMoved)
        counters.bytesUploaded.addAndGet(stats.bytesMoved)
        counters.filesReused.addAndGet(stats.filesReused)
        counters.bytesReused.addAndGet(stats.bytesReused)
        counters.snapshotsUploaded.incrementAndGet()
        n += 1
      }
      cleanups.fileWritten(CheckpointFile(next.id, CheckpointId.Snapshot))
      frozen.poll()
      deleteRecursively(next.dir)
      counters.lastSnapshotUploadMs.set(clock() - start)
      next = frozen.peek()
    }
    n
  }

  /** A store that resumed from a clean close has uploaded nothing yet: diff against the snapshot the frozen
    * checkpoint's lineage presumes (the oldest ancestor), if it exists; one small read.
    */
  private def presumedBase(f: Frozen): Option[SnapshotIndex] =
    f.ancestors.lastOption.filter(a => !a.isEmptyState && files.hasSnapshot(a)).flatMap(cleanups.readIndex)

  def frozenCount: Int = frozen.size

  /** Version of the last snapshot this store uploaded or restored. */
  def lastUploadedVersion: Option[Long] = lastUploaded.map(_.checkpoint.version)

  /** Deletes what the committed lineage no longer needs (see [[LineageCleanup.run]]). Returns the paths
    * deleted.
    */
  def cleanup(): Seq[String] = {
    // Blobs are deleted only while no snapshot upload of this store is in flight: an upload's new blobs are
    // referenced by no zip until it finishes, and the sweep must not take them for crash leftovers however
    // short the grace period (seen in the soak with a 3 s grace). Other processes rely on the grace period.
    val uploadsPaused = uploadsVsBlobDeletion.writeLock().tryLock()
    val deleted =
      try cleanups.run(mayDeleteBlobs = uploadsPaused)
      finally if (uploadsPaused) uploadsVsBlobDeletion.writeLock().unlock()
    counters.filesDeleted.addAndGet(deleted.size)
    deleted
  }

  // ---- metrics and life cycle -----------------------------------------------------------------------------

  def approximateMemoryBytes: Long = db.approximateMemoryBytes
  def localFileNames: Seq[String] = db.liveFileNames

  /** Closes RocksDB. With a checkpoint loaded, flushes it first and leaves a [[CleanCloseRecord]], so a later
    * store on the same directory resumes without downloading.
    */
  override def close(): Unit = {
    val record = loaded.filterNot(_.isEmptyState).flatMap { id =>
      scala.util.Try {
        db.abort()
        db.flush()
        CleanCloseRecord(
          files.store,
          id,
          presumedSnapshotVersion,
          ancestors,
          db.liveSstSizes,
          generation.hashes.toMap
        )
      }.toOption
    }
    loaded = None
    db.close()
    deleteRecursively(frozenRoot)
    record.foreach(CleanCloseRecord.write(localRoot, _))
  }

  private[store] def frozenIds: Seq[CheckpointId] = frozen.asScala.map(_.id).toSeq
}

private[store] object LineageStore {
  private def deleteRecursively(f: File): Unit = LocalDirectories.deleteRecursively(f)

  /** Hashes of files in the local DB directory, valid until the directory is replaced by a restore. */
  private[store] final class Generation(val hashes: mutable.Map[String, (Long, String)])
  private[store] final case class Frozen(
      id: CheckpointId,
      ancestors: Seq[CheckpointId],
      dir: File,
      gen: Generation
  )
}

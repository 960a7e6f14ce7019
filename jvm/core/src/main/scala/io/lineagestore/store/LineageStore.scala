package io.lineagestore.store

import java.io.File
import java.util.concurrent.atomic.AtomicReference

import io.lineagestore.engine.{CloseableIterator, LocalRocksDb}
import io.lineagestore.format.{CorruptCheckpointFileException, DeltaRecordKind, FamilyKeys, SnapshotIndex}
import io.lineagestore.storage.BlobNotFoundException
import io.lineagestore.lineage._

/** One store's state: a local RocksDB ([[LocalRocksDb]]) and its unforkable lineage of checkpoints in a blob
  * store ([[CheckpointFiles]]). This class sequences load, commit, snapshot and clean-up; what to load,
  * upload and delete is decided by the pure planners.
  *
  * Threads: one task at a time calls load/read/write/commit/abort and close (Spark's contract, enforced by
  * the provider's `StoreOwnership`); Spark's maintenance thread calls [[uploadSnapshots]] and [[cleanup]]
  * concurrently, and the transfer pool runs their file transfers. What the local DB holds is one immutable
  * [[LineageStore.LocalState]], written by the task thread only and replaced atomically, so any thread reads
  * a consistent one. Shared with maintenance and transfers: [[SnapshotUploads]] (the frozen checkpoints and
  * their upload; it says how it is shared), each generation's [[HashCache]] (concurrent), [[PendingBlobs]]
  * and [[LineageCleanup]] (each guarded). The local RocksDB's in-flight batch is the task thread's alone
  * ([[LocalRocksDb]]).
  *
  * Readers sharing one store (the executor's tasks reading an adjunct table's replica) read through a
  * [[CommittedView]] ([[committedView]]), which any number of threads may read at once: never through [[get]]
  * or [[scan]], which read the batch in progress and, for [[get]], remember the read in it for the batch's
  * writes (the task thread's alone). A view is read only while this store neither loads, commits nor closes
  * (the caller's lock keeps them apart; the view fails if used after one).
  */
final class LineageStore(
    files: CheckpointFiles,
    localRoot: File,
    settings: StoreSettings,
    crash: CrashPoints = CrashPoints.None,
    clock: () => Long = () => System.currentTimeMillis(),
    applyPool: java.util.concurrent.Executor = io.lineagestore.engine.SharedApplyPool.pool,
    snapshotPartition: Option[Int] = None
) extends AutoCloseable {

  import LineageStore._
  import LineageStoreState._

  private val dbDir = new File(localRoot, "db")
  // A reused local directory (see LocalDirectories) may hold an earlier provider's RocksDB and frozen
  // checkpoints. The frozen ones were never registered here (deleted before any is made, below); the DB is
  // only a source of files that the first load keeps if their content matches, and is discarded if it does
  // not even open (a crash mid-write). A record of a clean close is taken (and deleted) before the directory
  // is touched.
  private var cleanClose = CleanCloseRecord.take(localRoot, files.store)
  private val db = {
    def open() =
      new LocalRocksDb(
        dbDir,
        settings.tuning,
        settings.maxPendingBytes,
        settings.maxPendingBytesKey,
        applyPool,
        () => deltas.openLog(nextCheckpoint())
      )
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
  private val deltas = new BatchDeltas(files, settings.deltaCodec, counters)

  // what the local DB holds; nothing until the first load (or a clean-close record)
  private val local = new AtomicReference(LocalState.Unknown(new HashCache))

  // the checkpoint the batch in progress commits as, once drawn (null: not yet); task thread only
  private var next: NextCheckpoint = null

  // the versions this store freezes at within each snapshot interval (its partition's: SnapshotSchedule);
  // `snapshotPartition` names the partition when the identity does not (an adjunct table keeps each of its
  // partitions' stores under partition 0's identity, written in every file header)
  private val snapshotPhase =
    SnapshotSchedule.phase(
      snapshotPartition.getOrElse(files.store.partitionId),
      settings.minDeltasForSnapshot
    )

  val pendingBlobs = new PendingBlobs
  private val cleanups = new LineageCleanup(files, settings, crash, clock, pendingBlobs)
  private val uploads =
    new SnapshotUploads(files, new File(localRoot, "frozen"), crash, clock, counters, cleanups, pendingBlobs)
  uploads.deleteFrozenDirs()

  // resume from the record when the DB holds exactly the SSTs it lists
  cleanClose.filter(_.liveSsts == db.liveSstSizes).foreach { r =>
    local.set(
      LocalState(
        Some(r.loaded),
        r.ancestors,
        r.presumedSnapshotVersion,
        0,
        HashCache.of(r.hashes),
        r.uploadedSnapshotVersion
      )
    )
    columnFamilies.reload()
  }
  cleanClose = None

  def loadedCheckpoint: Option[CheckpointId] = local.get.loaded
  def checkpointFiles: CheckpointFiles = files

  // ---- load -----------------------------------------------------------------------------------------------

  /** Makes the local DB hold `target`, loading as little as the lineage allows. A chosen file found gone
    * (clean-up raced the plan) or a damaged snapshot is planned around as [[LoadRoutes]] says; each detour is
    * recorded in `lastDetours` (the provider logs it). Only when no route is left does the load fail, naming
    * the damaged file.
    */
  def load(target: CheckpointId): LoadPlan = {
    val start = clock()
    // a committed batch that never reached RocksDB leaves the local state behind its commit: reload it
    db.applyFailed().foreach(_ => local.set(LocalState.Unknown(new HashCache)))
    db.abort()
    next = null
    cleanups.writingDelta(None) // the abort gave the batch's delta up
    // after a failed attempt what the directory holds is unknown: the next starts from a snapshot or empty
    val routed = LoadRoutes.load(target, counters, () => local.set(LocalState.Unknown(new HashCache))) {
      unusable =>
        val plan = LineageResolver.plan(target, local.get.loaded, files, unusable)
        execute(plan)
        plan
    }
    lastDetours = routed.detours
    cleanups.loaded(target, routed.plan)
    counters.lastLoadMs.set(clock() - start)
    routed.plan
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
    next = null
    cleanups.writingDelta(None)
    replaceLocalDirectory()(() => deleteRecursively(dbDir))
    local.set(LocalState(Some(CheckpointId.Empty), Nil, version, version, new HashCache, version))
    columnFamilies.reload()
    // what was committed before is another lineage now: clean-up waits for the next load to learn the new one
    cleanups.forgetCommitted()
    counters.lastLoadMs.set(clock() - start)
  }

  /** The snapshots the last load routed around, with the file and why (empty: none). */
  @volatile var lastDetours: Seq[String] = Nil

  /** The version the loaded state stands at (the empty state may stand above 0, see [[loadEmpty]]). */
  def loadedVersion: Option[Long] = local.get.version

  private def execute(plan: LoadPlan): Unit = {
    val before = local.get
    // the state the DB holds once the plan's base is in place, before its deltas are replayed
    val base = plan.base match {
      case LoadBase.Local(l) =>
        // ancestors of l back to its presumed snapshot stay valid below the newly replayed part
        val below = if (before.loaded.contains(l)) before.ancestors else Nil
        val ancestors = plan.lineage ++ below
        before.copy(ancestors = ancestors.takeWhile(_.version >= before.presumedSnapshotVersion))
      case LoadBase.Empty =>
        replaceLocalDirectory()(() => deleteRecursively(dbDir))
        LocalState(None, plan.lineage, 0, 0, new HashCache, 0)
      case LoadBase.Snapshot(s) =>
        val hashes = before.hashes.copy()
        val zip = files.blobs.locate(s.snapshotFileName)
        // what a snapshot restored becomes is its own: RocksDB refusing it is damage of that snapshot
        val unopenable = (e: Throwable) =>
          DamagedSnapshot(
            s,
            new CorruptCheckpointFileException(
              zip,
              s"RocksDB cannot open the directory restored from it (${e.getMessage})",
              e
            )
          )
        val (index, stats) = replaceLocalDirectory(unopenable) { () =>
          val restored =
            try files.restoreSnapshot(s, dbDir, hashes)
            catch { case e: Throwable => throw DamagedSnapshot.of(s, e, zip) }
          crash.at(CrashPoints.RestoreAfterSnapshotFiles)
          restored
        }
        uploads.lastUploaded = Some(index)
        cleanups.indexKnown(s, index)
        counters.filesDownloaded.addAndGet(stats.filesMoved)
        counters.bytesDownloaded.addAndGet(stats.bytesMoved)
        counters.filesReused.addAndGet(stats.filesReused)
        LocalState(None, plan.lineage.takeWhile(_.version >= s.version), s.version, 0, hashes, s.version)
    }
    plan.deltas.foreach(replay)
    if (plan.deltas.nonEmpty) crash.at(CrashPoints.RestoreAfterReplay)
    local.set(base.copy(loaded = Some(plan.target), emptyAtVersion = 0))
    columnFamilies.reload()
  }

  /** Closes RocksDB around `body`, which replaces the directory's files; what the DB holds is unknown until
    * the caller sets it. RocksDB is open again however `body` ends: on a directory `body` left half replaced
    * that RocksDB cannot open, on an empty one (nothing of it is trusted, and the body's failure is the one
    * to report, not RocksDB's at its leftovers). When RocksDB cannot open what a successful `body` built, the
    * directory is emptied too and the failure is reported as `unopenable` makes it.
    */
  private def replaceLocalDirectory[T](unopenable: Throwable => Throwable = identity[Throwable])(
      body: () => T
  ): T = {
    // a new generation of the directory: nothing of the old one's hashes holds once a file may have changed
    local.set(LocalState.Unknown(new HashCache))
    db.closeForReplace()
    val result =
      try body()
      catch { case t: Throwable => reopenOrEmpty(t); throw t }
    try db.reopen()
    catch {
      case scala.util.control.NonFatal(e) =>
        val failure = unopenable(e)
        reopenOrEmpty(failure)
        throw failure
    }
    result
  }

  /** Opens RocksDB on the directory, or, if it cannot be opened, on an empty one (noting why in `failure`).
    */
  private def reopenOrEmpty(failure: Throwable): Unit =
    try db.reopen()
    catch {
      case scala.util.control.NonFatal(e) =>
        failure.addSuppressed(e)
        deleteRecursively(dbDir)
        db.reopen()
    }

  /** Replays one verified delta into the local DB (in chunks: a failure midway fails the load, which then
    * leaves the local state unknown).
    */
  private def replay(id: CheckpointId): Unit = {
    db.applyCommitted(records => DeltaRecords.replay(files, id, db.getCommitted, records))
    counters.deltasReplayed.incrementAndGet()
  }

  /** The committed changes to family `cf` in versions `fromVersion` .. target.version, oldest first, as
    * (checkpoint, record kind, user key, value: null for a delete, the appended elements for a merge); each
    * delta is verified before any of its records is returned.
    */
  def changes(
      target: CheckpointId,
      fromVersion: Long,
      cf: Int
  ): Iterator[(CheckpointId, DeltaRecordKind, Array[Byte], Array[Byte])] =
    LineageResolver.chain(target, fromVersion, files).iterator.flatMap(DeltaRecords.ofFamily(files, _, cf))

  // ---- reads and writes of the batch in progress ----------------------------------------------------------

  /** The key's value, the batch in progress included; remembered for the batch's writes (its existence check
    * then needs no lookup: [[LocalRocksDb.get]]), so the owning task's thread only. Threads sharing reads use
    * a [[committedView]].
    */
  def get(cf: Int, key: Array[Byte]): Array[Byte] = db.get(FamilyKeys.fullKey(cf, key))

  /** `everyChange` (multi-valued families): the delta records this change beside the key's earlier ones in
    * the batch, as Spark's change feed reports each change of a list; otherwise only the key's net change.
    */
  def put(cf: Int, key: Array[Byte], value: Array[Byte], everyChange: Boolean = false): Unit = {
    val full = FamilyKeys.fullKey(cf, key)
    if (!db.exists(full)) columnFamilies.adjustCount(cf, 1)
    db.put(full, value, everyChange)
  }

  /** Appends `elements` (encoded values joined by `,`) to the key's value; the delta records only them. */
  def merge(cf: Int, key: Array[Byte], elements: Array[Byte]): Unit = {
    val full = FamilyKeys.fullKey(cf, key)
    if (!db.exists(full)) columnFamilies.adjustCount(cf, 1)
    db.merge(full, elements)
  }

  /** With `everyChange` the delete is recorded even for a key without a value (as Spark's changelog does). */
  def delete(cf: Int, key: Array[Byte], everyChange: Boolean = false): Unit = {
    val full = FamilyKeys.fullKey(cf, key)
    val exists = db.exists(full)
    if (exists) columnFamilies.adjustCount(cf, -1)
    if (exists || everyChange) db.delete(full, everyChange)
  }

  /** Keys of family `cf` in [from, until) (user keys; until null = to the family's end). */
  def scan(cf: Int, from: Array[Byte], until: Array[Byte]): CloseableIterator[(Array[Byte], Array[Byte])] =
    scanFamily(cf, from, until)(db.scan)

  /** Compacts the loaded state into one sorted level if a store that is only read gains by it
    * ([[io.lineagestore.engine.ReadCompaction]]); returns whether it did. For a store no batch is written to
    * (an adjunct replica, after a load), called with nothing else using it.
    */
  def compactForReads(): Boolean = db.compactForReads()

  /** A read-only view of the checkpoint now loaded, for threads that share this store's reads (see
    * [[CommittedView]]). Taken by the thread that loaded, with nothing else using the store; waits for the
    * last commit's batch to be in RocksDB first.
    */
  def committedView(): CommittedView = {
    db.awaitApplied()
    val at = local.get
    if (at.loaded.isEmpty)
      throw new IllegalStateException(
        s"the store at ${files.blobs.locate("")} has no checkpoint loaded (its last load failed, or none ran): " +
          "load one before taking a view of its committed state"
      )
    new CommittedView(db, at, () => local.get)
  }

  def pendingBytes: Long = db.pending.sizeBytes

  /** Runs the batch in progress spilled to local disk (past `maxPendingBytes`). */
  def pendingSpilledRuns: Int = db.pending.spilledRuns

  // ---- commit and abort -----------------------------------------------------------------------------------

  /** The checkpoint the batch in progress commits as: version loaded + 1 under a fresh unique ID, drawn once
    * per batch (at its first change, when its delta starts, or at its commit; null while nothing is loaded).
    */
  private def nextCheckpoint(): NextCheckpoint = {
    if (next == null) {
      val now = local.get
      now.loaded.foreach { parent =>
        next = NextCheckpoint(
          CheckpointId(now.version.get + 1, CheckpointId.newUniqueId()),
          if (parent.isEmptyState) Nil else parent +: now.ancestors,
          // from the empty state the batch in progress is the whole state, so the delta is complete by itself
          fromEmpty = parent.isEmptyState && now.emptyAtVersion > 0
        )
        // before the delta's temporary exists: clean-up must never take it for an abandoned write
        cleanups.writingDelta(Some(next.id))
      }
    }
    next
  }

  /** Commits the batch in progress as checkpoint (loaded + 1, a fresh unique ID): ends its delta (lineage
    * first; written while the batch ran when it could be, see [[BatchDeltas]]), then applies it locally.
    * Freezes a snapshot where [[SnapshotSchedule]] says (its partition's phase of the snapshot interval, a
    * fresh start, a lag).
    */
  def commit(): CheckpointId = commitAs(None)

  /** [[commit]] under a unique ID the caller chose (tools and tests that write a commit log of their own).
    * The delta then is not the one written while the batch ran, under the ID drawn for it: the commit writes
    * the whole delta.
    */
  def commit(uniqueId: String): CheckpointId = commitAs(Some(uniqueId))

  private def commitAs(uniqueId: Option[String]): CheckpointId = {
    val start = clock()
    val before = local.get
    if (before.loaded.isEmpty) throw new IllegalStateException("commit without a loaded checkpoint")
    columnFamilies.stageCounts()
    val drawn = nextCheckpoint()
    next = null
    val batch = uniqueId.fold(drawn)(u => drawn.copy(id = CheckpointId(drawn.id.version, u)))
    val NextCheckpoint(id, lineage, freshStart) = batch
    crash.at(CrashPoints.CommitBeforeDelta)
    val deltaStart = clock()
    cleanups.writingDelta(Some(id)) // the ID the delta is written under (the caller's, if it chose one)
    try deltas.write(db.pending, batch)
    finally cleanups.writingDelta(None)
    counters.lastCommitDeltaMs.set(clock() - deltaStart)
    crash.at(CrashPoints.CommitAfterDelta)
    counters.lastDeltaBytes.set(db.pending.sizeBytes)
    counters.lastSpilledBytes.set(db.pending.spilledBytes)
    val committed = before.copy(
      loaded = Some(id),
      ancestors = lineage,
      emptyAtVersion = 0,
      uploadedSnapshotVersion = uploads.uploadedOn(lineage, before.uploadedSnapshotVersion)
    )
    val lagging = id.version - committed.uploadedSnapshotVersion > settings.maxSnapshotLagDeltas
    val freezing = SnapshotSchedule.freezes(
      id.version,
      committed.presumedSnapshotVersion,
      freshStart,
      lagging,
      snapshotPhase,
      settings.minDeltasForSnapshot
    )
    // The delta is durable: the commit stands. Writing it into RocksDB (a fifth of a commit at 100k keys)
    // then runs on an apply thread while the task goes on, reads looking through it (LocalRocksDb); so does
    // a freeze's checkpoint (flush + hard links: most of a freezing commit at 1M keys), which an upload
    // waits for and the next commit's write follows. (A flush one commit ahead of the freeze, made when the
    // freeze ran on the task thread, is gone: off that thread it only added an SST per snapshot interval,
    // a near-complete copy of the store where every key changes every batch, docs/benchmarks.md.)
    val handOffStart = clock()
    val checkpointed =
      if (freezing) Some(db.commitAndCheckpointInBackground(uploads.emptyFrozenDir(id)))
      else { db.commitInBackground(); None }
    counters.lastCommitApplyWaitMs.set(clock() - handOffStart)
    crash.at(CrashPoints.CommitAfterLocalApply)
    local.set(committed)
    checkpointed.foreach(frozen(committed, _))
    if (lagging && uploads.catchUp(id)) {
      val now = local.get
      if (now.loaded.contains(id)) local.set(now.copy(uploadedSnapshotVersion = id.version))
    }
    counters.lastCommitMs.set(clock() - start)
    cleanups.fileWritten(CheckpointFile(id, CheckpointId.Delta))
    id
  }

  /** Why the last catch-up upload failed, if one did since the last call (logged by the provider). */
  def takeCatchUpFailure(): Option[Throwable] = uploads.takeCatchUpFailure()

  /** Deltas the loaded checkpoint stands past the newest snapshot known uploaded on its lineage (0 when
    * nothing is loaded): what a cold restore replays at most.
    */
  def snapshotLag: Long = uploads.lag(local.get)

  def abort(): Unit = {
    db.abort()
    next = null
    cleanups.writingDelta(None)
    columnFamilies.discardCounts()
    columnFamilies.reload()
  }

  /** Queues the hard-link checkpoint of the committed state `at`, complete once `checkpointed` is, for
    * upload; the lineage then presumes its snapshot.
    */
  private def frozen(at: LocalState, checkpointed: java.util.concurrent.Future[Unit]): Unit = {
    val id = at.loaded.get
    uploads.add(Frozen(id, at.ancestors, uploads.frozenDir(id), at.hashes, checkpointed))
    local.set(at.copy(ancestors = Nil, presumedSnapshotVersion = id.version))
    crash.at(CrashPoints.SnapshotAfterFreeze)
  }

  /** Forces a snapshot of the loaded checkpoint at the next upload (tools and tests). */
  def freezeNow(): Unit = {
    val now = local.get
    // a commit that froze it already (its checkpoint may still be in the making) leaves nothing to do
    now.loaded.filterNot(id => id.isEmptyState || uploads.frozenIds.contains(id)).foreach { id =>
      db.checkpointTo(uploads.emptyFrozenDir(id))
      frozen(now, java.util.concurrent.CompletableFuture.completedFuture(()))
    }
  }

  /** Why the last freeze of a commit failed, if one did since the last call (see [[SnapshotUploads]]). */
  def takeFreezeFailure(): Option[Throwable] = uploads.takeFreezeFailure()

  // ---- maintenance ----------------------------------------------------------------------------------------

  /** Uploads every frozen checkpoint, oldest first; each diffed against the last completed upload (one
    * uploader at a time: maintenance, a commit's catch-up and a close may all try).
    */
  def uploadSnapshots(): Int = uploads.upload()

  def frozenCount: Int = uploads.frozenCount

  /** Uploads the frozen snapshots before the store closes, waiting at most `timeoutMs` (0: not at all), so a
    * store that closes (query stop, unload, executor shutdown) loses no snapshot it froze. Past the bound the
    * upload is abandoned where it is (the thread is interrupted; its blobs are pending, swept later) and the
    * close goes on: nothing committed is lost, the deltas hold it, and the lineage's next commits catch up
    * (see [[SnapshotUploads.catchUp]]). Returns the checkpoints still frozen, i.e. not uploaded.
    */
  def uploadBeforeClose(timeoutMs: Long): Seq[CheckpointId] = uploads.beforeClose(timeoutMs)

  /** Version of the last snapshot this store uploaded or restored. */
  def lastUploadedVersion: Option[Long] = uploads.lastUploaded.map(_.checkpoint.version)

  /** Deletes what the committed lineage no longer needs (see [[LineageCleanup.run]]). Returns the paths
    * deleted.
    */
  def cleanup(): Seq[String] = {
    // Blobs are deleted only while no snapshot upload of this store is in flight: an upload's new blobs are
    // referenced by no zip until it finishes, and the sweep must not take them for crash leftovers however
    // short the grace period (seen in the soak with a 3 s grace). Other processes rely on the grace period.
    val deleted = uploads.pausingUploads(paused => cleanups.run(mayDeleteBlobs = paused))
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
    val last = local.get
    val record = last.loaded.filterNot(_.isEmptyState).flatMap { id =>
      scala.util.Try {
        db.abort()
        db.flush()
        CleanCloseRecord(
          files.store,
          id,
          last.presumedSnapshotVersion,
          last.ancestors,
          db.liveSstSizes,
          last.hashes.toMap,
          uploads.uploadedOn(id +: last.ancestors, last.uploadedSnapshotVersion)
        )
      }.toOption
    }
    local.set(LocalState.Unknown(last.hashes))
    db.close()
    uploads.deleteFrozenDirs()
    record.foreach(CleanCloseRecord.write(localRoot, _))
  }

  def frozenIds: Seq[CheckpointId] = uploads.frozenIds

  /** What the current generation's hash cache holds, and the directory it describes (tests). */
  private[store] def knownHashes: (Map[String, (Long, String)], File) = (local.get.hashes.toMap, dbDir)
}

private[store] object LineageStore {
  private def deleteRecursively(f: File): Unit = LocalDirectories.deleteRecursively(f)

  /** The keys of family `cf` in [from, until) (user keys; until null = to the family's end), read by `scan`
    * over full keys.
    */
  def scanFamily(cf: Int, from: Array[Byte], until: Array[Byte])(
      scan: (Array[Byte], Array[Byte]) => CloseableIterator[(Array[Byte], Array[Byte])]
  ): CloseableIterator[(Array[Byte], Array[Byte])] = {
    val inner = scan(
      FamilyKeys.fullKey(cf, from),
      if (until == null) FamilyKeys.prefix(cf + 1) else FamilyKeys.fullKey(cf, until)
    )
    new CloseableIterator[(Array[Byte], Array[Byte])] {
      override def hasNext: Boolean = inner.hasNext
      override def next(): (Array[Byte], Array[Byte]) = {
        val (k, v) = inner.next(); (FamilyKeys.userKey(k), v)
      }
      override def close(): Unit = inner.close()
    }
  }
}

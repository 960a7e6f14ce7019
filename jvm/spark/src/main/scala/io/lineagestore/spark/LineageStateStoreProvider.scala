package io.lineagestore.spark

import java.io.File
import java.util.concurrent.ExecutorService

import scala.collection.concurrent.TrieMap

import org.apache.hadoop.conf.Configuration
import org.apache.spark.internal.Logging
import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.streaming.state.lineagestore.{
  ChangeFeedSupport,
  SnapshotReporting,
  SparkInternals,
  StateEncoders
}
import org.apache.spark.sql.types.StructType

import io.lineagestore.config.{InvalidConfigException, LineageConf}
import io.lineagestore.format.{DeltaRecordKind, StoreIdentity}
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.snapshot.RangedDownload
import io.lineagestore.storage.HadoopBlobStore
import io.lineagestore.store.{
  CheckpointFiles,
  FollowedOperator,
  InjectedFaults,
  LineageStore,
  LocalDeltaCopies,
  LocalDirectories,
  LocalLease,
  SharedTransferPool,
  StoreSettings
}

/** Spark's entry point:
  * `spark.sql.streaming.stateStore.providerClass=io.lineagestore.spark.LineageStateStoreProvider` with
  * `spark.sql.streaming.stateStore.checkpointFormatVersion=2`.
  *
  * One provider per (query run, operator, partition, store name) on an executor. It owns one
  * [[LineageStore]]; Spark's tasks and its maintenance thread call in here.
  */
import LineageStateStoreProvider.OwnershipTimeoutMs

class LineageStateStoreProvider extends StateStoreProvider with ChangeFeedSupport with Logging {
  @volatile private var storeId: StateStoreId = _
  @volatile private var store: LineageStore = _
  private var storeConf: StateStoreConf = _
  private var localRoot: File = _
  private var localLease: LocalLease = _
  private var localDeltas: LocalDeltaCopies = _ // a taken-over standby's deltas (counts what its load read)
  private var transferPool: ExecutorService = _
  private var hadoopConf: Configuration = _
  private var closeUploadTimeoutMs: Long = 0L
  private val encoders = TrieMap.empty[String, StateEncoders]
  @volatile private var schemaProvider: Option[StateSchemaProvider] = None
  private val ownership = new StoreOwnership(() => s"state store $storeId", OwnershipTimeoutMs)

  override def init(
      stateStoreId: StateStoreId,
      keySchema: StructType,
      valueSchema: StructType,
      keyStateEncoderSpec: KeyStateEncoderSpec,
      useColumnFamilies: Boolean,
      storeConfs: StateStoreConf,
      hadoopConf: Configuration,
      useMultipleValuesPerKey: Boolean,
      stateSchemaProvider: Option[StateSchemaProvider]
  ): Unit = {
    if (storeConfs.stateStoreCheckpointFormatVersion != 2) {
      throw new InvalidConfigException(
        "lineagestore needs checkpoint format version 2 (unique-ID lineage), but " +
          s"spark.sql.streaming.stateStore.checkpointFormatVersion is ${storeConfs.stateStoreCheckpointFormatVersion}. " +
          "Set spark.sql.streaming.stateStore.checkpointFormatVersion=2 (lineagestore.configure does it for you)."
      )
    }
    val confs = storeConfs.sqlConfs
    LineageConf.validate(confs)
    this.storeId = stateStoreId
    this.storeConf = storeConfs
    this.hadoopConf = hadoopConf
    this.schemaProvider = stateSchemaProvider
    registerColumnFamily(
      StateStore.DEFAULT_COL_FAMILY_NAME,
      keyStateEncoderSpec,
      valueSchema,
      useMultipleValuesPerKey
    )

    val localDirs = LocalDirectories.configured(confs)
    LineageStateStoreProvider.evictIdleAtMostEveryMinute(localDirs)
    val location = stateStoreId.storeCheckpointLocation().toString
    localLease = localDirs.acquire(location)
    localRoot = localLease.dir
    localDeltas = LocalDeltaCopies.in(localRoot)
    localLease.standby.foreach { taken =>
      logInfo(
        s"lineagestore $storeId starts from a standby copy on this executor (${taken.bytes} bytes, snapshot " +
          s"${taken.reached.getOrElse("incomplete")}, ${taken.deltas} deltas after it); its load checks it " +
          "against the committed checkpoint"
      )
    }
    if (LineageConf.StandbyReplicas.from(confs) != 0) {
      val follower = StandbyFollowers.get(confs, hadoopConf, storeConfs.maintenanceInterval, localDirs)
      val op =
        FollowedOperator(stateStoreId.checkpointRootLocation, stateStoreId.operatorId, stateStoreId.storeName)
      follower.owned(location, op)
      follower.follow(op)
    }
    // one executor-wide pool for every store's transfers (its size is the first store's setting)
    transferPool = SharedTransferPool(LineageConf.TransferThreads.from(confs))
    val blobs = new HadoopBlobStore(
      stateStoreId.storeCheckpointLocation(),
      hadoopConf,
      LineageConf.DeltaUploadPartBytes.from(confs)
    )
    val identity = StoreIdentity(stateStoreId.operatorId, stateStoreId.partitionId, stateStoreId.storeName)
    val settings =
      StoreSettings.from(confs, storeConfs.minDeltasForSnapshot, storeConfs.minVersionsToRetain)
    closeUploadTimeoutMs = LineageConf.CloseUploadTimeoutMs.from(confs)
    try
      store = new LineageStore(
        new CheckpointFiles(
          blobs,
          identity,
          transferPool,
          RangedDownload.withPartBytes(LineageConf.RangedDownloadPartBytes.from(confs)),
          localDeltas = Some(localDeltas) // a taken-over standby's, verified before use
        ),
        localRoot,
        settings,
        crash = InjectedFaults.fromConfs(confs) // test-only; CrashPoints.None unless its confs are set
      )
    catch {
      case t: Throwable =>
        localLease.release()
        throw t
    }
    LineageStateStoreProvider.ShutdownUploads.register(this)
  }

  private[spark] def lineageStore: LineageStore = store

  private[spark] def registerColumnFamily(
      name: String,
      spec: KeyStateEncoderSpec,
      valueSchema: StructType,
      multipleValues: Boolean
  ): Unit = encoders.getOrElseUpdate(
    name, {
      val avro =
        StateEncoders.avroFor(storeConf.stateStoreEncodingFormat, storeId, hadoopConf, name, schemaProvider)
      new StateEncoders(spec, valueSchema, multipleValues, avro)
    }
  )

  private[spark] def encodersFor(name: String): StateEncoders = encoders.getOrElse(
    name,
    throw new IllegalArgumentException(
      s"column family '$name' of $storeId has no registered schema; call createColFamilyIfAbsent or " +
        "registerColFamily first"
    )
  )

  override def stateStoreId: StateStoreId = storeId

  /** `loadEmpty` (Spark 4.3: only `StatePartitionAllColumnFamiliesWriter`, the writer of offline state
    * repartitioning, passes it, with `uniqueId = None`): start from an empty state standing at `version`,
    * reading nothing; the commit then writes checkpoint `version + 1` whose delta holds the whole state and
    * starts from the empty state (its lineage ends there), reports no base checkpoint ID, and freezes a
    * snapshot at once. `forceSnapshotOnCommit` (the state store coordinator's answer to a lagging snapshot
    * upload) freezes a snapshot of the committed version, uploaded by the next maintenance or close.
    */
  override def getStore(
      version: Long,
      uniqueId: Option[String],
      forceSnapshotOnCommit: Boolean,
      loadEmpty: Boolean
  ): StateStore = {
    if (loadEmpty && uniqueId.isDefined) {
      throw new IllegalArgumentException(
        s"$storeId: an empty store at version $version has no checkpoint ID, but ${uniqueId.get} was given"
      )
    }
    open(version, uniqueId, readOnly = false, forceSnapshotOnCommit, loadEmpty)
  }

  override def getReadStore(version: Long, uniqueId: Option[String]): ReadStateStore =
    open(version, uniqueId, readOnly = true, forceSnapshotOnCommit = false)

  /** Takes ownership for the calling task, then loads: a task never sees another task's batch in progress. */
  private def open(
      version: Long,
      uniqueId: Option[String],
      readOnly: Boolean,
      forceSnapshotOnCommit: Boolean,
      loadEmpty: Boolean = false
  ): LineageStateStore = {
    var opened: LineageStateStore = null
    ownership.acquire(() => synchronized(if (opened != null) opened.abort()))
    try
      synchronized {
        if (loadEmpty) {
          store.loadEmpty(version)
          logInfo(s"lineagestore $storeId starts from an empty state at version $version")
        } else load(version, uniqueId)
        opened = new LineageStateStore(this, version, readOnly, forceSnapshotOnCommit)
        opened
      }
    catch {
      case t: Throwable => ownership.release(); throw t
    }
  }

  /** Called by a store when its task is done with it (commit or abort). */
  private[spark] def releaseOwnership(): Unit = ownership.release()

  override def upgradeReadStoreToWriteStore(
      readStore: ReadStateStore,
      version: Long,
      uniqueId: Option[String],
      forceSnapshotOnCommit: Boolean
  ): StateStore = synchronized {
    require(readStore.version == version, s"read store is at version ${readStore.version}, not $version")
    require(
      store.loadedCheckpoint.exists(_.version == version),
      "the read store's version is no longer loaded"
    )
    readStore match {
      case r: LineageStateStore => r.markUpgraded() // its release no longer ends the task's ownership
      case _                    =>
    }
    new LineageStateStore(this, version, readOnly = false, forceSnapshotOnCommit)
  }

  private def load(version: Long, uniqueId: Option[String]): Unit = {
    if (version < 0) throw new IllegalArgumentException(s"version cannot be negative, got $version")
    val target = (version, uniqueId) match {
      case (0, _)        => CheckpointId.Empty
      case (v, Some(id)) => CheckpointId(v, id)
      case (v, None)     => resolveWithoutId(v)
    }
    val plan = store.load(target)
    logInfo(s"lineagestore $storeId loaded $target from ${plan.base} replaying ${plan.deltas.size} deltas")
    store.lastDetours.foreach { d =>
      logWarning(s"lineagestore $storeId: loading $target routed around a damaged snapshot: $d")
    }
  }

  /** After a commit: a lineage past the lag bound made the commit upload its snapshot (see
    * `LineageStore.catchUp`); say so, and why if that failed.
    */
  private[spark] def afterCommit(id: CheckpointId, catchUpsBefore: Long): Unit = {
    val c = store.counters
    if (c.catchUpSnapshots.get > catchUpsBefore) {
      val failure = store.takeCatchUpFailure()
      logWarning(
        s"lineagestore $storeId: the lineage of $id had no uploaded snapshot for more than " +
          s"${LineageConf.MaxSnapshotLagDeltas.key} deltas (maintenance did not upload before the query or " +
          "executor stopped); the commit uploaded one itself" + failure.fold(
            ", lag now " + store.snapshotLag
          )(e => s", which failed ($e); the next commit tries again")
      )
      reportUploads(store)
    }
  }

  /** Without a unique ID (a reader that does not pass one), the version must have exactly one attempt. */
  private def resolveWithoutId(version: Long): CheckpointId = {
    if (store.loadedCheckpoint.exists(_.version == version)) return store.loadedCheckpoint.get
    val candidates =
      store.checkpointFiles.listCheckpointFiles().map(_.id).filter(_.version == version).distinct
    candidates match {
      case Seq(one) => one
      case Seq()    =>
        throw new IllegalStateException(s"no checkpoint of version $version exists for $storeId")
      case many =>
        throw new IllegalStateException(
          s"version $version of $storeId has ${many.size} attempts (${many.map(_.uniqueId).mkString(", ")}) and " +
            "no unique ID was given; read it through the commit log (checkpoint format version 2)"
        )
    }
  }

  override def replayStateFromSnapshot(
      snapshotVersion: Long,
      endVersion: Long,
      readOnly: Boolean,
      snapshotVersionStateStoreCkptId: Option[String],
      endVersionStateStoreCkptId: Option[String]
  ): StateStore = // the lineage of the end version decides which snapshot and deltas rebuild it
    open(endVersion, endVersionStateStoreCkptId, readOnly, forceSnapshotOnCommit = false)

  override protected def changeRecords(
      startVersion: Long,
      endVersion: Long,
      colFamilyNameOpt: Option[String],
      endVersionStateStoreCkptId: Option[String]
  ): Iterator[(DeltaRecordKind, UnsafeRow, UnsafeRow, Long)] = synchronized {
    val cfName = colFamilyNameOpt.getOrElse(StateStore.DEFAULT_COL_FAMILY_NAME)
    load(endVersion, endVersionStateStoreCkptId) // the family registry as of the end version
    val cfId = store.columnFamilies
      .idOf(cfName)
      .getOrElse(
        throw new IllegalArgumentException(
          s"column family '$cfName' does not exist in $storeId at $endVersion"
        )
      )
    val enc = encodersFor(cfName)
    store.changes(store.loadedCheckpoint.get, math.max(1L, startVersion), cfId).flatMap {
      case (id, kind, k, v) =>
        val key = enc.decodeKey(k).copy()
        val batch = id.version - 1
        if (v == null) Iterator.single((kind, key, null, batch))
        else if (!enc.supportsMultipleValues) Iterator.single((kind, key, enc.decodeValue(v).copy(), batch))
        else {
          // as Spark's own reader: a record of a list reports its first value as the record's kind and every
          // further value as an append (a put of [x, y] is an update of x and an append of y)
          enc.decodeValues(v).map(_.copy()).zipWithIndex.map { case (value, i) =>
            (if (i == 0) kind else DeltaRecordKind.Merge, key, value, batch)
          }
        }
    }
  }

  private[spark] def onCommitted(id: CheckpointId): Unit =
    SparkInternals.reportCommit(id.version, storeId, hadoopConf)

  override def doMaintenance(): Unit = {
    doSnapshotMaintenance()
    doCleanupMaintenance()
  }

  override def doSnapshotMaintenance(): Unit = {
    val s = store
    if (s != null) {
      if (s.uploadSnapshots() > 0) reportUploads(s)
      s.takeFreezeFailure().foreach { e =>
        logWarning(
          s"lineagestore $storeId: a commit's snapshot could not be frozen in the local directory ($e); its " +
            s"deltas hold the state, and a later commit freezes one within ${LineageConf.MaxSnapshotLagDeltas.key}"
        )
      }
    }
  }

  // the newest upload told to Spark's state store coordinator (task, maintenance and shutdown threads
  // report; the atomic max keeps a late report of an older upload from being sent)
  private val reportedUpload = new java.util.concurrent.atomic.AtomicLong(-1L)

  /** Tells Spark's state store coordinator of this store's newest snapshot upload, whichever path made it
    * (maintenance, a catch-up commit, close, the shutdown hook): the coordinator's lag detection, which names
    * lagging stores in the driver log, would otherwise count a store whose snapshots all came from a catch-up
    * or a close as never uploading. A report that cannot be sent (the driver gone at exit) is dropped: it is
    * a report, never a reason to fail.
    */
  private def reportUploads(s: LineageStore): Unit = if (storeConf.reportSnapshotUploadLag) {
    s.lastUploadedVersion.foreach { v =>
      if (reportedUpload.getAndAccumulate(v, (a: Long, b: Long) => math.max(a, b)) < v) {
        scala.util.Try(SnapshotReporting.reportUploaded(storeId, hadoopConf, v)).failed.foreach { e =>
          logDebug(s"lineagestore $storeId: could not report the upload of version $v to the coordinator", e)
        }
      }
    }
  }

  override def doCleanupMaintenance(): Unit = if (store != null) store.cleanup()

  /** Uploads the frozen snapshots within `closeUploadTimeoutMs` (close, and the executor's shutdown hook). */
  private[spark] def uploadBeforeClose(): Unit = {
    val s = store
    if (s == null) return
    val left =
      try s.uploadBeforeClose(closeUploadTimeoutMs)
      catch {
        case e: Exception =>
          logWarning(s"lineagestore $storeId: snapshot upload before close failed", e)
          s.frozenIds
      }
    reportUploads(s)
    if (left.nonEmpty) {
      logWarning(
        s"lineagestore $storeId closes with ${left.size} snapshot(s) not uploaded (${left.mkString(", ")}) " +
          s"after waiting up to $closeUploadTimeoutMs ms (${LineageConf.CloseUploadTimeoutMs.key}): nothing " +
          "committed is lost (the deltas hold it); the lineage's next commits upload a catch-up snapshot"
      )
    }
  }

  /** The shutdown hook's clean-up, which maintenance would have run: a process that never lives one
    * `maintenanceInterval` (short availableNow runs) still has its retention. Skipped while snapshots are
    * still frozen (their upload failed or ran out of time).
    */
  private[spark] def cleanUpBeforeExit(): Unit = {
    val s = store
    if (s != null && s.frozenCount == 0) s.cleanup()
  }

  override def close(): Unit = synchronized {
    LineageStateStoreProvider.ShutdownUploads.unregister(this)
    if (store != null) {
      uploadBeforeClose()
      store.close()
      store = null
    }
    // the local RocksDB copy is a cache of the blob store, kept for the next provider of this store (a
    // restarted query) unless retention is 0 or another provider had the directory
    if (localLease != null) localLease.release()
    if (storeId != null)
      StandbyFollowers.running.foreach(_.released(storeId.storeCheckpointLocation().toString))
  }

  override def supportedCustomMetrics: Seq[StateStoreCustomMetric] = LineageMetrics.all

  override def supportedInstanceMetrics: Seq[StateStoreInstanceMetric] = LineageMetrics.instance

  private[spark] def metricsOf(s: LineageStateStore): StateStoreMetrics =
    LineageMetrics.of(store, storeId, localLease.standby, Option(localDeltas))

  /** A family removed (or created anew) must not keep the encoders of its old schema. */
  private[spark] def forgetColumnFamily(name: String): Unit = encoders.remove(name)

  override def toString: String = s"LineageStateStoreProvider[$storeId]"
}

private object LineageStateStoreProvider {
  val OwnershipTimeoutMs: Long = 120000L

  /** Spark closes no provider when its process ends (SparkContext.stop and JVM exit leave
    * `StateStore.loadedProviders` as they are; only maintenance, `unload` and `StateStore.stop` close them),
    * so the snapshots frozen since the last maintenance would die with an executor or a short availableNow
    * driver. One JVM shutdown hook uploads them, each store within its `closeUploadTimeoutMs`. It runs before
    * Hadoop closes its filesystems (priority 10) and after Spark's own hooks (50).
    */
  object ShutdownUploads {
    private val open = java.util.concurrent.ConcurrentHashMap.newKeySet[LineageStateStoreProvider]()
    private lazy val installed: Unit =
      org.apache.hadoop.util.ShutdownHookManager
        .get()
        .addShutdownHook(
          { () =>
            // every upload first: a provider of an earlier run may still hold a frozen snapshot that a newer
            // provider's clean-up would otherwise see appear after it ran
            open.forEach(p => scala.util.Try(p.uploadBeforeClose()))
            open.forEach(p => scala.util.Try(p.cleanUpBeforeExit()))
          },
          30,
          // Hadoop cuts a hook short at its timeout: the stores' own bounds apply within it
          10L * 60 * 1000,
          java.util.concurrent.TimeUnit.MILLISECONDS
        )

    def register(p: LineageStateStoreProvider): Unit = { installed; open.add(p) }
    def unregister(p: LineageStateStoreProvider): Unit = open.remove(p)
  }

  // executor-wide: eviction lists every local store directory, so providers starting together share one run
  private val lastEviction = new java.util.concurrent.atomic.AtomicLong(Long.MinValue)

  def evictIdleAtMostEveryMinute(dirs: LocalDirectories): Unit = {
    val now = System.currentTimeMillis()
    val last = lastEviction.get()
    if ((last == Long.MinValue || now - last > 60000L) && lastEviction.compareAndSet(last, now))
      scala.util.Try(dirs.evictIdle())
  }
}

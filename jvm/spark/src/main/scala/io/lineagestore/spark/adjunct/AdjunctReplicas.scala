package io.lineagestore.spark.adjunct

import scala.collection.mutable
import scala.util.control.NonFatal

import org.apache.hadoop.fs.Path

import io.lineagestore.adjunct.{AdjunctTableLog, ReplicaMark}
import io.lineagestore.config.LineageConf
import io.lineagestore.format.StoreIdentity
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.storage.HadoopBlobStore
import io.lineagestore.store._

/** A local copy of an adjunct table's store: a [[LineageStore]] in a leased local directory. `role` keeps the
  * driver's writer and an executor's replica apart when they share a JVM (local mode). `confEntries` are
  * [[AdjunctTable.confEntries]]: the Hadoop configuration and the session's lineagestore settings, applied as
  * the provider applies them (the local directory under `localDir`, kept `localRetentionMs`; RocksDB's
  * memory, the transfer threads, the snapshot interval), so moving state to another disk moves the tables'
  * copies too. `partition` (-1: the table's one store) sets the phase of the snapshot interval the store
  * freezes on, so the partitions of a table snapshot at different versions as a query's stores do
  * ([[SnapshotSchedule]]).
  */
final class AdjunctLocalStore(
    storePath: String,
    confEntries: Map[String, String],
    role: String,
    retain: Int,
    partition: Int
) extends AutoCloseable {
  val conf: org.apache.hadoop.conf.Configuration = AdjunctTable.confOf(confEntries)
  private val lease = AdjunctLocalStore.directoriesFor(confEntries).acquire(s"adjunct-$role:$storePath")
  val store: LineageStore =
    try
      new LineageStore(
        new CheckpointFiles(
          new HadoopBlobStore(new Path(storePath), conf, LineageConf.DeltaUploadPartBytes.default),
          StoreIdentity(0, 0, "default"),
          SharedTransferPool(LineageConf.TransferThreads.from(confEntries))
        ),
        lease.dir,
        StoreSettings.fromEntries(confEntries, minVersionsToRetain = retain),
        snapshotPartition = Some(math.max(partition, 0))
      )
    catch { case t: Throwable => lease.release(); throw t }

  /** Makes the local store hold `id` (incrementally: see [[LineageStore.load]]). */
  def load(id: CheckpointId): Unit = if (store.loadedCheckpoint != Some(id)) store.load(id)

  override def close(): Unit = try store.close()
  finally lease.release()
}

object AdjunctLocalStore {

  /** [[LocalDirectories.configured]] by `confEntries`, one per pair of settings in this JVM (its leases stay
    * with it while copies are open).
    */
  def directoriesFor(confEntries: Map[String, String]): LocalDirectories = {
    val dirs = LocalDirectories.configured(confEntries)
    directories.computeIfAbsent((dirs.base.getPath, dirs.retentionMs), _ => dirs)
  }
  private val directories = new java.util.concurrent.ConcurrentHashMap[(String, Long), LocalDirectories]()
}

/** The executor's read-only replicas: one per adjunct table (store path; per partition of a partitioned
  * table), shared by the executor's tasks.
  *
  * Threads: each [[Replica]]'s monitor guards its `readers` count, its store (the version it holds, its
  * loads) and its markers, as a readers-writer gate: tasks reading the loaded version hold it together, each
  * reading through the one [[CommittedView]] of that version, which any number of threads may read at once
  * (no per-read state: a store's own `get` would record each read in its batch in progress, a table one
  * thread may use; tasks sharing it failed with `ArrayIndexOutOfBoundsException` in `KeyTable` or spun
  * forever, issue 52); a task wanting another version waits until no task reads, then loads it and takes the
  * new version's view, all under the monitor. The monitor's release and acquire publish the store's state
  * from the loading thread to the readers. The map of replicas is guarded by this object's monitor.
  */
object AdjunctReplicas {
  private val replicas = mutable.Map.empty[String, Replica]
  private val log = org.slf4j.LoggerFactory.getLogger(getClass)

  /** This JVM's replica name in the markers: the executor's id and host ("driver@..." in local mode). */
  private def replicaName: String = {
    val env = org.apache.spark.SparkEnv.get
    if (env == null) s"jvm@${java.net.InetAddress.getLocalHost.getHostName}"
    else s"${env.executorId}@${env.blockManager.blockManagerId.host}"
  }

  /** The replica of `storePath` this JVM holds, if any. */
  def existing(storePath: String): Option[Replica] = synchronized(replicas.get(storePath))

  /** The replica of the store at `storePath` (`partition` of a partitioned table, or -1: the table's one
    * store), opened on first use.
    */
  def replica(storePath: String, confEntries: Map[String, String], partition: Int): Replica = synchronized {
    replicas.getOrElseUpdate(storePath, new Replica(storePath, confEntries, partition))
  }

  final class Replica(storePath: String, confEntries: Map[String, String], partition: Int) {
    private var local: AdjunctLocalStore = _ // opened by the first acquire
    private var view: CommittedView = _ // of the version local holds (null: none taken since its last load)
    private var readers = 0
    private var mostReaders = 0 // the most tasks that held the replica at once (tests: lookups overlapped)
    private var compactions = 0L // loads after which the replica was compacted for reads
    private var lastCompactMs = 0L // what the last load's compaction check (and compaction) took
    private var lastMarkMs = 0L // what writing the last marker took
    private var markerSeq = 0L // guarded like the rest: marks are written under this monitor
    private var lastMarker: Option[String] = None
    private var marked: Option[CheckpointId] = None // what the last marker written says the replica holds

    /** Holds the replica at `id` until [[release]]; loads it first, once no reader holds another version. The
      * view returned may be read by the calling task's threads until then, beside the other readers.
      */
    def acquire(id: CheckpointId): CommittedView = synchronized {
      while (readers > 0 && !local.store.loadedCheckpoint.contains(id)) wait()
      if (local == null)
        local = new AdjunctLocalStore(storePath, confEntries, "replica", Int.MaxValue, partition)
      if (!local.store.loadedCheckpoint.contains(id)) {
        view = null // a load that fails midway leaves no view of what the store held before
        local.load(id)
        // no reader holds it now: the one time a replayed table can be sorted for its lookups
        val compactStart = System.nanoTime()
        if (local.store.compactForReads()) compactions += 1
        lastCompactMs = (System.nanoTime() - compactStart) / 1000000
      }
      if (view == null) view = local.store.committedView()
      // also when the version is unchanged but its marker was not written (a task killed by an interrupt
      // fails the write)
      if (!marked.contains(id)) {
        val markStart = System.nanoTime()
        mark(id)
        lastMarkMs = (System.nanoTime() - markStart) / 1000000
      }
      readers += 1
      mostReaders = math.max(mostReaders, readers)
      view
    }

    /** Records the version now held in the table's replica markers (one small write per version change, not
      * per task), for `lineagestore inspect`'s lag. Best effort: a failed write is logged and the lookup goes
      * on, since the marker is a report and the replica is valid; the next task to use the replica writes it.
      */
    private def mark(id: CheckpointId): Unit = {
      val c = local.store.counters
      val m = ReplicaMark(
        AdjunctReplicas.replicaName,
        id.version,
        id.uniqueId,
        System.currentTimeMillis(),
        c.bytesDownloaded.get,
        c.deltasReplayed.get,
        partition
      )
      try {
        // load time then a counter: increasing within this replica even when two loads share a millisecond
        markerSeq = math.max(markerSeq + 1, m.loadedAtMs * 1000)
        val written = tableLog.writeReplica(m, markerSeq)
        lastMarker.foreach(tableLog.deleteReplicaMarker)
        lastMarker = Some(written)
        marked = Some(id)
      } catch {
        case NonFatal(e) =>
          AdjunctReplicas.log.warn(s"adjunct replica of $storePath: could not record its version: $e")
      }
    }

    private lazy val tableLog =
      new AdjunctTableLog(
        new HadoopBlobStore(
          new Path(storePath).getParent.getParent,
          local.conf,
          LineageConf.DeltaUploadPartBytes.default
        )
      )

    def release(): Unit = synchronized { readers -= 1; notifyAll() }

    /** The version the replica holds, what its loads cost so far, how many of them it was compacted after,
      * what the last refresh's steps took (its load, compaction, marker) and the most tasks that read it at
      * once (tests, reports).
      */
    def stats: Map[String, Long] = synchronized {
      Option(local).fold(Map.empty[String, Long]) { l =>
        val c = l.store.counters
        Map(
          "version" -> l.store.loadedVersion.getOrElse(-1L),
          "bytesDownloaded" -> c.bytesDownloaded.get,
          "filesDownloaded" -> c.filesDownloaded.get,
          "bytesReused" -> c.bytesReused.get,
          "deltasReplayed" -> c.deltasReplayed.get,
          "mostReaders" -> mostReaders.toLong,
          "compactions" -> compactions,
          "lastLoadMs" -> c.lastLoadMs.get,
          "lastCompactMs" -> lastCompactMs,
          "lastMarkMs" -> lastMarkMs
        )
      }
    }
  }
}

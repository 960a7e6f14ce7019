package io.lineagestore.spark.adjunct

import scala.reflect.ClassTag

import org.apache.spark.{Partition, Partitioner, SparkEnv, TaskContext}
import org.apache.spark.rdd.RDD

import io.lineagestore.adjunct.{MaintainPlacement, MaintainRecord, TombstoneRetention}
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.store.{CrashPoints, InjectedFaults, LineageStore}
import io.lineagestore.spark.adjunct.AdjunctMaintain.Change

/** What one maintain task did: the checkpoint it committed for `partition`, where (executor id and host), and
  * what it cost: the changes and their packed bytes it received, the delta it wrote, the bytes its load
  * downloaded (0: the store was warm here at the parent), its time in the task. Of a table with tombstone
  * retention ([[TombstoneRetention]]): the highest ordering value among its changes (None: none, or a
  * generation's), the tombstones it purged, the late changes it refused, and after its commit the keys its
  * store holds (rows and tombstones) and of them the tombstones.
  */
final case class MaintainedPartition(
    partition: Int,
    checkpoint: CheckpointId,
    executorId: String,
    host: String,
    changes: Long,
    changeBytes: Long,
    deltaBytes: Long,
    bytesDownloaded: Long,
    warm: Boolean,
    millis: Long,
    highestOrdering: Option[Long] = None,
    purged: Long = 0,
    refusedLate: Long = 0,
    storedKeys: Long = 0,
    tombstones: Long = 0
)

/** Applies a batch's changes on the executors (docs/adjunct-tables.md "Maintain"): the packed changes
  * shuffled by partition to one task per partition, each applying its partition's to that partition's store
  * ([[AdjunctWriters]]) and committing the store's next checkpoint over the parent the latest record names;
  * the driver gets one result per partition (Spark returns one attempt's) and writes the record after.
  * Partition p's task is placed on the executor that last committed partition p, so it finds its store warm.
  */
object MaintainTasks {

  /** Per table path, where each partition was last committed (Spark's `executor_<host>_<id>` location), and
    * the last batch's results (reports). Driver-side memory only: a lost hint costs a load, never
    * correctness.
    */
  private val lastPlaced = new java.util.concurrent.ConcurrentHashMap[String, Map[Int, String]]()
  private val lastResults = new java.util.concurrent.ConcurrentHashMap[String, Seq[MaintainedPartition]]()

  /** Runs the maintain tasks of one batch; returns their results, one per committing partition. `tombstones`:
    * how the table keeps tombstones (None: for ever, unindexed).
    */
  def run(
      path: String,
      storePaths: IndexedSeq[String],
      packed: RDD[(Int, Array[Byte])],
      parents: Map[Int, CheckpointId],
      op: String,
      confEntries: Map[String, String],
      retainVersions: Int,
      replace: Boolean,
      tombstones: Option[Tombstones] = None
  ): Seq[MaintainedPartition] = {
    val n = storePaths.length
    val shuffled = packed.partitionBy(new ById(n))
    val last = Option(lastPlaced.get(path)).getOrElse(Map.empty[Int, String])
    val placed = new Placed(shuffled, MaintainPlacement.place(n, last, executorHosts(packed.sparkContext)))
    val tasks = placed.mapPartitionsWithIndex { (p, chunks) =>
      val arrays = chunks.map(_._2).toArray
      val parent = parents.getOrElse(p, CheckpointId.Empty)
      if (!MaintainRecord.commits(n, arrays.nonEmpty, replace, parent)) Iterator.empty
      else
        Iterator(
          commitPartition(
            path,
            storePaths(p),
            p,
            parent,
            arrays,
            op,
            confEntries,
            retainVersions,
            replace,
            tombstones
          )
        )
    }
    try tasks.collect().toSeq
    catch {
      // bad input found in a task (an unknown op) fails the call as it did on the driver, by its own message
      case e: org.apache.spark.SparkException => throw badInput(e).getOrElse(e)
    }
  }

  /** The hosts running executors now (the driver's only in local mode, where it runs the tasks). */
  private def executorHosts(sc: org.apache.spark.SparkContext): Seq[String] = {
    val driver = SparkEnv.get.blockManager.blockManagerId
    val all = sc.statusTracker.getExecutorInfos.toSeq
    val executors = all.filterNot(e => e.host == driver.host && e.port == driver.port)
    (if (executors.isEmpty) all else executors).map(_.host).distinct.sorted
  }

  private def badInput(e: Throwable): Option[AdjunctTableException] =
    Iterator
      .iterate(e)(_.getCause)
      .takeWhile(_ != null)
      .take(10)
      .collectFirst { case a: AdjunctTableException => new AdjunctTableException(a.getMessage) }

  /** Remembers where the recorded batch's partitions were committed, for the next batch's placement. */
  def recorded(path: String, results: Seq[MaintainedPartition]): Unit = {
    val before = Option(lastPlaced.get(path)).getOrElse(Map.empty)
    lastPlaced.put(path, before ++ results.map(r => r.partition -> s"executor_${r.host}_${r.executorId}"))
    lastResults.put(path, results)
  }

  /** The last recorded batch's maintain tasks of the table at `path`, as JSON lines (benchmarks, tests). */
  def lastReport(path: String): String =
    Option(lastResults.get(path))
      .getOrElse(Nil)
      .sortBy(_.partition)
      .map { r =>
        s"""{"partition": ${r.partition}, "checkpoint": "${r.checkpoint.version}_${r.checkpoint.uniqueId}", """ +
          s""""executor": "${r.executorId}", "host": "${r.host}", "changes": ${r.changes}, """ +
          s""""changeBytes": ${r.changeBytes}, "deltaBytes": ${r.deltaBytes}, """ +
          s""""bytesDownloaded": ${r.bytesDownloaded}, "warm": ${r.warm}, "millis": ${r.millis}, """ +
          s""""highestOrdering": ${r.highestOrdering.fold("null")(_.toString)}, "purged": ${r.purged}, """ +
          s""""refusedLate": ${r.refusedLate}, "storedKeys": ${r.storedKeys}, "tombstones": ${r.tombstones}}"""
      }
      .mkString("\n")

  /** Partition p's maintain task: applies `chunks` (its packed changes) to its store loaded at `parent` and
    * commits the store's next checkpoint. Before applying, the store's clean-up runs against `parent` (its
    * record is committed: a store's last `retain` checkpoints cover every checkpoint a kept table record
    * names, since a store commits at most once per table version).
    */
  private def commitPartition(
      path: String,
      storePath: String,
      p: Int,
      parent: CheckpointId,
      chunks: Array[Array[Byte]],
      op: String,
      confEntries: Map[String, String],
      retainVersions: Int,
      replace: Boolean,
      tombstones: Option[Tombstones]
  ): MaintainedPartition = {
    val start = System.nanoTime()
    val env = SparkEnv.get
    val result = AdjunctWriters.withWriter(storePath, confEntries, retainVersions, p) { local =>
      val store = local.store
      val downloadedBefore = store.counters.bytesDownloaded.get
      val warm = store.loadedCheckpoint.contains(parent)
      local.load(parent)
      if (!parent.isEmptyState) store.cleanup()
      // a store's first checkpoint starts from nothing: no stored ordering to compare with (each key once)
      val first = parent.isEmptyState
      var count = 0L
      val applying = new Applying(store, path, op, first, tombstones)
      try
        if (replace) {
          val rows = chunks.iterator.flatMap(ChangePacking.unpack).toArray
          count = rows.length
          replaceContent(store, rows, first)
          applying.dropIndex() // a generation leaves no tombstone: every key it lacks is deleted outright
        } else {
          applying.purge()
          chunks.iterator.flatMap(ChangePacking.unpack).foreach { c =>
            count += 1; applying(c)
          }
        }
      catch { case t: Throwable => store.abort(); throw t }
      val counts = if (tombstones.isEmpty) Map.empty[String, Long] else store.columnFamilies.counts
      val id = store.commit()
      store.uploadSnapshots()
      MaintainedPartition(
        p,
        id,
        env.executorId,
        env.blockManager.blockManagerId.host,
        count,
        chunks.iterator.map(_.length.toLong).sum,
        store.counters.lastDeltaBytes.get,
        store.counters.bytesDownloaded.get - downloadedBefore,
        warm,
        0L,
        applying.highest,
        applying.purged,
        applying.refusedLate,
        counts.getOrElse(io.lineagestore.store.ColumnFamilies.DefaultName, 0L),
        counts.getOrElse(TombstoneRetention.IndexFamily, 0L)
      )
    }
    // the writer is kept (at the checkpoint just committed) when the task fails here: a retry on this
    // executor then loads the parent again from that copy
    InjectedFaults.fromConfs(confEntries).at(CrashPoints.AdjunctAfterPartitionCommit)
    result.copy(millis = (System.nanoTime() - start) / 1000000)
  }

  /** Makes the store hold exactly `rows` (a generation's, for this partition): deletes every stored key (row
    * or tombstone) they lack, then writes them all, whatever their stored ordering.
    */
  private def replaceContent(store: LineageStore, rows: Array[Change], empty: Boolean): Unit = {
    if (!empty) {
      val wanted = new java.util.HashSet[java.nio.ByteBuffer](rows.length * 2)
      rows.foreach(c => wanted.add(java.nio.ByteBuffer.wrap(c.key)))
      val gone = scala.collection.mutable.ArrayBuffer.empty[Array[Byte]]
      val scan = store.scan(1, Array.emptyByteArray, null)
      try scan.foreach { case (k, _) => if (!wanted.contains(java.nio.ByteBuffer.wrap(k))) gone += k }
      finally scan.close()
      gone.foreach(k => store.delete(1, k))
    }
    rows.foreach(c => store.put(1, c.key, c.value))
  }

  /** Applies one task's changes to `store`, one at a time on the task's thread (not thread-safe). The stored
    * change (live row or tombstone) wins unless the new one is newer: late changes are ignored. With
    * `tombstones` (the table keeps them for a bound: [[TombstoneRetention]]) each tombstone also has an entry
    * in the store's index family, keyed by its ordering, so [[purge]] finds those at or below the floor with
    * one range scan; a change at or below the floor for a key the store holds nothing of is refused (its
    * key's tombstone may be purged already), and a delete at or below it removes the key outright.
    */
  private final class Applying(
      store: LineageStore,
      path: String,
      op: String,
      first: Boolean,
      tombstones: Option[Tombstones]
  ) {
    var purged = 0L
    var refusedLate = 0L
    var highest: Option[Long] = None
    private val floor = tombstones.flatMap(_.floor)
    private val indexFamily: Int = tombstones.fold(-1) { _ =>
      store.columnFamilies.create(TombstoneRetention.IndexFamily) // a no-op once the store has it
      store.columnFamilies.idOf(TombstoneRetention.IndexFamily).get
    }
    private val indexValue = Array[Byte](0)

    private def atOrBelowFloor(ordering: Long) = floor.exists(ordering <= _)

    def apply(c: Change): Unit = {
      if (c.badOp != null)
        throw new AdjunctTableException(
          s"adjunct table $path: change with $op '${c.badOp}' is neither of ${AdjunctMaintain.Ops.mkString(", ")}; " +
            "nothing of this batch was committed. Map the source's operation codes to these (e.g. Debezium " +
            "c/u/r -> upsert, d -> delete) before maintain."
        )
      if (indexFamily >= 0) highest = Some(highest.fold(c.ordering)(math.max(_, c.ordering)))
      val stored = if (first) null else store.get(1, c.key)
      if (stored == null) {
        if (atOrBelowFloor(c.ordering)) refusedLate += 1
        else write(c, null)
      } else if (AdjunctMaintain.orderingOf(stored) < c.ordering) write(c, stored)
    }

    private def write(c: Change, stored: Array[Byte]): Unit =
      if (indexFamily < 0) store.put(1, c.key, c.value)
      else {
        if (stored != null && AdjunctMaintain.deletedOf(stored))
          store.delete(indexFamily, TombstoneRetention.indexKey(AdjunctMaintain.orderingOf(stored), c.key))
        if (!AdjunctMaintain.deletedOf(c.value)) store.put(1, c.key, c.value)
        else if (atOrBelowFloor(c.ordering)) { store.delete(1, c.key); purged += 1 }
        else {
          store.put(1, c.key, c.value)
          store.put(indexFamily, TombstoneRetention.indexKey(c.ordering, c.key), indexValue)
        }
      }

    /** Deletes the tombstones at or below the floor, found by one range scan of the index family. */
    def purge(): Unit = floor.foreach { f =>
      val scan = store.scan(indexFamily, Array.emptyByteArray, TombstoneRetention.indexEnd(f).orNull)
      val due =
        try scan.map(_._1).toArray
        finally scan.close()
      due.foreach { entry =>
        val key = TombstoneRetention.keyOfIndex(entry)
        val stored = store.get(1, key)
        // the index names tombstones only (kept so by write); a key stored otherwise keeps its row
        if (stored != null && AdjunctMaintain.deletedOf(stored)) { store.delete(1, key); purged += 1 }
        store.delete(indexFamily, entry)
      }
    }

    /** Deletes every index entry (after a generation replaced the store's content). */
    def dropIndex(): Unit = if (indexFamily >= 0) {
      val scan = store.scan(indexFamily, Array.emptyByteArray, null)
      val all =
        try scan.map(_._1).toArray
        finally scan.close()
      all.foreach(store.delete(indexFamily, _))
    }
  }

  /** How a table with tombstone retention keeps them in a batch: `floor` from the record the batch builds on
    * ([[TombstoneRetention.floor]]; None: nothing is purged or refused yet).
    */
  final case class Tombstones(floor: Option[Long])

  /** Sends the packed changes of partition p (the key) to task p. */
  private final class ById(n: Int) extends Partitioner {
    override def numPartitions: Int = n
    override def getPartition(key: Any): Int = key.asInstanceOf[Int]
  }

  /** `prev`'s partitions, each preferring the executor its partition was last committed on. */
  private final class Placed[T: ClassTag](prev: RDD[T], where: Map[Int, String]) extends RDD[T](prev) {
    override protected def getPartitions: Array[Partition] = prev.partitions
    override def compute(split: Partition, context: TaskContext): Iterator[T] = prev.iterator(split, context)
    override protected def getPreferredLocations(split: Partition): Seq[String] = where.get(split.index).toSeq
  }
}

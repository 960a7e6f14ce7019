package io.lineagestore.tools

import java.io.File
import java.nio.file.Files
import java.util.concurrent.Callable
import java.util.concurrent.atomic.AtomicLong

import scala.jdk.CollectionConverters._

import org.apache.hadoop.conf.Configuration

import io.lineagestore.engine.DaemonThreads
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.store.{ColumnFamilies, CrashPoints, LineageStore, LocalDirectories, StoreSettings}

/** Decides which new partition a state key belongs to. It must be exactly the partition Spark's shuffle sends
  * the key's rows to, or the restarted query looks the key up in another partition and its state silently
  * vanishes; the implementation therefore lives in the Spark glue and evaluates Spark's own partitioning
  * expression (`io.lineagestore.spark.SparkKeyPlacement`). `key` is the store's user key as the provider
  * wrote it.
  */
trait KeyPlacement {
  def partitions: Int
  def partitionOf(key: Array[Byte]): Int

  /** The placement of column family `family`'s keys. Each family of a store may key its rows differently
    * (transformWithState: value and list state by the grouping key, map state by (grouping key, user key),
    * timers by (grouping key, expiry) and (expiry, grouping key), TTL indexes by (expiry, ...)), and every
    * row must still land where its grouping key does. This placement serves the default family; None: the
    * family is unknown to it, and the store is refused by name rather than guessed at.
    */
  def ofFamily(family: String): Option[KeyPlacement] =
    if (family == ColumnFamilies.DefaultName) Some(this) else None

  /** A placement for another thread (the rewrite places keys of independent groups in parallel): a new
    * instance when this one keeps state between calls, as Spark's evaluated expression does; `this` when not.
    */
  def forAnotherThread: KeyPlacement = this
}

/** What one store name of one operator had in each old partition: the committed checkpoint to read. */
final case class RepartitionSource(partitionId: Int, dir: String, committed: CheckpointId)

object RepartitionSource {

  /** Sources as the Python side sends them: one a line, `partition version uniqueId dir`. */
  def parseLines(text: String): Seq[RepartitionSource] =
    Option(text).getOrElse("").split("\n").toSeq.map(_.trim).filter(_.nonEmpty).map { line =>
      line.split(" ", 4) match {
        case Array(p, v, id, dir) => RepartitionSource(p.toInt, dir, CheckpointId(v.toLong, id))
        case _                    =>
          throw new IllegalArgumentException(
            s"bad source line '$line': want 'partition version uniqueId dir'"
          )
      }
    }
}

/** Rewrites one store name of one operator from its old partitions into `placement.partitions` new ones.
  *
  * Every new store starts from the empty state standing at `emptyVersion` (the committed version of the last
  * batch) and commits once, as checkpoint `emptyVersion + 1` with a fresh unique ID, writing its whole state
  * as one delta that starts from the empty state, plus a snapshot (the provider's own `loadEmpty` path, see
  * [[LineageStore.loadEmpty]]). Nothing already written is touched or deleted: the new files have new unique
  * IDs, so until Spark's commit log names them they are unreferenced (a crash leaves orphans for `gc`, never
  * a changed lineage), and a re-run writes another set.
  *
  * The rewrite is split into the independent groups of [[RepartitionGroups]]: when one partition count
  * divides the other, each group (one old partition and the k new ones it feeds, or the k old partitions that
  * fold into one new one) is written on its own, `threads` groups at a time, with only its own new stores
  * open; when shrinking by a divisor no key is decoded or placed at all. Otherwise every key of every old
  * partition is placed among all new ones by one reader, and the new stores commit and upload in parallel.
  * The result is the same either way: the same keys in the same new partitions, each new store one
  * fresh-start checkpoint.
  *
  * Every column family moves, each key placed by its family's placement ([[KeyPlacement.ofFamily]]); every
  * family of an old store is created in the new stores it feeds, empty or not, as the operator created it.
  */
object StoreRepartitioner {

  /** `phasesMs`: time spent loading the old checkpoints, reading and placing their rows into the new stores,
    * committing the new stores (delta, local apply, snapshot freeze) and uploading their snapshots, summed
    * over threads; `groups`: how many independent groups the rewrite had.
    */
  final case class Result(
      uniqueIds: Seq[String],
      rowsRead: Long,
      rowsPerPartition: Seq[Long],
      phasesMs: Map[String, Long] = Map.empty,
      groups: Int = 1
  )

  val DefaultThreads: Int = math.max(1, math.min(4, Runtime.getRuntime.availableProcessors()))

  /** The independent groups of a rewrite of `sources` into `n` partitions ([[RepartitionGroups]]), or one
    * group of everything, every key placed, when the sources are not every old partition 0 until their count
    * or `generalPathOnly`. The one decision of how a rewrite splits: the threads here and the tasks of the
    * Spark job (`RepartitionJob`) both take it.
    */
  def groupsOf(
      sources: Seq[RepartitionSource],
      n: Int,
      generalPathOnly: Boolean = false
  ): Seq[RepartitionGroup] = {
    val complete = sources.map(_.partitionId).toSet == (0 until sources.size).toSet
    if (complete && !generalPathOnly) RepartitionGroups.plan(sources.size, n)
    else Seq(RepartitionGroup(sources.map(_.partitionId), 0 until n, direct = false))
  }

  /** `newDir(p)` is the directory of new partition `p` (Spark's layout, the same operator). `crash` reaches
    * the new stores' commit and upload steps (the steps between Spark's files are the caller's).
    */
  def run(
      operatorId: Long,
      storeName: String,
      sources: Seq[RepartitionSource],
      newDir: Int => String,
      emptyVersion: Long,
      placement: KeyPlacement,
      crash: CrashPoints = CrashPoints.None,
      scratchRoot: File = new File(System.getProperty("java.io.tmpdir")),
      threads: Int = DefaultThreads,
      generalPathOnly: Boolean = false // measurement only: one group, every key placed, one thread
  ): Result = {
    val n = placement.partitions
    val groups = groupsOf(sources, n, generalPathOnly)
    val results = inParallel(groups, if (groups.size > 1) threads else 1) { group =>
      val place = if (groups.size > 1) placement.forAnotherThread else placement
      val commitThreads = if (groups.size > 1 || generalPathOnly) 1 else threads
      rewriteGroup(
        operatorId,
        storeName,
        sources,
        group,
        newDir,
        emptyVersion,
        place,
        crash,
        scratchRoot,
        commitThreads
      )
    }
    combine(n, groups, results)
  }

  /** The results of every group of a rewrite into `n` partitions, as one: new partition `p`'s unique ID and
    * row count at index `p`.
    */
  def combine(n: Int, groups: Seq[RepartitionGroup], results: Seq[Result]): Result = {
    val ids = Array.fill[String](n)(null)
    val counts = Array.fill(n)(0L)
    groups.zip(results).foreach { case (g, r) =>
      g.newPartitions.zipWithIndex.foreach { case (p, i) =>
        ids(p) = r.uniqueIds(i)
        counts(p) = r.rowsPerPartition(i)
      }
    }
    require(
      ids.forall(_ != null),
      s"the groups of a rewrite into $n partitions left some partition unwritten"
    )
    val phases = results.flatMap(_.phasesMs).groupMapReduce(_._1)(_._2)(_ + _)
    Result(ids.toSeq, counts.sum, counts.toSeq, phases, groups.size)
  }

  /** Writes the new stores of one group (one of [[groupsOf]]): opens only the group's old partitions among
    * `sources`, places each of their keys among the group's new partitions (or, `direct`, puts them all in
    * its one) and commits each new store once. The result lists the group's new partitions' unique IDs and
    * row counts in the order of `group.newPartitions`. `conf` reaches the storage (the tools' settings, or
    * the session's in a task of the Spark job).
    */
  def rewriteGroup(
      operatorId: Long,
      storeName: String,
      sources: Seq[RepartitionSource],
      group: RepartitionGroup,
      newDir: Int => String,
      emptyVersion: Long,
      placement: KeyPlacement,
      crash: CrashPoints,
      scratchRoot: File,
      commitThreads: Int = 1,
      conf: Configuration = ToolEnv.hadoopConf
  ): Result = {
    val n = placement.partitions
    val bySource = sources.map(s => s.partitionId -> s).toMap
    val clock = new PhaseClock
    val r = write(
      operatorId,
      storeName,
      n,
      newDir,
      emptyVersion,
      crash,
      scratchRoot,
      group.newPartitions,
      commitThreads,
      conf
    ) { (scratch, sink) =>
      val byFamily = scala.collection.mutable.Map.empty[String, KeyPlacement]
      def placementOf(family: String): KeyPlacement = byFamily.getOrElseUpdate(
        family,
        placement
          .ofFamily(family)
          .getOrElse(
            throw new UnsupportedOperationException(
              s"operator $operatorId store $storeName: column family '$family' has no known placement " +
                "(no rule says which key column is the grouping key), so its rows cannot be moved; keep the " +
                "partition count of this query"
            )
          )
      )
      group.oldPartitions.map(bySource).foreach { src =>
        readOld(operatorId, storeName, src, scratch, clock, sink.family, conf) { (family, k, v) =>
          val p = if (group.direct) group.newPartitions.head else placementOf(family).partitionOf(k)
          // (a partition outside 0 until n is the sink's to refuse: the placement itself is wrong)
          if (p >= 0 && p < n && !group.newPartitions.contains(p))
            throw new IllegalStateException(
              s"operator $operatorId store $storeName: a key of old partition ${src.partitionId} belongs in " +
                s"new partition $p, which draws only from other old partitions than " +
                s"${group.oldPartitions.mkString(", ")}: the old state is not where Spark's shuffle puts its keys"
            )
          sink.put(p, family, k, v)
        }
      }
    }
    r.copy(phasesMs = r.phasesMs ++ clock.snapshot, groups = 1)
  }

  /** Loads one old partition's committed checkpoint into a scratch directory, names each of its column
    * families to `family` (in the order of their ids, the order the operator created them) and hands every
    * row to `row` with its family; deletes the scratch copy after.
    */
  private def readOld(
      operatorId: Long,
      storeName: String,
      src: RepartitionSource,
      scratch: File,
      clock: PhaseClock,
      family: String => Unit,
      conf: Configuration
  )(
      row: (String, Array[Byte], Array[Byte]) => Unit
  ): Unit =
    ToolStore.using(StoreRef(operatorId, src.partitionId, storeName, src.dir), conf) { tool =>
      val oldDir = new File(scratch, s"old-${src.partitionId}")
      val old = new LineageStore(tool.files, oldDir, StoreSettings.Default)
      try {
        clock.time("loadOld")(old.load(src.committed))
        val families =
          old.columnFamilies.names.toSeq.map(n => n -> old.columnFamilies.idOf(n).get).sortBy(_._2)
        families.foreach { case (name, _) => family(name) }
        clock.time("readPlacePut") {
          families.foreach { case (name, cf) =>
            val it = old.scan(cf, Array.emptyByteArray, null)
            try it.foreach { case (k, v) => row(name, k, v) }
            finally it.close()
          }
        }
      } finally old.close()
      LocalDirectories.deleteRecursively(oldDir)
    }

  /** Where `feed` hands the rows of [[write]]: `family` declares a column family in every new store (so a
    * family the operator created survives even where no key of it lands), `put` one row of a family into new
    * partition `partition` (creating the family there if it was not declared).
    */
  trait RowSink {
    def family(name: String): Unit
    def put(partition: Int, family: String, key: Array[Byte], value: Array[Byte]): Unit
  }

  /** Opens one empty store per new partition in `targets` (all `n` when null; each standing at
    * `emptyVersion`), lets `feed` put every row with its partition (it gets a scratch directory and a sink),
    * then commits each store once and uploads its snapshot, `commitThreads` stores at a time. The rewrite of
    * a lineagestore checkpoint and the migration of another provider's share it. The result lists the
    * targets' unique IDs and row counts in the order of `targets`.
    */
  def write(
      operatorId: Long,
      storeName: String,
      n: Int,
      newDir: Int => String,
      emptyVersion: Long,
      crash: CrashPoints,
      scratchRoot: File,
      targets: Seq[Int] = null,
      commitThreads: Int = 1,
      conf: Configuration = ToolEnv.hadoopConf
  )(feed: (File, RowSink) => Unit): Result = {
    require(n > 0, s"the new partition count must be positive, got $n")
    val parts = Option(targets).getOrElse(0 until n)
    val slot = parts.zipWithIndex.toMap
    val clock = new PhaseClock
    val scratch = Files.createTempDirectory(scratchRoot.toPath, "lineagestore-repartition-").toFile
    val opened = scala.collection.mutable.ArrayBuffer.empty[(ToolStore, LineageStore)]
    try {
      parts.foreach { p =>
        val tool = new ToolStore(StoreRef(operatorId, p, storeName, newDir(p)), conf)
        opened += tool -> new LineageStore(
          tool.files,
          new File(scratch, s"new-$p"),
          StoreSettings.Default,
          crash
        )
        opened.last._2.loadEmpty(emptyVersion)
      }
      val stores = opened.map(_._2).toIndexedSeq
      val counts = Array.fill(parts.size)(0L)
      // each new store's family ids by name (the ids are the store's own; Spark names families, never ids)
      val ids = Array.fill(parts.size)(scala.collection.mutable.Map.empty[String, Int])
      def familyId(i: Int, name: String): Int = ids(i).getOrElseUpdate(
        name, {
          val families = stores(i).columnFamilies
          families.create(name)
          families.idOf(name).get
        }
      )
      feed(
        scratch,
        new RowSink {
          override def family(name: String): Unit = stores.indices.foreach(familyId(_, name))
          override def put(p: Int, family: String, k: Array[Byte], v: Array[Byte]): Unit = {
            val i = slot.getOrElse(
              p,
              throw new IllegalStateException(
                s"placement put a key of operator $operatorId store $storeName in partition $p of $n"
              )
            )
            stores(i).put(familyId(i, family), k, v)
            counts(i) += 1
          }
        }
      )
      val uniqueIds = inParallel(stores, commitThreads) { store =>
        val id = clock.time("commit")(store.commit())
        // the fresh start froze a snapshot: upload it now, the store has no maintenance thread
        clock.time("uploadSnapshot")(store.uploadSnapshots())
        id.uniqueId
      }
      Result(uniqueIds, counts.sum, counts.toSeq, clock.snapshot)
    } finally {
      opened.foreach { case (tool, store) =>
        try store.close()
        finally tool.close()
      }
      LocalDirectories.deleteRecursively(scratch)
    }
  }

  /** `f` over `items`, `threads` at a time (in the calling thread when 1), results in order. Every item runs
    * to its end before the first failure is rethrown, so no store is left half-written by an abandoned
    * thread.
    */
  private def inParallel[A, B](items: Seq[A], threads: Int)(f: A => B): Seq[B] =
    if (threads <= 1 || items.size <= 1) items.map(f)
    else {
      val pool = DaemonThreads.pool(math.min(threads, items.size), "lineagestore-repartition")
      try {
        val futures = pool.invokeAll(items.map(a => (() => f(a)): Callable[B]).asJava).asScala.toSeq
        val outcomes = futures.map(fu => scala.util.Try(fu.get()))
        outcomes.collectFirst { case scala.util.Failure(e) => e } match {
          case Some(e: java.util.concurrent.ExecutionException) => throw e.getCause
          case Some(e)                                          => throw e
          case None                                             => outcomes.map(_.get)
        }
      } finally pool.shutdownNow()
    }

  /** Milliseconds per phase, added from any thread. */
  private final class PhaseClock {
    private val ms = new java.util.concurrent.ConcurrentHashMap[String, AtomicLong]
    def time[T](phase: String)(body: => T): T = {
      val t0 = System.nanoTime()
      try body
      finally ms.computeIfAbsent(phase, _ => new AtomicLong).addAndGet((System.nanoTime() - t0) / 1000000)
    }
    def snapshot: Map[String, Long] = ms.asScala.map { case (k, v) => k -> v.get }.toMap
  }
}

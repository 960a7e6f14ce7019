package org.apache.spark.sql.execution.streaming.state.lineagestore

import java.io.File

import org.apache.hadoop.conf.Configuration

import org.apache.spark.{SparkEnv, TaskContext}
import org.apache.spark.sql.SparkSession
import org.apache.spark.util.{SerializableConfiguration, Utils}

import io.lineagestore.lineage.StateLayout
import io.lineagestore.store.CrashPoints
import io.lineagestore.tools.{KeyPlacement, RepartitionGroup, RepartitionSource, StoreRepartitioner}
import io.lineagestore.tools.Json
import io.lineagestore.tools.Json._

/** How a task builds the placement of one store's keys in its own JVM: the placement itself evaluates Spark
  * expressions and is neither serializable nor thread-safe, so what travels is what it is built from. The
  * driver builds each recipe once before any task runs ([[RepartitionJob.Builder.store]]), so a store whose
  * keys cannot be placed is refused by name with nothing written.
  */
sealed trait PlacementRecipe extends Serializable {
  def partitions: Int
  def build(conf: Configuration): KeyPlacement
}

/** The keys of an operator keyed by its grouping columns (aggregation, deduplication, joins, windows, the
  * mapGroupsWithState family): [[SparkKeyPlacement]].
  */
final case class RowKeyRecipe(
    keySchemaJson: String,
    valueSchemaJson: String,
    prefixKeyColumns: Int,
    partitionKeyColumns: Int,
    partitions: Int
) extends PlacementRecipe {
  override def build(conf: Configuration): KeyPlacement =
    SparkKeyPlacement.of(keySchemaJson, valueSchemaJson, prefixKeyColumns, partitionKeyColumns, partitions)
}

/** A transformWithState store, each column family placed by its grouping key: [[TwsKeyPlacement]]. */
final case class TwsRecipe(
    operatorName: String,
    storeName: String,
    schemaFiles: String,
    operatorPropertiesJson: String,
    encodingFormat: String,
    partitions: Int
) extends PlacementRecipe {
  override def build(conf: Configuration): KeyPlacement =
    TwsKeyPlacement.of(
      operatorName,
      storeName,
      schemaFiles,
      operatorPropertiesJson,
      encodingFormat,
      partitions,
      conf
    )
}

/** How one group of one store's rewrite is written, in a task on an executor: built on the driver, sent to
  * the task, and holding only what can travel (schemas as JSON, paths, IDs, Spark's serializable store
  * settings); what cannot (placements, encoders, providers) it builds in the task. Returns the group's new
  * partitions' unique IDs and row counts, in the order of `group.newPartitions`.
  */
trait GroupWriter extends Serializable {
  def operatorId: Long
  def storeName: String
  def write(group: RepartitionGroup, conf: Configuration, scratchRoot: File): StoreRepartitioner.Result
}

/** A lineagestore store's group, from its old partitions' committed checkpoints
  * ([[StoreRepartitioner.rewriteGroup]]).
  */
final case class RepartitionWriter(
    operatorId: Long,
    storeName: String,
    operatorDir: String,
    sources: Seq[RepartitionSource],
    emptyVersion: Long,
    recipe: PlacementRecipe
) extends GroupWriter {
  override def write(
      group: RepartitionGroup,
      conf: Configuration,
      scratchRoot: File
  ): StoreRepartitioner.Result =
    StoreRepartitioner.rewriteGroup(
      operatorId,
      storeName,
      sources,
      group,
      p => StateLayout.storeDir(operatorDir, p, storeName),
      emptyVersion,
      recipe.build(conf),
      CrashPoints.None,
      scratchRoot,
      conf = conf
    )
}

/** The rewrite of a checkpoint's stores into a new partition count as one Spark job (docs/repartition.md,
  * "The Spark job"): the driver plans (the groups of [[StoreRepartitioner.groupsOf]], the same decision the
  * tools' threads take), each group of each store is one task, which opens only its group's old stores on its
  * executor, writes and commits the group's new stores there and returns their unique IDs; the driver gathers
  * them and the caller then writes Spark's files, commit log last, as for the rewrite in one JVM.
  *
  * A task's new stores have fresh unique IDs and nothing names them until the commit log does: a task that
  * fails after its write, or a speculative copy of it, leaves orphans for `gc`; the attempt whose result the
  * driver receives is the one whose IDs are committed, each new partition once.
  */
object RepartitionJob {

  /** A step of the job a test may fail at ([[Builder.run]]'s `failAt`): the first attempt of the first task
    * throws once its stores are committed and uploaded, so the task is retried and its first write is left
    * behind as orphans.
    */
  val TaskAfterWrite = "repartition.task-after-write"

  /** One store name of one operator, as the driver planned it: its groups and how one is written. */
  final case class StoreJob(writer: GroupWriter, groups: Seq[RepartitionGroup])

  /** One task's work: group `group` of store `store` (indexes into the job's stores and that store's groups).
    */
  final case class GroupTask(store: Int, group: Int)

  /** What a task sends back: the group's new unique IDs and row counts (in the order of its new partitions),
    * where it ran and how long it took.
    */
  final case class GroupResult(
      task: GroupTask,
      uniqueIds: Seq[String],
      rowsPerPartition: Seq[Long],
      phasesMs: Map[String, Long],
      executorId: String,
      attempt: Int,
      ms: Long
  )

  /** For py4j: collects the stores, then runs them as one job. */
  final class Builder(partitions: Int, generalPathOnly: Boolean) {
    require(partitions > 0, s"the new partition count must be positive, got $partitions")
    private val stores = scala.collection.mutable.ArrayBuffer.empty[StoreJob]

    def rowKeyRecipe(
        keySchemaJson: String,
        valueSchemaJson: String,
        prefixKeyColumns: Int,
        partitionKeyColumns: Int
    ): PlacementRecipe =
      RowKeyRecipe(keySchemaJson, valueSchemaJson, prefixKeyColumns, partitionKeyColumns, partitions)

    def twsRecipe(
        operatorName: String,
        storeName: String,
        schemaFiles: String,
        operatorPropertiesJson: String,
        encodingFormat: String
    ): PlacementRecipe =
      TwsRecipe(operatorName, storeName, schemaFiles, operatorPropertiesJson, encodingFormat, partitions)

    /** Adds a store: `sources` one old partition a line, `partition version uniqueId dir` (as
      * `CheckpointTools.repartitionStore` takes them). Its placement is built here once, so a store that
      * cannot be placed is refused before any task runs.
      */
    def store(
        spark: SparkSession,
        operatorDir: String,
        operatorId: Long,
        storeName: String,
        sources: String,
        emptyVersion: Long,
        recipe: PlacementRecipe
    ): Unit = {
      recipe.build(spark.sessionState.newHadoopConf())
      val parsed = RepartitionSource.parseLines(sources)
      add(
        RepartitionWriter(operatorId, storeName, operatorDir, parsed, emptyVersion, recipe),
        StoreRepartitioner.groupsOf(parsed, partitions, generalPathOnly)
      )
    }

    /** Adds a store whose groups `writer` writes (a migration's: `StateMigration`). */
    def add(writer: GroupWriter, groups: Seq[RepartitionGroup]): Unit = {
      require(
        groups.flatMap(_.newPartitions).sorted == (0 until partitions),
        s"operator ${writer.operatorId} store ${writer.storeName}: the groups do not cover each of the " +
          s"$partitions new partitions once"
      )
      stores += StoreJob(writer, groups)
    }

    /** Runs every group of every store as one task of one job; JSON: per store (in the order added) its new
      * unique IDs by new partition, rows read and per-partition rows, and per task where it ran. `failAt`:
      * null, or [[TaskAfterWrite]] (tests only).
      */
    def run(spark: SparkSession, failAt: String): String = {
      require(failAt == null || failAt == TaskAfterWrite, s"unknown step '$failAt'; steps: $TaskAfterWrite")
      val results = RepartitionJob.run(spark, stores.toSeq, partitions, failAt != null)
      val byStore = results.groupBy(_.task.store)
      val perStore = stores.indices.map { i =>
        val store = stores(i)
        val mine = byStore.getOrElse(i, Nil).sortBy(_.task.group)
        val r = StoreRepartitioner.combine(
          partitions,
          store.groups,
          mine.map(g =>
            StoreRepartitioner.Result(g.uniqueIds, g.rowsPerPartition.sum, g.rowsPerPartition, g.phasesMs)
          )
        )
        obj(
          "operatorId" -> store.writer.operatorId,
          "storeName" -> store.writer.storeName,
          "uniqueIds" -> strs(r.uniqueIds),
          "rowsRead" -> r.rowsRead,
          "rowsPerPartition" -> arr(r.rowsPerPartition.map(Num)),
          "groups" -> store.groups.size,
          "phasesMs" -> Obj(r.phasesMs.toSeq.sortBy(_._1).map { case (k, v) => k -> (Num(v): Json) })
        )
      }
      val tasks = results.sortBy(r => (r.task.store, r.task.group)).map { r =>
        obj(
          "store" -> r.task.store,
          "group" -> r.task.group,
          "newPartitions" -> arr(stores(r.task.store).groups(r.task.group).newPartitions.map(p => Num(p))),
          "executor" -> r.executorId,
          "attempt" -> r.attempt,
          "rows" -> r.rowsPerPartition.sum,
          "ms" -> r.ms
        )
      }
      obj("stores" -> arr(perStore), "tasks" -> arr(tasks)).render
    }
  }

  def builder(partitions: Int, generalPathOnly: Boolean): Builder = new Builder(partitions, generalPathOnly)

  /** One task per group of every store, all in one job (the scheduler spreads them over the executors'
    * cores); the results as the driver received them, one per task.
    */
  def run(
      spark: SparkSession,
      stores: Seq[StoreJob],
      partitions: Int,
      failFirstAttemptAfterWrite: Boolean
  ): Seq[GroupResult] = {
    val tasks = stores.zipWithIndex.flatMap { case (s, i) => s.groups.indices.map(g => GroupTask(i, g)) }
    if (tasks.isEmpty) return Nil
    val sc = spark.sparkContext
    val conf = sc.broadcast(new SerializableConfiguration(spark.sessionState.newHadoopConf()))
    val plan = sc.broadcast(stores)
    sc.setJobDescription(
      s"lineagestore repartition: ${stores.size} stores into $partitions partitions, ${tasks.size} tasks"
    )
    try
      sc.parallelize(tasks, tasks.size)
        .map(t =>
          rewrite(plan.value(t.store), t, conf.value.value, failFirstAttemptAfterWrite && t == tasks.head)
        )
        .collect()
        .toSeq
    finally {
      sc.setJobDescription(null)
      conf.destroy()
      plan.destroy()
    }
  }

  /** In the task: writes group `task.group` of `store` into a scratch directory under the executor's local
    * directories (where Spark keeps its shuffle files), which the writer deletes after.
    */
  private def rewrite(
      store: StoreJob,
      task: GroupTask,
      conf: Configuration,
      failAfterWrite: Boolean
  ): GroupResult = {
    val t0 = System.nanoTime()
    val scratchRoot = new File(Utils.getLocalDir(SparkEnv.get.conf))
    val r = store.writer.write(store.groups(task.group), conf, scratchRoot)
    val ctx = TaskContext.get()
    val attempt = if (ctx == null) 0 else ctx.attemptNumber()
    if (failAfterWrite && attempt == 0)
      throw new IllegalStateException(
        s"injected failure at $TaskAfterWrite (store ${store.writer.storeName})"
      )
    GroupResult(
      task,
      r.uniqueIds,
      r.rowsPerPartition,
      r.phasesMs,
      SparkEnv.get.executorId,
      attempt,
      (System.nanoTime() - t0) / 1000000
    )
  }
}

package io.lineagestore.spark.adjunct

import java.nio.charset.StandardCharsets.UTF_8
import java.security.MessageDigest

import scala.jdk.CollectionConverters._

import org.apache.hadoop.fs.Path
import org.apache.spark.TaskContext
import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{BoundReference, JoinedRow, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.execution.streaming.state.lineagestore.{InternalFrames, SparkKeyPlacement}
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.Platform

import io.lineagestore.adjunct.{AdjunctCommit, AdjunctRetention, AdjunctTableLog}
import io.lineagestore.config.LineageConf
import io.lineagestore.storage.HadoopBlobStore

/** Looks events up in an adjunct table on the executors (docs/adjunct-tables.md "Look up"): a JVM operator
  * over the events' internal rows, reading each executor's shared replica ([[AdjunctReplicas]]) at one
  * version the driver chose; of a partitioned table, task p reads partition p's replica and the events must
  * be partitioned like the table (checked). Left-join semantics: an event whose key is absent (or deleted, or
  * null) gets nulls in the value columns.
  */
object AdjunctLookup {

  /** `events` with the table's value columns, at table `version` (latest when negative). `on`: the events'
    * columns matching the table's key columns, in order (empty: the table's key names).
    */
  def lookup(events: DataFrame, path: String, on: java.util.List[String], version: Long): DataFrame = {
    val spark = events.sparkSession
    val confEntries = AdjunctTable.confEntries(spark)
    val table = new AdjunctTable(path, AdjunctTable.confOf(confEntries))
    val schema = table.schema
    val commit = table.resolve(version)
    val onCols = if (on.isEmpty) schema.keys.fieldNames.toSeq else on.asScala.toSeq
    val keyOrdinals = checkKeys(events.schema, path, schema, onCols)
    val clash = (schema.values.fieldNames ++ Seq(HiddenOrdering, HiddenDeleted))
      .filter(events.schema.fieldNames.contains)
    if (clash.nonEmpty)
      throw new AdjunctTableException(
        s"adjunct table $path: the events already have column(s) ${clash.mkString(", ")} that the lookup adds; " +
          "rename them in the events first"
      )
    val eventSchema = events.schema
    val stored = schema.stored
    val nValues = schema.values.length
    // The operator's rows are the event joined with the stored row (ordering, deleted, values...) as it is,
    // under two internal names dropped right after: the one projection left is the scan's over this RDD,
    // inside whole-stage code generation and fused with the drop, which reads only the columns kept. (A
    // projection of our own here, then the scan's, copied every row twice.)
    val hidden = Seq(HiddenOrdering, HiddenDeleted)
    val rowSchema = StructType(
      eventSchema.fields ++ hidden.zip(stored.fields.take(2)).map { case (name, f) =>
        f.copy(name = name, nullable = true)
      } ++ schema.values.fields.map(_.copy(nullable = true))
    )
    val n = table.partitions
    val keyFields = schema.keys.fields.toSeq
    // partitioned: task p reads partition p's store only, so its events must be the keys placed in p. Checked
    // on the plan before anything runs, where the plan says how the events are partitioned; on the partition
    // count they run with; and per event, with the placement the table was written with (the only check when
    // the plan does not say, as in a stateless streaming query's foreachBatch: see PlanPartitioning.Unknown)
    val verdict = if (n == 1) PlanPartitioning.Matches else PlanPartitioning.verdict(events, onCols, n)
    verdict match {
      case PlanPartitioning.Differs(how) => throw notPartitionedLike(path, n, onCols, how)
      case _                             =>
    }
    val input = InternalFrames.rowsOf(events)
    if (n > 1 && input.getNumPartitions != n)
      throw notPartitionedLike(
        path,
        n,
        onCols,
        if (verdict == PlanPartitioning.Matches)
          s"hash-partitioned on those columns but run in ${input.getNumPartitions} partitions (adaptive query " +
            "execution coalesced their shuffle; it never coalesces an explicit repartition(n, ...))"
        else s"in ${input.getNumPartitions} partitions"
      )
    val stores = (0 until n).map(p => (table.storePathOf(p), commit.storeCheckpoint(p)))
    // fetched once per executor, not deserialized with every task; only a replica's first opening reads it
    val conf = spark.sparkContext.broadcast(confEntries)
    val batchSize = LookupBatch
    val rows = input.mapPartitionsWithIndex { (partition, it) =>
      val p = if (n == 1) 0 else partition
      val (storePath, id) = stores(p)
      // opened at the first event with a key: a task with none (an empty partition) loads no replica
      lazy val store = {
        val replica = AdjunctReplicas.replica(storePath, conf.value, if (n == 1) -1 else p)
        val held = replica.acquire(id)
        TaskContext.get().addTaskCompletionListener[Unit](_ => replica.release())
        held
      }
      val placement = if (n == 1) null else SparkKeyPlacement.partitionIdOf(keyFields, n)
      val keyProj = UnsafeProjection.create(keyOrdinals.toSeq.map { i =>
        BoundReference(i, eventSchema(i).dataType, eventSchema(i).nullable)
      })
      def keyOf(event: InternalRow): Array[Byte] = {
        val key = keyProj(event)
        if (placement != null) {
          val placed = placement.eval(key).asInstanceOf[Int]
          if (placed != p)
            throw notPartitionedLike(
              path,
              n,
              onCols,
              s"not placed like it: an event with key (${key.toSeq(schema.keys).mkString(", ")}) is in " +
                s"partition $p, where Spark's hash of the key columns places it in $placed"
            )
        }
        // a fresh array per key, as the batch holds them all: getBytes returns the projection's own buffer
        // (the same array for every event) when the row fills it exactly
        val bytes = new Array[Byte](key.getSizeInBytes)
        key.writeToMemory(bytes, Platform.BYTE_ARRAY_OFFSET)
        bytes
      }
      new LookupBatches(it, batchSize, keyOrdinals, keyOf, keys => store.getMany(1, keys), 2 + nValues)
    }
    InternalFrames.of(spark, rows, rowSchema).drop(hidden: _*)
  }

  /** Events looked up together, in one RocksDB `MultiGet` (docs/benchmarks.md "Adjunct tables": one JNI `get`
    * per event was the largest item of a lookup task).
    */
  private val LookupBatch = 4096

  // the stored row's ordering and deleted columns, in the operator's rows until the lookup drops them
  private val HiddenOrdering = "__lineagestore_adjunct_ordering"
  private val HiddenDeleted = "__lineagestore_adjunct_deleted"

  /** The table's live rows at `version` (latest when negative), read in one task per partition from the
    * replicas.
    */
  def read(spark: SparkSession, path: String, version: Long): DataFrame = {
    val confEntries = AdjunctTable.confEntries(spark)
    val table = new AdjunctTable(path, AdjunctTable.confOf(confEntries))
    val schema = table.schema
    val commit = table.resolve(version)
    val n = table.partitions
    val stores = (0 until n).map(p => (table.storePathOf(p), commit.storeCheckpoint(p)))
    val keys = schema.keys
    val stored = schema.stored
    val nValues = schema.values.length
    // one task per partition, each reading its partition's replica
    val rows = spark.sparkContext.parallelize(0 until n, n).mapPartitions { ps =>
      val p = ps.next()
      val (storePath, id) = stores(p)
      val replica = AdjunctReplicas.replica(storePath, confEntries, if (n == 1) -1 else p)
      val store = replica.acquire(id)
      val scan = store.scan(1, Array.emptyByteArray, null)
      TaskContext.get().addTaskCompletionListener[Unit] { _ => scan.close(); replica.release() }
      val outProj = UnsafeProjection.create(
        keys.fields.toSeq.zipWithIndex.map { case (f, i) => BoundReference(i, f.dataType, f.nullable) } ++
          (0 until nValues)
            .map(j => BoundReference(keys.length + 2 + j, stored(2 + j).dataType, nullable = true))
      )
      val k = new UnsafeRow(keys.length)
      val v = new UnsafeRow(2 + nValues)
      val joined = new JoinedRow()
      scan.flatMap { case (kb, vb) =>
        v.pointTo(vb, vb.length)
        if (v.getBoolean(1)) None
        else {
          k.pointTo(kb, kb.length)
          Some(outProj(joined(k, v)).copy(): InternalRow)
        }
      }
    }
    InternalFrames.of(
      spark,
      rows,
      StructType(keys.fields ++ schema.values.fields.map(_.copy(nullable = true)))
    )
  }

  /** The version micro-batch `batchId` of the enriching query at `checkpoint` sees: the one recorded for it,
    * or (first run of the batch) the table's latest, recorded before it is used, so a re-run sees the same.
    */
  def versionForBatch(spark: SparkSession, path: String, checkpoint: String, batchId: Long): Long = {
    val conf = spark.sparkContext.hadoopConfiguration
    val table = new AdjunctTable(path, conf)
    val records = versionRecords(spark, path, checkpoint)
    val name = batchId.toString
    if (records.exists(name)) {
      val in = records.open(name)
      val text =
        try new String(in.readAllBytes(), UTF_8)
        finally in.close()
      AdjunctTableLog.parse(text)("version").toLong
    } else {
      val v = table.resolve(-1).version
      records.write(name)(_.write(s"table=$path\nversion=$v\n".getBytes(UTF_8)))
      val keep = spark.conf.get(MinBatchesToRetain, "100").toInt
      if (AdjunctRetention.sweepsAt(batchId, keep)) sweepVersionRecords(records, batchId, keep)
      v
    }
  }

  private val MinBatchesToRetain = "spark.sql.streaming.minBatchesToRetain"

  /** Deletes the version records no run of the enriching query can read again
    * ([[AdjunctRetention.expiredBatchRecords]]), every `keep` batches. Best effort: a record left behind is
    * one tiny file, and the batch has its version.
    */
  private def sweepVersionRecords(records: HadoopBlobStore, running: Long, keep: Int): Unit =
    try {
      val recorded = records.list("").flatMap(_.name.toLongOption)
      AdjunctRetention.expiredBatchRecords(recorded, running, keep).foreach(b => records.delete(b.toString))
    } catch {
      case scala.util.control.NonFatal(e) =>
        org.slf4j.LoggerFactory
          .getLogger(getClass)
          .warn(s"adjunct version records under ${records.locate("")}: could not sweep old ones: $e")
    }

  /** Whether micro-batch `batchId` of the enriching query at `checkpoint` already has its version recorded.
    */
  def hasRecordedVersion(spark: SparkSession, path: String, checkpoint: String, batchId: Long): Boolean =
    versionRecords(spark, path, checkpoint).exists(batchId.toString)

  private def versionRecords(spark: SparkSession, path: String, checkpoint: String): HadoopBlobStore =
    new HadoopBlobStore(
      new Path(new Path(checkpoint, "adjunct"), tableKey(path)),
      spark.sparkContext.hadoopConfiguration,
      LineageConf.DeltaUploadPartBytes.default
    )

  def tableKey(path: String): String =
    MessageDigest.getInstance("SHA-256").digest(path.getBytes(UTF_8)).take(8).map("%02x".format(_)).mkString

  /** The listed versions of the table (for Python's `versions`, as rows of version, uniqueId, batch). */
  def versions(spark: SparkSession, path: String): java.util.List[String] = {
    val table = new AdjunctTable(path, spark.sparkContext.hadoopConfiguration)
    table.schema
    table.log.commits().map((c: AdjunctCommit) => s"${c.version}\t${c.uniqueId}\t${c.sourceBatchId}").asJava
  }

  /** The stats of the replica of `path`'s partition `partition` held by this JVM (the driver's in local mode:
    * tests), empty if none.
    */
  def localReplicaStats(
      spark: SparkSession,
      path: String,
      partition: Int
  ): java.util.Map[String, java.lang.Long] = {
    val table = new AdjunctTable(path, spark.sparkContext.hadoopConfiguration)
    AdjunctReplicas
      .existing(table.storePathOf(partition))
      .fold(Map.empty[String, Long])(_.stats)
      .map { case (k, v) => k -> java.lang.Long.valueOf(v) }
      .asJava
  }

  private def notPartitionedLike(path: String, n: Int, on: Seq[String], how: String) = {
    val cols = on.map(c => s"'$c'").mkString(", ")
    new AdjunctTableException(
      s"adjunct table $path is partitioned into $n partitions by its key columns, but the events are $how. A " +
        s"partitioned lookup reads partition p of the table in the task of the events' partition p, so the " +
        s"events must be hash-partitioned on ($cols) into $n partitions: repartition them " +
        s"(events.repartition($n, $cols)), or look them up after a stateful operator whose shuffle is on " +
        s"those columns with spark.sql.shuffle.partitions=$n; or maintain the table without partitions " +
        "(broadcast lookup: every task reads the whole table)."
    )
  }

  private def checkKeys(
      events: StructType,
      path: String,
      table: AdjunctSchema,
      on: Seq[String]
  ): Array[Int] = {
    if (on.length != table.keys.length)
      throw new AdjunctTableException(
        s"adjunct table $path has key columns ${table.keys.toDDL}; name ${table.keys.length} event column(s) " +
          s"to match them, not ${on.mkString(", ")}"
      )
    on.zip(table.keys.fields)
      .map { case (name, key) =>
        val i = events.fieldNames.indexOf(name)
        if (i < 0)
          throw new AdjunctTableException(
            s"adjunct table $path: the events have no key column '$name' (their columns: " +
              s"${events.fieldNames.mkString(", ")})"
          )
        if (!AdjunctSchema.sameType(events(i).dataType, key.dataType))
          throw new AdjunctTableException(
            s"adjunct table $path: event column '$name' is ${events(i).dataType.simpleString} but the table's key " +
              s"'${key.name}' is ${key.dataType.simpleString}; cast it (col('$name').cast('${key.dataType.simpleString}'))"
          )
        i
      }
      .toArray
  }
}

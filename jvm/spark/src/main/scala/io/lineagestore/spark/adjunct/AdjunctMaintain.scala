package io.lineagestore.spark.adjunct

import java.util.UUID

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.spark.sql.{functions => F, DataFrame}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{
  BoundReference,
  GenericInternalRow,
  UnsafeProjection,
  UnsafeRow
}
import org.apache.spark.sql.types._

import org.apache.spark.rdd.RDD

import io.lineagestore.adjunct.{AdjunctRetention, MaintainRecord, ReplicaMark, TombstoneRetention}
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.store.{CrashPoints, InjectedFaults}
import org.apache.spark.sql.execution.streaming.state.lineagestore.{InternalFrames, SparkKeyPlacement}

/** Maintains an adjunct table from one micro-batch of changes (called from foreachBatch; see
  * docs/adjunct-tables.md "Maintain"): one committed table version per batch, idempotent on a re-run.
  */
object AdjunctMaintain {
  val Ops: Set[String] = Set("upsert", "insert", "update", "delete")
  val IntegralOrderings: Set[DataType] = Set(LongType, IntegerType, ShortType, TimestampType, DateType)

  /** A change ready for the store: key and stored value as UnsafeRow bytes; `badOp` names an unknown op. */
  final case class Change(key: Array[Byte], ordering: Long, value: Array[Byte], badOp: String)

  /** Applies `batch` and commits; returns the table version the batch's changes are in. `partitions`: the
    * number of stores a new table places its keys in (0: the table's, or 1 for a new table).
    * `tombstoneRetention`: a new table's bound on its tombstones, in ordering units (null: the table's, or
    * kept for ever for a new table; [[TombstoneRetention]]).
    */
  def maintainBatch(
      batch: DataFrame,
      batchId: Long,
      path: String,
      keys: java.util.List[String],
      ordering: String,
      op: String,
      source: String,
      retainVersions: Int,
      partitions: Int,
      tombstoneRetention: java.lang.Long
  ): Long =
    commitBatch(
      batch,
      batchId,
      path,
      keys,
      ordering,
      op,
      source,
      retainVersions,
      partitions,
      replace = false,
      Option(tombstoneRetention).map(_.longValue)
    )

  /** Publishes `dataset` (key and value columns, one row per key) as generation `generation` of the table: a
    * new version holding exactly its rows, every other key deleted (docs/adjunct-tables.md "Generations").
    * Built in the partitions' stores and sealed by the table record like any version, so a reader sees the
    * previous generation or this one, whole. Its rows are stored with the smallest ordering value: a change
    * maintained into the table afterwards replaces them. A re-run of a published generation (same `source`, a
    * `generation` not above the last) does nothing.
    */
  def publishGeneration(
      dataset: DataFrame,
      generation: Long,
      path: String,
      keys: java.util.List[String],
      source: String,
      retainVersions: Int,
      partitions: Int
  ): Long = {
    Seq(GenerationOrdering, GenerationOp).filter(dataset.columns.contains).foreach { c =>
      throw new AdjunctTableException(s"adjunct table $path: the dataset has a column '$c'; rename it")
    }
    val asChanges = dataset
      .withColumn(GenerationOp, F.lit("upsert"))
      .withColumn(GenerationOrdering, F.lit(Long.MinValue))
    commitBatch(
      asChanges,
      generation,
      path,
      keys,
      GenerationOrdering,
      GenerationOp,
      source,
      retainVersions,
      partitions,
      replace = true,
      None
    )
  }

  private val GenerationOrdering = "__lineagestore_generation_ordering"
  private val GenerationOp = "__lineagestore_generation_op"

  /** `replace`: the batch is the table's whole content (a generation), not changes to it. */
  private def commitBatch(
      batch: DataFrame,
      batchId: Long,
      path: String,
      keys: java.util.List[String],
      ordering: String,
      op: String,
      source: String,
      retainVersions: Int,
      partitions: Int,
      replace: Boolean,
      tombstoneRetention: Option[Long]
  ): Long = {
    val spark = batch.sparkSession
    val confEntries = AdjunctTable.confEntries(spark)
    val table = new AdjunctTable(path, AdjunctTable.confOf(confEntries))
    val schema = schemaOf(batch, path, keys.asScala.toSeq, ordering, op)
    if (partitions < 0)
      throw new AdjunctTableException(s"adjunct table $path: partitions must be positive, not $partitions")
    def retentionOf(kept: Option[Long], created: Boolean) =
      try TombstoneRetention.settle(path, tombstoneRetention, kept, created)
      catch { case e: IllegalArgumentException => throw new AdjunctTableException(e.getMessage) }
    var retention: Option[Long] = None
    val n = table.log.readMeta() match {
      case Some(m) =>
        checkSame(path, AdjunctSchema.fromMeta(m), schema)
        retention = retentionOf(TombstoneRetention.of(m, path), created = false)
        val kept = AdjunctTable.partitionsOf(m)
        if (partitions > 0 && partitions != kept)
          throw new AdjunctTableException(
            s"adjunct table $path has $kept partition(s), but maintain was given partitions=$partitions; " +
              s"nothing was committed. Pass partitions=$kept (or none: the table's), or maintain a new table " +
              "at another path: a table's keys stay where its first version placed them."
          )
        kept
      case None =>
        if (table.log.latest().isEmpty) {
          val fs = new org.apache.hadoop.fs.Path(path).getFileSystem(AdjunctTable.confOf(confEntries))
          if (fs.exists(new org.apache.hadoop.fs.Path(path, "offsets"))) throw table.noTable()
        }
        val created = math.max(partitions, 1)
        retention = retentionOf(None, created = true)
        table.log.writeMeta(
          schema.toMeta(created) ++ retention.map(r => TombstoneRetention.MetaKey -> r.toString)
        )
        created
    }
    val latest = table.log.latest()
    latest.filter(c => c.source == source && c.sourceBatchId >= batchId) match {
      case Some(done) => return done.version // a re-run of a batch already committed: nothing to do
      case None       =>
    }
    val packed = reduced(batch, schema, ordering, op, n)
    // each partition's store the batch changes is committed by its task on an executor (its snapshots
    // uploaded) before the table record: a crash in between leaves deltas no record names, which no reader
    // loads; two attempts of one task leave two children of the same parent, of which the record names one
    val parents = (0 until n).map(p => p -> latest.fold(CheckpointId.Empty)(_.storeCheckpoint(p))).toMap
    val results = MaintainTasks.run(
      path,
      (0 until n).map(table.storePathOf),
      packed,
      parents,
      op,
      confEntries,
      retainVersions,
      replace,
      // the floor comes from the record this batch builds on: a re-run or a second attempt uses the same
      retention.map(_ => MaintainTasks.Tombstones(TombstoneRetention.floor(retention, latest)))
    )
    InjectedFaults.fromConfs(confEntries).at(CrashPoints.AdjunctBeforeRecord)
    val record = MaintainRecord
      .record(
        path,
        latest,
        n,
        results.map(r => r.partition -> r.checkpoint),
        source,
        batchId,
        () => UUID.randomUUID().toString
      )
      .copy(tombstones = retention.map { _ =>
        TombstoneRetention.stats(
          latest,
          results.map(_.highestOrdering),
          results.map(_.purged).sum,
          results.map(_.refusedLate).sum
        )
      })
    val refused = results.map(_.refusedLate).sum
    if (refused > 0)
      log.warn(
        s"adjunct table $path: version ${record.version} refused $refused late change(s) at or below the " +
          s"tombstone floor (ordering <= ${TombstoneRetention.floor(retention, latest).getOrElse("?")}, the " +
          s"table keeps tombstones for ${retention.getOrElse("?")} ordering units): their keys' tombstones may " +
          "be purged, so applying them could bring deleted keys back (docs/adjunct-tables.md)"
      )
    table.log.write(record)
    MaintainTasks.recorded(path, results)
    // records first, then files: a record never names a checkpoint clean-up may have deleted
    table.log
      .versions()
      .filter(_ <= record.version - retainVersions)
      .foreach(table.log.delete)
    if (AdjunctRetention.sweepsAt(record.version, retainVersions)) sweepReplicaMarkers(table, n)
    record.version
  }

  /** Deletes the replica markers no kept version names ([[AdjunctRetention.staleMarkers]]), every
    * `retainVersions` versions (it reads every record and marker). Best effort: markers are reports, and the
    * version is committed.
    */
  private def sweepReplicaMarkers(table: AdjunctTable, n: Int): Unit =
    try {
      val named = table.log
        .commits()
        .flatMap { c =>
          if (n == 1) Seq(-1 -> c.storeCheckpoint(0)) else (0 until n).map(p => p -> c.storeCheckpoint(p))
        }
        .toSet
      AdjunctRetention
        .staleMarkers[(String, ReplicaMark)](
          table.log.replicaMarkers(),
          { case (_, m) => m.partition -> CheckpointId(m.version, m.uniqueId) },
          named
        )
        .foreach { case (name, _) => table.log.deleteReplicaMarker(name) }
    } catch {
      case NonFatal(e) => log.warn(s"adjunct table ${table.path}: could not sweep stale replica markers: $e")
    }

  private val log = org.slf4j.LoggerFactory.getLogger(getClass)

  def orderingOf(stored: Array[Byte]): Long = {
    val r = new UnsafeRow(2)
    r.pointTo(stored, stored.length)
    r.getLong(0)
  }

  /** Whether a stored value (or a change's) is a tombstone. */
  def deletedOf(stored: Array[Byte]): Boolean = {
    val r = new UnsafeRow(2)
    r.pointTo(stored, stored.length)
    r.getBoolean(1)
  }

  /** The batch's changes reduced to the newest per key (ties: a delete wins, so the result is deterministic),
    * encoded for the store, packed per partition each key is placed in (for [[MaintainTasks]] to shuffle to
    * that partition's task): Spark's own shuffle placement of the key columns among `partitions`
    * ([[SparkKeyPlacement.partitionIdOf]]), the one a lookup's events partitioned like the table have.
    *
    * Each task sorts its changes by key (the store's bytewise order: a maintain task's writes then walk
    * RocksDB and the batch's pending writes in order) and sends them as one packed byte array per partition
    * ([[ChangePacking]]): Java serialization of a million small objects, not the store, was most of a first
    * build's cost (profiled, docs/benchmarks.md).
    */
  private def reduced(
      batch: DataFrame,
      schema: AdjunctSchema,
      ordering: String,
      op: String,
      partitions: Int
  ): RDD[(Int, Array[Byte])] = {
    val keyCols = schema.keys.fieldNames.map(F.col)
    val isDelete = F.lower(F.col(op)) === "delete"
    val badOp =
      F.when(!F.lower(F.col(op)).isin(Ops.toSeq: _*) || F.col(op).isNull, F.col(op).cast(StringType))
    val orderingLong = F.col(ordering).cast(LongType) // integral types only (checked): no precision lost
    val change = F.struct(
      (orderingLong.as("o") +: isDelete.as("d") +: badOp.as("bad") +:
        schema.values.fieldNames.map(n => F.col(n).as(n))).toSeq: _*
    )
    val perKey = batch
      .groupBy(keyCols.toSeq: _*)
      .agg(F.max_by(change, F.struct(orderingLong, isDelete)).as("c"))
      .select((keyCols :+ F.col("c")).toSeq: _*)
    val keySchema = schema.keys
    val stored = schema.stored
    val nKeys = keySchema.length
    val nValues = schema.values.length
    val packed = InternalFrames.rowsOf(perKey).mapPartitions { rows =>
      val keyProj = UnsafeProjection.create(keySchema.fields.toSeq.zipWithIndex.map { case (f, i) =>
        BoundReference(i, f.dataType, f.nullable)
      })
      val valueProj = UnsafeProjection.create(stored)
      val placement =
        if (partitions == 1) null else SparkKeyPlacement.partitionIdOf(keySchema.fields.toSeq, partitions)
      val values = new Array[Any](2 + nValues)
      val valueRow = new GenericInternalRow(values)
      val changes = rows.map { row =>
        val c = row.getStruct(nKeys, 3 + nValues)
        val deleted = c.getBoolean(1)
        values(0) = c.getLong(0)
        values(1) = deleted
        for (i <- 0 until nValues)
          values(2 + i) = if (deleted) null else c.get(3 + i, stored.fields(2 + i).dataType)
        val v = valueProj(valueRow)
        val key = keyProj(row)
        val p = if (placement == null) 0 else placement.eval(key).asInstanceOf[Int]
        p -> Change(
          key.copy().getBytes, // getBytes may return the projection's reused buffer
          c.getLong(0),
          v.copy().getBytes,
          if (c.isNullAt(2)) null else c.getUTF8String(2).toString
        )
      }.toArray
      changes.groupBy(_._1).iterator.map { case (p, placed) =>
        val inPartition = placed.map(_._2)
        java.util.Arrays.sort(inPartition, ChangePacking.ByKey)
        p -> ChangePacking.pack(inPartition)
      }
    }
    packed
  }

  /** Checks the change stream's columns; the values are every other column. */
  private def schemaOf(
      batch: DataFrame,
      path: String,
      keys: Seq[String],
      ordering: String,
      op: String
  ): AdjunctSchema = {
    val fields = batch.schema.fields.map(f => f.name -> f).toMap
    def need(name: String, what: String) = fields.getOrElse(
      name,
      throw new AdjunctTableException(
        s"adjunct table $path: the change stream has no $what column '$name' (its columns: " +
          s"${batch.schema.fieldNames.mkString(", ")}); add it or name the right one"
      )
    )
    if (keys.isEmpty) throw new AdjunctTableException(s"adjunct table $path: name at least one key column")
    val keyFields = keys.map(need(_, "key"))
    val o = need(ordering, "ordering")
    if (!IntegralOrderings.contains(o.dataType))
      throw new AdjunctTableException(
        s"adjunct table $path: ordering column '$ordering' is ${o.dataType.simpleString}; it must be an " +
          "integral sequence (long, int, short, timestamp, date): cast a sortable LSN or commit time to long"
      )
    val opField = need(op, "operation")
    if (opField.dataType != StringType)
      throw new AdjunctTableException(s"adjunct table $path: operation column '$op' must be a string")
    val taken = (keys :+ ordering :+ op).toSet
    AdjunctSchema(StructType(keyFields), StructType(batch.schema.fields.filterNot(f => taken(f.name))))
  }

  private def checkSame(path: String, table: AdjunctSchema, batch: AdjunctSchema): Unit =
    if (
      table.keys.length != batch.keys.length || table.values.length != batch.values.length ||
      !(table.keys.fields ++ table.values.fields).zip(batch.keys.fields ++ batch.values.fields).forall {
        case (a, b) => a.name == b.name && AdjunctSchema.sameType(a.dataType, b.dataType)
      }
    )
      throw new AdjunctTableException(
        s"adjunct table $path has keys ${table.keys.toDDL} and values ${table.values.toDDL}, but the change " +
          s"stream gives keys ${batch.keys.toDDL} and values ${batch.values.toDDL}; nothing was committed. " +
          "Select the table's columns, or maintain a new table at another path."
      )
}

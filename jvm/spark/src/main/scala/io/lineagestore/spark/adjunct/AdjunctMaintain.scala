package io.lineagestore.spark.adjunct

import java.util.UUID

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.{functions => F, DataFrame}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{
  BoundReference,
  GenericInternalRow,
  UnsafeProjection,
  UnsafeRow
}
import org.apache.spark.sql.types._

import io.lineagestore.format.AdjunctCommit
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.store.LineageStore
import org.apache.spark.sql.execution.streaming.state.lineagestore.InternalFrames

/** Maintains an adjunct table from one micro-batch of changes (called from foreachBatch; see
  * docs/adjunct-tables.md "Maintain"): one committed table version per batch, idempotent on a re-run.
  */
object AdjunctMaintain {
  val Ops: Set[String] = Set("upsert", "insert", "update", "delete")
  val IntegralOrderings: Set[DataType] = Set(LongType, IntegerType, ShortType, TimestampType, DateType)

  /** A change ready for the store: key and stored value as UnsafeRow bytes; `badOp` names an unknown op. */
  final case class Change(key: Array[Byte], ordering: Long, value: Array[Byte], badOp: String)

  /** Applies `batch` and commits; returns the table version the batch's changes are in. */
  def maintainBatch(
      batch: DataFrame,
      batchId: Long,
      path: String,
      keys: java.util.List[String],
      ordering: String,
      op: String,
      source: String,
      retainVersions: Int
  ): Long = {
    val spark = batch.sparkSession
    val confEntries = AdjunctTable.confEntries(spark.sparkContext.hadoopConfiguration)
    val table = new AdjunctTable(path, AdjunctTable.confOf(confEntries))
    val schema = schemaOf(batch, path, keys.asScala.toSeq, ordering, op)
    table.log.readMeta() match {
      case Some(m) => checkSame(path, AdjunctSchema.fromMeta(m), schema)
      case None    =>
        if (table.log.latest().isEmpty) {
          val fs = new org.apache.hadoop.fs.Path(path).getFileSystem(AdjunctTable.confOf(confEntries))
          if (fs.exists(new org.apache.hadoop.fs.Path(path, "offsets"))) throw table.noTable()
        }
        table.log.writeMeta(schema.toMeta)
    }
    val latest = table.log.latest()
    latest.filter(c => c.source == source && c.sourceBatchId >= batchId) match {
      case Some(done) => return done.version // a re-run of a batch already committed: nothing to do
      case None       =>
    }
    val changes = reduced(batch, schema, ordering, op)
    val local = new AdjunctLocalStore(table.storePath, confEntries, "writer", retainVersions)
    try {
      val store = local.store
      local.load(latest.map(AdjunctTable.checkpointOf).getOrElse(CheckpointId.Empty))
      // the table's first version starts from nothing: no stored ordering to compare with (each key once)
      val first = latest.isEmpty
      try changes.foreach(c => apply(store, c, path, op, first))
      catch { case t: Throwable => store.abort(); throw t }
      val id = store.commit(UUID.randomUUID().toString)
      store.uploadSnapshots()
      table.log.write(AdjunctCommit(id.version, id.uniqueId, source, batchId))
      // records first, then files: a record never names a checkpoint clean-up may have deleted
      table.log
        .versions()
        .filter(_ <= id.version - retainVersions)
        .foreach(table.log.delete)
      store.cleanup()
      id.version
    } finally local.close()
  }

  private def apply(store: LineageStore, c: Change, path: String, op: String, first: Boolean): Unit = {
    if (c.badOp != null)
      throw new AdjunctTableException(
        s"adjunct table $path: change with $op '${c.badOp}' is neither of ${Ops.mkString(", ")}; nothing " +
          "of this batch was committed. Map the source's operation codes to these (e.g. Debezium c/u/r -> " +
          "upsert, d -> delete) before maintain."
      )
    val stored = if (first) null else store.get(1, c.key)
    // the stored change (live row or tombstone) wins unless this one is newer: late changes are ignored
    if (stored == null || orderingOf(stored) < c.ordering) store.put(1, c.key, c.value)
  }

  def orderingOf(stored: Array[Byte]): Long = {
    val r = new UnsafeRow(2)
    r.pointTo(stored, stored.length)
    r.getLong(0)
  }

  /** The batch's changes reduced to the newest per key (ties: a delete wins, so the result is deterministic),
    * encoded for the store, collected to the driver (the changes, never the table).
    *
    * Each task sorts its changes by key (the store's bytewise order: the driver's writes then walk RocksDB
    * and the batch's pending writes in order) and sends them as one packed byte array ([[ChangePacking]]):
    * Java serialization of a million small objects, not the store, was most of a first build's cost
    * (profiled, docs/benchmarks.md).
    */
  private def reduced(
      batch: DataFrame,
      schema: AdjunctSchema,
      ordering: String,
      op: String
  ): Iterator[Change] = {
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
        Change(
          keyProj(row).copy().getBytes, // getBytes may return the projection's reused buffer
          c.getLong(0),
          v.copy().getBytes,
          if (c.isNullAt(2)) null else c.getUTF8String(2).toString
        )
      }.toArray
      java.util.Arrays.sort(changes, ChangePacking.ByKey)
      Iterator.single(ChangePacking.pack(changes))
    }
    packed.collect().iterator.flatMap(ChangePacking.unpack)
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

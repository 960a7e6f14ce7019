package org.apache.spark.sql.execution.streaming.state.lineagestore

import java.io.File

import org.apache.spark.sql.SparkSession
import java.util.UUID

import org.apache.spark.sql.execution.streaming.state.{
  NoPrefixKeyStateEncoderSpec,
  PrefixKeyScanStateEncoderSpec,
  StateStoreConf,
  StateStoreId,
  StateStoreProvider,
  StateStoreProviderId
}
import org.apache.spark.sql.execution.streaming.operators.stateful.transformwithstate.{
  StateStoreColumnFamilySchemaUtils,
  StateVariableType,
  TransformWithStateOperatorProperties
}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.{DataType, StructType}

import io.lineagestore.engine.ListMerge
import io.lineagestore.lineage.StateLayout
import io.lineagestore.store.{ColumnFamilies, CrashPoints}
import io.lineagestore.tools.Json._
import io.lineagestore.tools.StoreRepartitioner

/** Moves one store of a checkpoint written by another provider (Spark's HDFS or RocksDB provider, format
  * version 1 or 2) into lineagestore's format. Each old partition is opened read-only with that provider
  * itself (`StateStoreProvider.createAndInit`, at version `batchId + 1` and, in format version 2, the unique
  * ID the commit log names), so every row comes back exactly as the operator stored it (a join's index and
  * matched flag included, which the `statestore` data source does not show). Rows are encoded with Spark's
  * own state encoders, placed in their old partition or, for a new partition count, by Spark's
  * `HashPartitioning` over the leading `partitionKeyColumns` key columns, and written through the store
  * ([[StoreRepartitioner.write]]) at version `batchId + 2`. The rows pass through the driver, one old
  * partition at a time.
  */
object StateMigration {

  def migrateStore(
      spark: SparkSession,
      checkpoint: String,
      operatorId: Long,
      storeName: String,
      batchId: Long,
      providerClass: String,
      formatVersion: String,
      keySchemaJson: String,
      valueSchemaJson: String,
      prefixKeyColumns: Int,
      partitionKeyColumns: Int,
      oldPartitions: Int,
      oldUniqueIds: String, // one per old partition, a line each; empty in format version 1
      newPartitions: Int,
      keepPartitions: Boolean,
      operatorDir: String
  ): String = {
    val keySchema = DataType.fromJson(keySchemaJson).asInstanceOf[StructType]
    val valueSchema = DataType.fromJson(valueSchemaJson).asInstanceOf[StructType]
    val spec =
      if (prefixKeyColumns > 0) PrefixKeyScanStateEncoderSpec(keySchema, prefixKeyColumns)
      else NoPrefixKeyStateEncoderSpec(keySchema)
    val encoders = new StateEncoders(spec, valueSchema, multipleValues = false)
    val ids = uniqueIds(oldUniqueIds)
    val storeConf = oldStoreConf(spark, providerClass, formatVersion)
    val hadoopConf = spark.sessionState.newHadoopConf()
    val partitionId =
      SparkKeyPlacement.partitionIdOf(keySchema.fields.take(partitionKeyColumns).toSeq, newPartitions)
    val storeFamily = ColumnFamilies.DefaultName // the operators migrated here keep their rows there
    writeNewStores(operatorId, storeName, newPartitions, operatorDir, batchId) { sink =>
      (0 until oldPartitions).foreach { old =>
        val storeId = StateStoreId(StateLayout.stateRoot(checkpoint), operatorId, old, storeName)
        val provider = StateStoreProvider.createAndInit(
          StateStoreProviderId(storeId, UUID.randomUUID()),
          keySchema,
          valueSchema,
          spec,
          false,
          storeConf,
          hadoopConf,
          false,
          None
        )
        try {
          val store = provider.getReadStore(batchId + 1, ids.lift(old))
          try
            store.iterator().foreach { pair =>
              val p = if (keepPartitions) old else partitionId.eval(pair.key).asInstanceOf[Int]
              sink.put(p, storeFamily, encoders.encodeKey(pair.key), encoders.encodeValue(pair.value))
            }
          finally store.abort()
        } finally provider.close()
      }
    }
  }

  /** Moves one transformWithState store (every column family) of a checkpoint written by Spark's RocksDB
    * provider. Each old partition is opened read-only with that provider; each family recorded in the
    * operator's state schema file is registered on the read store (as Spark's state data source does) and
    * read whole: a ListState's family element by element (Spark keeps its list as merge operands), joined
    * back into one list value per key. Rows are re-encoded with Spark's own encoders for the family and
    * placed by [[TwsKeyPlacement]] (every family by its grouping key) unless the partition count stays.
    */
  def migrateTwsStore(
      spark: SparkSession,
      checkpoint: String,
      operatorId: Long,
      storeName: String,
      batchId: Long,
      providerClass: String,
      formatVersion: String,
      operatorName: String,
      schemaFile: String,
      operatorPropertiesJson: String,
      oldPartitions: Int,
      oldUniqueIds: String, // one per old partition, a line each; empty in format version 1
      newPartitions: Int,
      keepPartitions: Boolean,
      operatorDir: String
  ): String = {
    val hadoopConf = spark.sessionState.newHadoopConf()
    val schemas = TwsKeyPlacement
      .readSchemas(schemaFile, hadoopConf)
      .filter(_.colFamilyName != ColumnFamilies.DefaultName)
    require(schemas.nonEmpty, s"$schemaFile records no column family")
    val properties = TransformWithStateOperatorProperties.fromJson(operatorPropertiesJson)
    val lists = properties.stateVariables.filter(_.stateVariableType == StateVariableType.ListState)
    // only a ListState's own family holds several values per key (its TTL and count indexes hold one)
    def multiValued(family: String) = lists.exists(_.stateName == family)
    val placement = new TwsKeyPlacement(operatorName, storeName, schemas, properties, newPartitions)
    val families = schemas.map { s =>
      val spec = s.keyStateEncoderSpec.getOrElse(
        throw new IllegalStateException(s"$schemaFile: column family '${s.colFamilyName}' has no key encoder")
      )
      (s, spec, new StateEncoders(spec, s.valueSchema, multiValued(s.colFamilyName)))
    }
    val ids = uniqueIds(oldUniqueIds)
    val storeConf = oldStoreConf(spark, providerClass, formatVersion)
    val (first, firstSpec, _) = families.head
    writeNewStores(operatorId, storeName, newPartitions, operatorDir, batchId) { sink =>
      families.foreach { case (s, _, _) => sink.family(s.colFamilyName) }
      (0 until oldPartitions).foreach { old =>
        val storeId = StateStoreId(StateLayout.stateRoot(checkpoint), operatorId, old, storeName)
        val provider = StateStoreProvider.createAndInit(
          StateStoreProviderId(storeId, UUID.randomUUID()),
          first.keySchema,
          first.valueSchema,
          firstSpec,
          true,
          storeConf,
          hadoopConf,
          false,
          None
        )
        try {
          val store = provider.getReadStore(batchId + 1, ids.lift(old))
          try
            families.foreach { case (s, spec, enc) =>
              val name = s.colFamilyName
              val multi = multiValued(name)
              store.registerColFamily(
                name,
                s.keySchema,
                s.valueSchema,
                spec,
                multi,
                StateStoreColumnFamilySchemaUtils.isInternalColFamily(name)
              )
              val place = placement.ofFamily(name).get
              def put(k: Array[Byte], v: Array[Byte]): Unit =
                sink.put(if (keepPartitions) old else place.partitionOf(k), name, k, v)
              if (!multi)
                store
                  .iterator(name)
                  .foreach(pair => put(enc.encodeKey(pair.key), enc.encodeValue(pair.value)))
              else {
                // one pair per element, a key's elements in a row: joined back into the key's list
                var key: Array[Byte] = null
                var list: Array[Byte] = null
                store.iteratorWithMultiValues(name).foreach { pair =>
                  val (k, v) = (enc.encodeKey(pair.key), enc.encodeValue(pair.value))
                  if (key != null && java.util.Arrays.equals(key, k)) list = ListMerge(list, v)
                  else {
                    if (key != null) put(key, list)
                    key = k
                    list = v
                  }
                }
                if (key != null) put(key, list)
              }
            }
          finally store.abort()
        } finally provider.close()
      }
    }
  }

  private def uniqueIds(oldUniqueIds: String): Seq[String] = // a line per old partition; none in format 1
    Option(oldUniqueIds).getOrElse("").split("\n").toSeq.filter(_.nonEmpty)

  /** The session's state store settings with the old checkpoint's provider and format version. */
  private def oldStoreConf(
      spark: SparkSession,
      providerClass: String,
      formatVersion: String
  ): StateStoreConf = {
    val sqlConf = spark.sessionState.conf.clone()
    sqlConf.setConfString(SQLConf.STATE_STORE_PROVIDER_CLASS.key, providerClass)
    sqlConf.setConfString(SQLConf.STATE_STORE_CHECKPOINT_FORMAT_VERSION.key, formatVersion)
    new StateStoreConf(sqlConf)
  }

  /** Writes the new partitions' stores at `batchId + 2` with what `fill` puts into the sink; the result for
    * the Python side as JSON.
    */
  private def writeNewStores(
      operatorId: Long,
      storeName: String,
      newPartitions: Int,
      operatorDir: String,
      batchId: Long
  )(fill: StoreRepartitioner.RowSink => Unit): String = {
    val r = StoreRepartitioner.write(
      operatorId,
      storeName,
      newPartitions,
      p => StateLayout.storeDir(operatorDir, p, storeName),
      batchId + 1,
      CrashPoints.None,
      new File(System.getProperty("java.io.tmpdir"))
    )((_, sink) => fill(sink))
    obj(
      "uniqueIds" -> strs(r.uniqueIds),
      "rowsRead" -> r.rowsRead,
      "rowsPerPartition" -> arr(r.rowsPerPartition.map(Num))
    ).render
  }
}

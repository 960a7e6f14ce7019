package org.apache.spark.sql.execution.streaming.state.lineagestore

import java.io.File

import org.apache.spark.sql.SparkSession
import java.util.UUID

import org.apache.spark.sql.catalyst.expressions.BoundReference
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning
import org.apache.spark.sql.execution.streaming.state.{
  NoPrefixKeyStateEncoderSpec,
  PrefixKeyScanStateEncoderSpec,
  StateStoreConf,
  StateStoreId,
  StateStoreProvider,
  StateStoreProviderId
}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.{DataType, StructType}

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
    val ids = Option(oldUniqueIds).getOrElse("").split("\n").toSeq.filter(_.nonEmpty)
    val sqlConf = spark.sessionState.conf.clone()
    sqlConf.setConfString(SQLConf.STATE_STORE_PROVIDER_CLASS.key, providerClass)
    sqlConf.setConfString(SQLConf.STATE_STORE_CHECKPOINT_FORMAT_VERSION.key, formatVersion)
    val storeConf = new StateStoreConf(sqlConf)
    val hadoopConf = spark.sessionState.newHadoopConf()
    val partitionId = HashPartitioning(
      (0 until partitionKeyColumns).map(i => BoundReference(i, keySchema(i).dataType, keySchema(i).nullable)),
      newPartitions
    ).partitionIdExpression
    val suffix = if (storeName == "default") "" else s"/$storeName"
    val storeFamily = ColumnFamilies.DefaultName // the operators migrated here keep their rows there
    val r = StoreRepartitioner.write(
      operatorId,
      storeName,
      newPartitions,
      p => s"${operatorDir.stripSuffix("/")}/$p$suffix",
      batchId + 1,
      CrashPoints.None,
      new File(System.getProperty("java.io.tmpdir"))
    ) { (_, sink) =>
      (0 until oldPartitions).foreach { old =>
        val storeId = StateStoreId(s"${checkpoint.stripSuffix("/")}/state", operatorId, old, storeName)
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
    obj(
      "uniqueIds" -> strs(r.uniqueIds),
      "rowsRead" -> r.rowsRead,
      "rowsPerPartition" -> arr(r.rowsPerPartition.map(Num))
    ).render
  }
}

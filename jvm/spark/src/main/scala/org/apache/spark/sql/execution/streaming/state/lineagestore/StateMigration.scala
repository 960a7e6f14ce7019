package org.apache.spark.sql.execution.streaming.state.lineagestore

import java.io.File
import java.util.UUID

import org.apache.hadoop.conf.Configuration

import org.apache.spark.sql.SparkSession
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
import io.lineagestore.tools.{RepartitionGroup, RepartitionGroups, StoreRepartitioner}

/** Moves one store of a checkpoint written by another provider (Spark's HDFS or RocksDB provider, format
  * version 1 or 2) into lineagestore's format, as stores of a [[RepartitionJob]]: each group of new
  * partitions ([[RepartitionGroups]]: with the partition count kept, one old partition into its own new one)
  * is a task, which opens its old partitions read-only with that provider itself
  * (`StateStoreProvider.createAndInit`, at version `batchId + 1` and, in format version 2, the unique ID the
  * commit log names), so every row comes back exactly as the operator stored it (a join's index and matched
  * flag included, which the `statestore` data source does not show). Rows are encoded with Spark's own state
  * encoders, placed in their old partition or, for a new partition count, by Spark's `HashPartitioning` over
  * the leading `partitionKeyColumns` key columns, and written through the store
  * ([[StoreRepartitioner.write]]) at version `batchId + 2`.
  */
object StateMigration {

  /** For py4j: adds one store of an operator keyed by its grouping columns to `job`. */
  def migrateStore(
      job: RepartitionJob.Builder,
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
  ): Unit = {
    val old = OldStore.of(
      spark,
      checkpoint,
      operatorId,
      storeName,
      batchId,
      providerClass,
      formatVersion,
      oldUniqueIds
    )
    val target = NewStores(operatorDir, newPartitions, keepPartitions)
    val writer =
      RowStoreMigration(old, target, keySchemaJson, valueSchemaJson, prefixKeyColumns, partitionKeyColumns)
    writer.encoders // a schema Spark's encoders refuse is refused here, before any task runs
    job.add(writer, RepartitionGroups.plan(oldPartitions, newPartitions))
  }

  /** For py4j: adds one transformWithState store (every column family) of a checkpoint written by Spark's
    * RocksDB provider to `job`. Each old partition is opened read-only with that provider; each family
    * recorded in the operator's state schema file is registered on the read store (as Spark's state data
    * source does) and read whole: a ListState's family element by element (Spark keeps its list as merge
    * operands), joined back into one list value per key. Rows are re-encoded with Spark's own encoders for
    * the family and placed by [[TwsKeyPlacement]] (every family by its grouping key) unless the partition
    * count stays.
    */
  def migrateTwsStore(
      job: RepartitionJob.Builder,
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
  ): Unit = {
    val old = OldStore.of(
      spark,
      checkpoint,
      operatorId,
      storeName,
      batchId,
      providerClass,
      formatVersion,
      oldUniqueIds
    )
    val target = NewStores(operatorDir, newPartitions, keepPartitions)
    val writer = TwsStoreMigration(old, target, operatorName, schemaFile, operatorPropertiesJson)
    writer.families(spark.sessionState.newHadoopConf()) // a schema file without families: refused here
    job.add(writer, RepartitionGroups.plan(oldPartitions, newPartitions))
  }

  object OldStore {

    /** From py4j's arguments: `oldUniqueIds` one a line per old partition (none in format version 1); the
      * session's store settings with the old provider and format version.
      */
    def of(
        spark: SparkSession,
        checkpoint: String,
        operatorId: Long,
        storeName: String,
        batchId: Long,
        providerClass: String,
        formatVersion: String,
        oldUniqueIds: String
    ): OldStore = OldStore(
      checkpoint,
      operatorId,
      storeName,
      batchId,
      Option(oldUniqueIds).getOrElse("").split("\n").toSeq.filter(_.nonEmpty),
      oldStoreConf(spark, providerClass, formatVersion)
    )
  }

  /** One old store name of an operator: where it is, the committed version and unique IDs, and the old
    * provider's settings (Spark's `StateStoreConf`, serializable: Spark ships it to its own tasks).
    */
  final case class OldStore(
      checkpoint: String,
      operatorId: Long,
      storeName: String,
      batchId: Long,
      uniqueIds: Seq[String],
      storeConf: StateStoreConf
  ) {

    /** Opens old partition `partition` read-only with its own provider, hands the read store to `read`. */
    def reading[T](
        partition: Int,
        keySchema: StructType,
        valueSchema: StructType,
        spec: org.apache.spark.sql.execution.streaming.state.KeyStateEncoderSpec,
        multipleColumnFamilies: Boolean,
        conf: Configuration
    )(read: org.apache.spark.sql.execution.streaming.state.ReadStateStore => T): T = {
      val storeId = StateStoreId(StateLayout.stateRoot(checkpoint), operatorId, partition, storeName)
      val provider = StateStoreProvider.createAndInit(
        StateStoreProviderId(storeId, UUID.randomUUID()),
        keySchema,
        valueSchema,
        spec,
        multipleColumnFamilies,
        storeConf,
        conf,
        false,
        None
      )
      try {
        val store = provider.getReadStore(batchId + 1, uniqueIds.lift(partition))
        try read(store)
        finally store.abort()
      } finally provider.close()
    }
  }

  /** Where the new stores go: `partitions` of them under `operatorDir`; `keep`: each row stays in its old
    * partition (the count is unchanged), else it is placed.
    */
  final case class NewStores(operatorDir: String, partitions: Int, keep: Boolean) {

    /** Opens the group's new stores and commits them once `fill` has put every row (`partitionOf` its
      * placement, used unless `keep`).
      */
    def write(old: OldStore, group: RepartitionGroup, conf: Configuration, scratchRoot: File)(
        fill: StoreRepartitioner.RowSink => Unit
    ): StoreRepartitioner.Result =
      StoreRepartitioner.write(
        old.operatorId,
        old.storeName,
        partitions,
        p => StateLayout.storeDir(operatorDir, p, old.storeName),
        old.batchId + 1,
        CrashPoints.None,
        scratchRoot,
        group.newPartitions,
        conf = conf
      )((_, sink) => fill(sink))
  }

  /** The group writer of a store keyed by its grouping columns: every row in the default family. */
  final case class RowStoreMigration(
      old: OldStore,
      target: NewStores,
      keySchemaJson: String,
      valueSchemaJson: String,
      prefixKeyColumns: Int,
      partitionKeyColumns: Int
  ) extends GroupWriter {
    override def operatorId: Long = old.operatorId
    override def storeName: String = old.storeName

    private def keySchema = DataType.fromJson(keySchemaJson).asInstanceOf[StructType]
    private def spec =
      if (prefixKeyColumns > 0) PrefixKeyScanStateEncoderSpec(keySchema, prefixKeyColumns)
      else NoPrefixKeyStateEncoderSpec(keySchema)

    def encoders: StateEncoders =
      new StateEncoders(
        spec,
        DataType.fromJson(valueSchemaJson).asInstanceOf[StructType],
        multipleValues = false
      )

    override def write(
        group: RepartitionGroup,
        conf: Configuration,
        scratchRoot: File
    ): StoreRepartitioner.Result = {
      val enc = encoders
      val valueSchema = DataType.fromJson(valueSchemaJson).asInstanceOf[StructType]
      val partitionId =
        SparkKeyPlacement.partitionIdOf(keySchema.fields.take(partitionKeyColumns).toSeq, target.partitions)
      val family = ColumnFamilies.DefaultName // the operators migrated here keep their rows there
      target.write(old, group, conf, scratchRoot) { sink =>
        group.oldPartitions.foreach { p =>
          old.reading(p, keySchema, valueSchema, spec, multipleColumnFamilies = false, conf) { store =>
            store.iterator().foreach { pair =>
              val to = if (target.keep) p else partitionId.eval(pair.key).asInstanceOf[Int]
              sink.put(to, family, enc.encodeKey(pair.key), enc.encodeValue(pair.value))
            }
          }
        }
      }
    }
  }

  /** The group writer of a transformWithState store: every family the schema file records. */
  final case class TwsStoreMigration(
      old: OldStore,
      target: NewStores,
      operatorName: String,
      schemaFile: String,
      operatorPropertiesJson: String
  ) extends GroupWriter {
    override def operatorId: Long = old.operatorId
    override def storeName: String = old.storeName

    def families(conf: Configuration) = {
      val schemas = TwsKeyPlacement
        .readSchemas(schemaFile, conf)
        .filter(_.colFamilyName != ColumnFamilies.DefaultName)
      require(schemas.nonEmpty, s"$schemaFile records no column family")
      schemas
    }

    override def write(
        group: RepartitionGroup,
        conf: Configuration,
        scratchRoot: File
    ): StoreRepartitioner.Result = {
      val schemas = families(conf)
      val properties = TransformWithStateOperatorProperties.fromJson(operatorPropertiesJson)
      val lists = properties.stateVariables.filter(_.stateVariableType == StateVariableType.ListState)
      // only a ListState's own family holds several values per key (its TTL and count indexes hold one)
      def multiValued(family: String) = lists.exists(_.stateName == family)
      val placement = new TwsKeyPlacement(operatorName, storeName, schemas, properties, target.partitions)
      val encoded = schemas.map { s =>
        val spec = s.keyStateEncoderSpec.getOrElse(
          throw new IllegalStateException(
            s"$schemaFile: column family '${s.colFamilyName}' has no key encoder"
          )
        )
        (s, spec, new StateEncoders(spec, s.valueSchema, multiValued(s.colFamilyName)))
      }
      val (first, firstSpec, _) = encoded.head
      target.write(old, group, conf, scratchRoot) { sink =>
        encoded.foreach { case (s, _, _) => sink.family(s.colFamilyName) }
        group.oldPartitions.foreach { p =>
          old.reading(p, first.keySchema, first.valueSchema, firstSpec, multipleColumnFamilies = true, conf) {
            store =>
              encoded.foreach { case (s, spec, enc) =>
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
                  sink.put(if (target.keep) p else place.partitionOf(k), name, k, v)
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
          }
        }
      }
    }
  }

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
}

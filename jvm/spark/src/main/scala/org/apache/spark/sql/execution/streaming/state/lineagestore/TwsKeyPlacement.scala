package org.apache.spark.sql.execution.streaming.state.lineagestore

import org.apache.hadoop.fs.Path

import org.apache.spark.sql.catalyst.expressions.{Expression, UnsafeRow}
import org.apache.spark.sql.execution.streaming.operators.stateful.StatePartitionKeyExtractorFactory
import org.apache.spark.sql.execution.streaming.operators.stateful.transformwithstate.{
  StateStoreColumnFamilySchemaUtils,
  TransformWithStateOperatorProperties
}
import org.apache.spark.sql.execution.streaming.state.{
  InMemoryStateSchemaProvider,
  StatePartitionKeyExtractor,
  StateRowEncoderCacheKey,
  StateSchemaCompatibilityChecker,
  StateSchemaMetadata,
  StateSchemaProvider,
  StateStoreColFamilySchema
}

import io.lineagestore.store.ColumnFamilies
import io.lineagestore.tools.KeyPlacement

/** Places the rows of a transformWithState store: every column family's key holds the grouping key somewhere
  * (value and list state: the key is the grouping key; map state: (grouping key, user key); timers: (grouping
  * key, expiry) and (expiry, grouping key); TTL indexes: (expiry, grouping key[, user key]); the internal
  * min-expiry, count and row-counter families: the grouping key), and every row must land in the partition
  * Spark's shuffle sends its grouping key to, or the state, a timer or a TTL entry silently vanishes from its
  * key.
  *
  * Nothing here decides where the grouping key sits: each family's key is decoded with Spark's own state
  * encoder for the family's recorded schema and encoder spec (the operator's state schema file), the grouping
  * key is taken out of it by the extractor Spark 4.3's own offline repartition uses for that family
  * (`StatePartitionKeyExtractorFactory`, given the state variable the operator recorded for it, found as
  * Spark finds it: by `getBaseStateName`), and the partition is Spark's `HashPartitioning` over the grouping
  * key's columns, as the operator's required distribution plans its exchange.
  *
  * Not thread-safe (reused expressions and encoders); [[forAnotherThread]] gives a fresh instance.
  */
final class TwsKeyPlacement(
    operatorName: String,
    storeName: String,
    schemas: Seq[StateStoreColFamilySchema],
    properties: TransformWithStateOperatorProperties,
    override val partitions: Int,
    avroSchemas: Option[StateSchemaProvider] = None // Some: the state is Avro-encoded (encodingFormat=avro)
) extends KeyPlacement {
  require(partitions > 0, s"partitions must be positive, got $partitions")

  private val byName = schemas.map(s => s.colFamilyName -> s).toMap
  // Spark caches Avro encoders by this key across the JVM; its own scope keeps this instance's encoders (not
  // thread-safe) to itself
  private val encoderScope = s"lineagestore-placement|${java.util.UUID.randomUUID()}"
  private val families = scala.collection.mutable.Map.empty[String, Option[KeyPlacement]]

  /** A transformWithState store keeps nothing in the default family; a row there has no known grouping key.
    */
  override def partitionOf(key: Array[Byte]): Int =
    throw new UnsupportedOperationException(
      s"a $operatorName store has a row in its default column family, which transformWithState never writes: " +
        "its grouping key is unknown; keep the partition count of this query"
    )

  override def ofFamily(family: String): Option[KeyPlacement] =
    if (family == ColumnFamilies.DefaultName) Some(this)
    else families.getOrElseUpdate(family, byName.get(family).map(placementOf))

  override def forAnotherThread: KeyPlacement =
    new TwsKeyPlacement(operatorName, storeName, schemas, properties, partitions, avroSchemas)

  private def placementOf(schema: StateStoreColFamilySchema): KeyPlacement = {
    val name = schema.colFamilyName
    val spec = schema.keyStateEncoderSpec.getOrElse(
      throw new IllegalStateException(s"column family '$name' has no key encoder in the state schema file")
    )
    val baseName = StateStoreColumnFamilySchemaUtils.getBaseStateName(name)
    val variable = properties.stateVariables
      .find(_.stateName == baseName)
      .getOrElse(
        throw new UnsupportedOperationException(
          s"column family '$name' belongs to no state variable the operator recorded (looked for '$baseName' " +
            s"among ${properties.stateVariables.map(_.stateName).mkString(", ")}); keep the partition count"
        )
      )
    val extractor: StatePartitionKeyExtractor = StatePartitionKeyExtractorFactory.create(
      operatorName,
      schema.keySchema,
      storeName,
      name,
      None,
      Some(variable)
    )
    // keys are decoded as the provider encoded them: with Avro, through the schema history the operator
    // recorded (the encoder of each family, with the schema provider Spark hands the provider)
    val avro = avroSchemas.map(provider =>
      StateEncoders.Avro(StateRowEncoderCacheKey(encoderScope, 0, 0, storeName, name), Some(provider))
    )
    val encoders = new StateEncoders(spec, schema.valueSchema, multipleValues = false, avro)
    val groupingKey = extractor.partitionKeySchema
    val partitionId: Expression = SparkKeyPlacement.partitionIdOf(groupingKey.fields.toSeq, partitions)
    new KeyPlacement {
      override val partitions: Int = TwsKeyPlacement.this.partitions
      override def partitionOf(key: Array[Byte]): Int = {
        val row: UnsafeRow = extractor.partitionKey(encoders.decodeKey(key))
        partitionId.eval(row).asInstanceOf[Int]
      }
    }
  }
}

object TwsKeyPlacement {

  /** The operator's recorded name, store name, state schema files (`_stateSchema/...` as the operator
    * metadata (version 2) lists them, newest last, one a line; read with `conf`: the tools' Hadoop settings
    * from py4j, the session's in a task), operator properties JSON (its `stateVariables`) and the state
    * encoding the offset log records (`unsaferow` or `avro`).
    */
  def of(
      operatorName: String,
      storeName: String,
      schemaFiles: String,
      operatorPropertiesJson: String,
      encodingFormat: String,
      partitions: Int,
      conf: org.apache.hadoop.conf.Configuration
  ): TwsKeyPlacement = {
    val files = schemaFiles.split("\n").toList.map(_.trim).filter(_.nonEmpty)
    require(files.nonEmpty, "no state schema file given")
    val avro =
      if (!encodingFormat.equalsIgnoreCase(StateEncoders.AvroFormat)) None
      else
        Some(
          new InMemoryStateSchemaProvider(
            StateSchemaMetadata.createStateSchemaMetadata(files.last, conf, files)
          )
        )
    new TwsKeyPlacement(
      operatorName,
      storeName,
      readSchemas(files.last, conf),
      TransformWithStateOperatorProperties.fromJson(operatorPropertiesJson),
      partitions,
      avro
    )
  }

  /** Every column family's schema and key encoder spec, from a state schema file (format 3). */
  def readSchemas(
      schemaFile: String,
      conf: org.apache.hadoop.conf.Configuration
  ): Seq[StateStoreColFamilySchema] = {
    val path = new Path(schemaFile)
    val in = path.getFileSystem(conf).open(path)
    try StateSchemaCompatibilityChecker.readSchemaFile(in)
    finally in.close()
  }
}

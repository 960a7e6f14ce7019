package org.apache.spark.sql.execution.streaming.state.lineagestore

import org.apache.spark.sql.catalyst.expressions.{BoundReference, Expression}
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning
import org.apache.spark.sql.execution.streaming.state.{
  NoPrefixKeyStateEncoderSpec,
  PrefixKeyScanStateEncoderSpec
}
import org.apache.spark.sql.types.{DataType, StructField, StructType}

import io.lineagestore.tools.KeyPlacement

/** Places a state key where Spark's shuffle sends its rows: the key is decoded with Spark's own state key
  * encoder (the spec the operator wrote it with), and Spark's own `HashPartitioning(keyColumns,
  * n).partitionIdExpression` (pmod of Murmur3Hash with seed 42 over the columns, in order) is evaluated on
  * its first `partitionKeyColumns` columns: the same expression a stateful operator's required distribution
  * plans its exchange with, so no hashing is re-implemented here.
  *
  * Not thread-safe (one reused expression); one instance per store being rewritten.
  */
final class SparkKeyPlacement(
    keySchema: StructType,
    valueSchema: StructType,
    prefixKeyColumns: Int,
    partitionKeyColumns: Int,
    override val partitions: Int
) extends KeyPlacement {
  require(partitions > 0, s"partitions must be positive, got $partitions")
  require(
    partitionKeyColumns > 0 && partitionKeyColumns <= keySchema.length,
    s"partition key columns $partitionKeyColumns out of range for key schema ${keySchema.simpleString}"
  )
  private val encoders = new StateEncoders(
    if (prefixKeyColumns > 0) PrefixKeyScanStateEncoderSpec(keySchema, prefixKeyColumns)
    else NoPrefixKeyStateEncoderSpec(keySchema),
    valueSchema,
    multipleValues = false
  )
  private val partitionId: Expression =
    SparkKeyPlacement.partitionIdOf(keySchema.fields.take(partitionKeyColumns).toSeq, partitions)

  override def partitionOf(key: Array[Byte]): Int =
    partitionId.eval(encoders.decodeKey(key)).asInstanceOf[Int]

  override def forAnotherThread: KeyPlacement =
    new SparkKeyPlacement(keySchema, valueSchema, prefixKeyColumns, partitionKeyColumns, partitions)
}

object SparkKeyPlacement {

  /** Spark's own partition id of a row whose first columns are `keyFields` among `n` partitions: the
    * `HashPartitioning(keys, n).partitionIdExpression` a shuffle on those columns (`repartition(n, keys)`, a
    * stateful operator's exchange) places rows with. The one placement decision of repartition, migrate and
    * partitioned adjunct tables. Not thread-safe once evaluated: one per thread.
    */
  def partitionIdOf(keyFields: Seq[StructField], n: Int): Expression =
    HashPartitioning(
      keyFields.zipWithIndex.map { case (f, i) => BoundReference(i, f.dataType, f.nullable) },
      n
    ).partitionIdExpression

  /** For py4j: schemas as Spark's JSON (as in the operator's schema file). */
  def of(
      keySchemaJson: String,
      valueSchemaJson: String,
      prefixKeyColumns: Int,
      partitionKeyColumns: Int,
      partitions: Int
  ): SparkKeyPlacement =
    new SparkKeyPlacement(
      DataType.fromJson(keySchemaJson).asInstanceOf[StructType],
      DataType.fromJson(valueSchemaJson).asInstanceOf[StructType],
      prefixKeyColumns,
      partitionKeyColumns,
      partitions
    )
}

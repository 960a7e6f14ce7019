package org.apache.spark.sql.execution.streaming.state.lineagestore

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.{DataFrame, Row, SparkSession}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.classic
import org.apache.spark.sql.types.StructType

/** Thin shim: a DataFrame over an RDD of Spark's internal rows (`internalCreateDataFrame` is private[sql]),
  * so the adjunct lookup operator hands its rows to Spark without converting each to a `Row` and back.
  * Nothing else lives here.
  */
object InternalFrames {
  def of(spark: SparkSession, rows: RDD[InternalRow], schema: StructType): DataFrame =
    spark.asInstanceOf[classic.SparkSession].internalCreateDataFrame(rows, schema, isStreaming = false)

  def rowsOf(df: DataFrame): RDD[InternalRow] = df.asInstanceOf[classic.Dataset[Row]].queryExecution.toRdd
}

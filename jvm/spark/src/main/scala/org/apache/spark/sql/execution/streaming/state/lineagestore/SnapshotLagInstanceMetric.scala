package org.apache.spark.sql.execution.streaming.state.lineagestore

import org.apache.spark.SparkContext
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}
import org.apache.spark.sql.execution.streaming.state.{StateStoreId, StateStoreInstanceMetric}

/** One store's snapshot lag (deltas past the newest uploaded snapshot of its lineage: what a cold restore
  * replays), as a Spark instance metric. Custom metrics are summed over an operator's stores, which hides the
  * one store that lags; instance metrics are not: Spark's progress reports, per metric, the
  * `numStateStoreInstanceMetricsToReport` (default 5) worst stores by name
  * (`lineagestoreSnapshotLag.partition_<p>_<store>`), worst first. Stores at no lag are left out (0 is the
  * initial value and `ignoreIfUnchanged`), so the progress names only stores that lag.
  */
case class SnapshotLagInstanceMetric(
    partitionId: Option[Int] = None,
    storeName: String = StateStoreId.DEFAULT_STORE_NAME
) extends StateStoreInstanceMetric {
  override def metricPrefix: String = SnapshotLagInstanceMetric.Prefix
  override def descPrefix: String =
    "deltas past the newest uploaded snapshot of this store's lineage (what a cold restore replays)"
  override def initValue: Long = 0L
  override def createSQLMetric(sparkContext: SparkContext): SQLMetric =
    SQLMetrics.createSizeMetric(sparkContext, desc, initValue)
  override def ordering: Ordering[Long] = Ordering.Long.reverse // the largest lag is the worst
  override def ignoreIfUnchanged: Boolean = true
  // two attempts of one batch (speculation) report the lag of the worse
  override def combine(metric: SQLMetric, value: Long): Long =
    if (metric.isZero) value else math.max(metric.value, value)
  override def withNewId(partitionId: Int, storeName: String): SnapshotLagInstanceMetric =
    copy(partitionId = Some(partitionId), storeName = storeName)
}

object SnapshotLagInstanceMetric {
  val Prefix = "lineagestoreSnapshotLag"
}

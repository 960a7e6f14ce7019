package org.apache.spark.sql.execution.streaming.state.lineagestore

import org.apache.spark.sql.{classic, DataFrame, SparkSession}
import org.apache.spark.sql.execution.ColumnarRule
import org.apache.spark.sql.execution.streaming.checkpointing.{CommitLog, OffsetSeqLog}
import org.apache.spark.sql.execution.streaming.runtime.StreamingQueryWrapper
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.streaming.StreamingQuery

/** Thin shim for `io.lineagestore.spark.RealTimeQuery`: the private[sql] pieces it needs (a cloned session, a
  * DataFrame's plan rebuilt in it, a checkpoint's logs, a running query's own session). Nothing else lives
  * here.
  */
object RealTimeSession {

  /** A clone of `spark` (its SQL settings, temporary views, extensions), for one query only. */
  def cloneOf(spark: SparkSession): SparkSession = spark.asInstanceOf[classic.SparkSession].cloneSession()

  /** `df`'s (analysed) plan as a DataFrame of `session`. */
  def rebuild(df: DataFrame, session: SparkSession): DataFrame =
    classic.Dataset.ofRows(
      session.asInstanceOf[classic.SparkSession],
      df.asInstanceOf[classic.Dataset[_]].logicalPlan
    )

  /** The checkpoint's newest offset-log entry: its batch id and the provider class it records. */
  def recordedProvider(spark: SparkSession, checkpoint: String): Option[(Long, Option[String])] =
    CheckpointProvider.latest(new OffsetSeqLog(spark, s"$checkpoint/offsets"))

  /** The checkpoint's newest committed batch. */
  def committedBatch(spark: SparkSession, checkpoint: String): Option[Long] =
    new CommitLog(spark, s"$checkpoint/commits").getLatestBatchId()

  /** The provider class the running query's own session (the one its batches are planned in) holds, once its
    * first batch is planned; None before.
    */
  def plannedProvider(query: StreamingQuery): Option[String] = query match {
    case w: StreamingQueryWrapper =>
      Option(w.streamingQuery.lastExecution)
        .map(_.sparkSession.sessionState.conf.getConf(SQLConf.STATE_STORE_PROVIDER_CLASS))
    case _ => None
  }

  /** The session's columnar rules (where lineagestore's extension puts its plan checks). */
  def columnarRules(spark: SparkSession): Seq[ColumnarRule] =
    spark.asInstanceOf[classic.SparkSession].sessionState.columnarRules
}

package io.lineagestore.spark

import scala.jdk.CollectionConverters._

import org.apache.spark.internal.Logging
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.execution.streaming.state.lineagestore.SnapshotLagInstanceMetric
import org.apache.spark.sql.streaming.{StreamingQueryListener, StreamingQueryProgress}
import org.apache.spark.sql.streaming.StreamingQueryListener._

import io.lineagestore.config.LineageConf
import io.lineagestore.store.StoreSettings

/** Registered by `lineagestore.configure` (`spark.sql.streaming.streamingQueryListeners`): names the stores
  * whose snapshot lag is worst in the driver log, after every batch. The executors report each store's lag as
  * an instance metric ([[SnapshotLagInstanceMetric]]), and Spark puts the worst
  * `numStateStoreInstanceMetricsToReport` of each operator in the progress; this reads them there. A store
  * past the bound (`maxSnapshotLagDeltas`: its catch-up snapshots keep failing) is a WARN naming it; the
  * worst lagging stores otherwise an INFO line. Never fails a query.
  */
class SnapshotLagListener extends StreamingQueryListener with Logging {

  override def onQueryProgress(event: QueryProgressEvent): Unit =
    try {
      val bound =
        SparkSession.getDefaultSession.fold(SnapshotLagListener.DefaultBound)(SnapshotLagListener.boundOf)
      SnapshotLagListener.report(event.progress, bound).foreach {
        case SnapshotLagListener.Report(true, text)  => logWarning(text)
        case SnapshotLagListener.Report(false, text) => logInfo(text)
      }
    } catch {
      case e: Exception =>
        logWarning(s"lineagestore could not read the snapshot lag of query ${event.progress.id}", e)
    }

  override def onQueryStarted(event: QueryStartedEvent): Unit = ()
  override def onQueryTerminated(event: QueryTerminatedEvent): Unit = ()
}

object SnapshotLagListener {

  /** One store's lag as the progress names it: the operator (index and name), the store's instance name
    * (`partition_<p>_<store>`) and its lag in deltas.
    */
  final case class StoreLag(operator: Int, operatorName: String, store: String, lag: Long) {
    override def toString: String = s"operator $operator ($operatorName) $store: $lag"
  }

  final case class Report(pastBound: Boolean, text: String)

  val DefaultBound: Int = StoreSettings.Default.maxSnapshotLagDeltas

  /** The effective bound the session's stores run with (the one `StoreSettings` decides). */
  def boundOf(session: SparkSession): Int =
    StoreSettings.fromEntries(session.conf.getAll).maxSnapshotLagDeltas

  /** Every store lag the progress reports, worst first. */
  def lags(progress: StreamingQueryProgress): Seq[StoreLag] = {
    val prefix = SnapshotLagInstanceMetric.Prefix + "."
    progress.stateOperators.toSeq.zipWithIndex
      .flatMap { case (op, i) =>
        op.customMetrics.asScala.collect {
          case (name, value) if name.startsWith(prefix) =>
            StoreLag(i, op.operatorName, name.stripPrefix(prefix), value.longValue)
        }
      }
      .sortBy(l => (-l.lag, l.operator, l.store))
  }

  /** What to log for a batch: None when no store lags. */
  def report(progress: StreamingQueryProgress, bound: Int): Option[Report] = {
    val all = lags(progress).filter(_.lag > 0)
    val past = all.filter(_.lag > bound)
    val query = Option(progress.name).filter(_.nonEmpty).getOrElse(progress.id.toString)
    if (past.nonEmpty)
      Some(
        Report(
          pastBound = true,
          s"lineagestore: query $query, batch ${progress.batchId}: ${past.size} state store(s) past the " +
            s"snapshot lag bound (${LineageConf.MaxSnapshotLagDeltas.key}=$bound): ${past.mkString(", ")}. " +
            "Their commits' catch-up snapshots fail (the executor log says why, under \"catch-up\"); a cold " +
            "restore of them replays that many deltas. Nothing committed is lost. See docs/operations.md, " +
            "\"Short scheduled runs\"."
        )
      )
    else if (all.nonEmpty)
      Some(
        Report(
          pastBound = false,
          s"lineagestore: query $query, batch ${progress.batchId}: worst snapshot lag (deltas a cold restore " +
            s"replays, bound $bound): ${all.mkString(", ")}"
        )
      )
    else None
  }
}

package io.lineagestore.spark

import java.util.concurrent.TimeUnit

import org.apache.spark.internal.Logging
import org.apache.spark.sql.{DataFrame, Row, SparkSession}
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.streaming.operators.stateful.StatefulOperator
import org.apache.spark.sql.execution.streaming.state.lineagestore.{LineageTws, RealTimeSession}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.streaming.{DataStreamWriter, StreamingQuery, Trigger}

/** Raised when a real-time query cannot be started, or kept, on lineagestore; the message names the
  * checkpoint or setting and what to do.
  */
class RealTimeRouteException(message: String, cause: Throwable = null)
    extends IllegalStateException(message, cause)

/** Starts a query in Spark's real-time mode (`Trigger.RealTime`) on lineagestore.
  *
  * Spark 4.3 refuses real-time mode when the session *contains* a provider class other than its own
  * (`StreamingQueryManager.throwIfConfsAreRealTimeModeIncompatible`), then, in the running query, sets its
  * own provider only if none is set, and then (restoring the offset log's settings) puts back the provider
  * the checkpoint recorded. So a checkpoint whose offset log records lineagestore, started in real-time mode
  * from a session without the provider key, runs on lineagestore. This helper makes that route safe:
  *
  *   - it works in a clone of the DataFrame's session (the DataFrame rebuilt there), never unsetting anything
  *     in the user's session, where another thread's query would otherwise get Spark's provider;
  *   - a checkpoint without a batch first runs in micro-batch mode on lineagestore (`AvailableNow`, again
  *     while the source is empty) until a batch is committed, so its offset log records lineagestore;
  *   - a checkpoint whose offset log records another provider is refused;
  *   - lineagestore's session extension must be on: its plan rule ([[RealTimeProviderGuard]]) fails the query
  *     when its first batch is planned on another provider, before any task touches the state; after start
  *     the helper also reads the provider the query planned with and stops it otherwise.
  *
  * From Python: `lineagestore.realtime.start`.
  */
object RealTimeQuery {

  /** How long a new checkpoint waits for its first batch (micro-batch mode), by default. */
  val DefaultFirstBatchTimeoutMs: Long = TimeUnit.MINUTES.toMillis(10)

  /** Starts `df` in real-time mode on lineagestore at `checkpointLocation`, batches of `batchDuration` ("5
    * seconds"). `configure` sets the sink and output mode on a writer of the rebuilt DataFrame (called once
    * per run; the helper sets the checkpoint location and the trigger). The query runs in the helper's
    * session: `query.sparkSession.streams` lists it, not the caller's session's `streams`.
    */
  def start(
      df: DataFrame,
      checkpointLocation: String,
      batchDuration: String,
      firstBatchTimeoutMs: Long = DefaultFirstBatchTimeoutMs
  )(configure: DataStreamWriter[Row] => DataStreamWriter[Row]): StreamingQuery = {
    val start = new RealTimeStart(df, checkpointLocation)
    if (start.needsFirstBatch)
      start.runFirstBatch(configure(start.dataFrame.writeStream), firstBatchTimeoutMs)
    start.startRealTime(configure(start.dataFrame.writeStream), batchDuration)
  }
}

/** One start of a real-time query on lineagestore, step by step (the steps [[RealTimeQuery.start]] takes;
  * Python takes them itself, building each writer with its own sink).
  */
final class RealTimeStart(df: DataFrame, val checkpointLocation: String) extends Logging {
  import RealTimeStart._

  require(df.isStreaming, "lineagestore's real-time helper starts streaming DataFrames only")
  RealTimeProviderGuard.requireExtension(df.sparkSession)

  /** The helper's own session: a clone of the DataFrame's, marked for [[RealTimeProviderGuard]]. */
  val session: SparkSession = {
    val s = RealTimeSession.cloneOf(df.sparkSession)
    s.conf.set(RealTimeProviderGuard.RequiredProviderKey, LineageTws.ProviderClassName)
    s
  }

  /** The query's DataFrame, rebuilt in [[session]]. */
  val dataFrame: DataFrame = RealTimeSession.rebuild(df, session)

  /** True when the checkpoint has no batch yet; refuses a checkpoint whose offset log records another
    * provider.
    */
  def needsFirstBatch: Boolean = recorded().isEmpty

  /** Runs the query in micro-batch mode on lineagestore (`AvailableNow`, again every second while the source
    * has nothing) until a batch is committed, or fails after `timeoutMs` leaving a checkpoint without a
    * batch.
    */
  def runFirstBatch(writer: DataStreamWriter[Row], timeoutMs: Long): Unit = {
    session.conf.set(ProviderKey, LineageTws.ProviderClassName)
    val deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs)
    while (RealTimeSession.committedBatch(session, checkpointLocation).isEmpty) {
      if (System.nanoTime() > deadline) {
        throw new RealTimeRouteException(
          s"lineagestore: the real-time query at $checkpointLocation got no input within ${timeoutMs} ms, so its " +
            "first batch (run in micro-batch mode, so that the checkpoint records lineagestore's provider) has not " +
            "run; the checkpoint has no batch yet. Start it again once the source has data, or raise the timeout."
        )
      }
      val q = writer.option("checkpointLocation", checkpointLocation).trigger(Trigger.AvailableNow()).start()
      q.awaitTermination()
      if (RealTimeSession.committedBatch(session, checkpointLocation).isEmpty) Thread.sleep(FirstBatchPollMs)
    }
    recorded().foreach(r => log.info(s"lineagestore: $checkpointLocation committed its first batch ($r)"))
  }

  /** Starts the query in real-time mode; the checkpoint must have a batch recorded by lineagestore. Returns
    * once the query's first real-time batch is planned on lineagestore; stops it and fails otherwise.
    */
  def startRealTime(writer: DataStreamWriter[Row], batchDuration: String): StreamingQuery = {
    val batch = recorded().getOrElse {
      throw new RealTimeRouteException(
        s"lineagestore: $checkpointLocation has no batch yet; run its first batch in micro-batch mode first " +
          "(RealTimeQuery.start does)"
      )
    }
    session.conf.unset(ProviderKey)
    val q = writer
      .option("checkpointLocation", checkpointLocation)
      .trigger(Trigger.RealTime(batchDuration))
      .start()
    verifyPlanned(q, batch)
    q
  }

  /** The newest offset-log entry's batch id, refusing one that records another provider (or none). */
  private def recorded(): Option[Long] =
    RealTimeSession.recordedProvider(session, checkpointLocation).map {
      case (batchId, Some(LineageTws.ProviderClassName)) => batchId
      case (batchId, other)                              =>
        throw new RealTimeRouteException(
          s"lineagestore: the checkpoint $checkpointLocation was not written by lineagestore: its offset log " +
            s"(offsets/$batchId) records $ProviderKey=${other.getOrElse("(nothing)")}. Spark keeps the provider " +
            "a checkpoint started with, so this query would not run on lineagestore. Migrate its state " +
            s"(`lineagestore migrate $checkpointLocation`, docs/repartition.md) or use a new checkpoint location; " +
            "to keep it on its provider, start it with writeStream...start() instead of this helper."
        )
    }

  private def verifyPlanned(q: StreamingQuery, batch: Long): Unit = {
    val deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(PlanTimeoutMs)
    var planned = RealTimeSession.plannedProvider(q)
    while (planned.isEmpty && q.isActive && System.nanoTime() < deadline) {
      Thread.sleep(50)
      planned = RealTimeSession.plannedProvider(q)
    }
    def fail(why: String): Nothing = {
      q.stop()
      throw new RealTimeRouteException(
        s"lineagestore: the real-time query at $checkpointLocation (offset log at batch $batch, recorded by " +
          s"lineagestore) $why. Spark ${org.apache.spark.SPARK_VERSION} may apply its real-time settings in " +
          s"another order than Spark ${TwsShape.BuiltForSpark}, which this helper was built for; the query was " +
          "stopped. Run real-time queries on Spark's provider until a lineagestore release for this Spark."
      )
    }
    planned match {
      case Some(LineageTws.ProviderClassName) =>
      case Some(other)                        => fail(s"was planned on $other, not on lineagestore")
      // failed before its first batch was planned: the query's own error (source, sink, Spark's checks)
      case None if q.exception.isDefined => throw q.exception.get
      case None if !q.isActive           => fail("stopped before its first batch was planned")
      case None                          => fail(s"did not plan its first batch within $PlanTimeoutMs ms")
    }
  }
}

object RealTimeStart {
  private val ProviderKey = SQLConf.STATE_STORE_PROVIDER_CLASS.key
  private val FirstBatchPollMs = 1000L
  private val PlanTimeoutMs = TimeUnit.MINUTES.toMillis(2)
}

/** The plan-time half of the helper's safety: in a session the helper marked ([[RequiredProviderKey]]), a
  * stateful plan whose provider is not lineagestore fails when planned, before any task loads a store.
  * Spark's provider must never open lineagestore's files (same `<version>_<uniqueId>` names, another format).
  * Called by [[LineageTwsColumnarRule]].
  */
object RealTimeProviderGuard {

  /** Set by [[RealTimeStart]] in its session only: the provider every stateful plan there must run on. */
  val RequiredProviderKey = "lineagestore.realTime.requiredProvider"

  def apply(plan: SparkPlan): Unit =
    plan.conf.getConfString(RequiredProviderKey, "") match {
      case ""       =>
      case required =>
        val actual = plan.conf.getConf(SQLConf.STATE_STORE_PROVIDER_CLASS)
        if (actual != required && plan.exists(_.isInstanceOf[StatefulOperator])) {
          throw new RealTimeRouteException(
            s"lineagestore: this query's session is lineagestore's real-time helper's ($RequiredProviderKey), " +
              s"but its stateful plan was planned with ${SQLConf.STATE_STORE_PROVIDER_CLASS.key}=$actual, not " +
              s"$required; it stops before any state store is opened. Either it was started in real-time mode on " +
              s"a checkpoint without a batch of lineagestore (RealTimeQuery.start runs that batch first), or Spark " +
              s"${org.apache.spark.SPARK_VERSION} applies real-time mode's settings otherwise than Spark " +
              s"${TwsShape.BuiltForSpark}, which this lineagestore was built for."
          )
        }
    }

  /** The helper needs the extension's rule in the session (it holds [[apply]]). */
  def requireExtension(spark: SparkSession): Unit =
    if (!RealTimeSession.columnarRules(spark).contains(LineageTwsColumnarRule)) {
      throw new RealTimeRouteException(
        "lineagestore: the real-time helper needs lineagestore's session extension, whose plan check stops a " +
          "real-time query planned on another provider before it opens lineagestore's state. Set " +
          "spark.sql.extensions=io.lineagestore.spark.LineageSessionExtensions when the session is created " +
          "(lineagestore.configure does), docs/transform-with-state.md."
      )
    }
}

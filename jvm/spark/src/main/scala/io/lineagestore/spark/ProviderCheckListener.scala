package io.lineagestore.spark

import org.apache.spark.internal.Logging
import org.apache.spark.sql.execution.streaming.state.lineagestore.{CheckpointProvider, LineageTws}
import org.apache.spark.sql.streaming.StreamingQueryListener
import org.apache.spark.sql.streaming.StreamingQueryListener._

/** Registered by `lineagestore.configure` (`spark.sql.streaming.streamingQueryListeners`): when a query
  * restarts on a checkpoint whose offset log names another state store provider, Spark keeps that provider
  * (its own notice is a WARN few read), so the user believes the query runs on lineagestore while it does
  * not. `onQueryStarted` runs synchronously inside `DataStreamWriter.start()`, before the first batch; this
  * says so at ERROR level, naming the checkpoint, the recorded provider and what to do. It never fails the
  * query: the query is consistent on its recorded provider, only not on lineagestore.
  */
class ProviderCheckListener extends StreamingQueryListener with Logging {

  override def onQueryStarted(event: QueryStartedEvent): Unit =
    try {
      // only when the session asks for lineagestore: a query deliberately set to another provider is fine
      CheckpointProvider.of(event.id).filter(_.sessionProvider == ProviderCheckListener.Ours).foreach { r =>
        ProviderCheckListener.message(r.checkpoint, r.batchId, r.providerClass).foreach(m => logError(m))
      }
    } catch {
      // a check, never a reason for the query to fail
      case e: Exception => logWarning(s"lineagestore could not check the provider of query ${event.id}", e)
    }

  override def onQueryProgress(event: QueryProgressEvent): Unit = ()
  override def onQueryTerminated(event: QueryTerminatedEvent): Unit = ()
}

object ProviderCheckListener {
  val Ours: String = LineageTws.ProviderClassName

  /** The text for a checkpoint whose offset log records `recorded`; None when it is lineagestore's (or none
    * is recorded: a new checkpoint takes the session's provider).
    */
  def message(checkpoint: String, batchId: Long, recorded: Option[String]): Option[String] =
    recorded.filter(_ != Ours).map { other =>
      s"lineagestore: this query does NOT run on lineagestore. Its checkpoint $checkpoint was written by " +
        s"$other (its offset log, offsets/$batchId, records spark.sql.streaming.stateStore.providerClass=" +
        s"$other), and Spark keeps the provider a checkpoint started with, whatever the session sets. To run " +
        s"it on lineagestore, stop it and migrate the checkpoint's state (`lineagestore migrate $checkpoint`, " +
        "docs/repartition.md) or start the query on a new checkpoint location; to keep it on its provider, drop " +
        "lineagestore.configure for it. See docs/operations.md, \"A checkpoint of another provider\"."
    }
}

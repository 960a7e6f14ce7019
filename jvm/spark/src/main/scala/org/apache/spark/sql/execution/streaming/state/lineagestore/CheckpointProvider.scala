package org.apache.spark.sql.execution.streaming.state.lineagestore

import java.util.UUID

import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.execution.streaming.runtime.StreamingQueryWrapper
import org.apache.spark.sql.internal.SQLConf

/** Thin shim: the state store provider a running query's checkpoint recorded in its offset log. Spark reads
  * it from there on restart and keeps it, whatever the session's `providerClass` says (with only a WARN).
  * Nothing else lives here.
  */
object CheckpointProvider {

  /** What the newest entry of a query's offset log records (`providerClass`), beside what the query's session
    * asks for (`sessionProvider`), if the query and that entry are there.
    */
  final case class Recorded(
      checkpoint: String,
      batchId: Long,
      providerClass: Option[String],
      sessionProvider: String
  )

  def of(queryId: UUID): Option[Recorded] = {
    val key = SQLConf.STATE_STORE_PROVIDER_CLASS.key
    SparkSession.getActiveSession
      .orElse(SparkSession.getDefaultSession)
      .flatMap(s => Option(s.streams.get(queryId)))
      .collect { case w: StreamingQueryWrapper => w.streamingQuery }
      .flatMap { q =>
        q.offsetLog.getLatest().map { case (batchId, offsets) =>
          val conf = offsets.metadataOpt.map(_.conf).getOrElse(Map.empty[String, String])
          Recorded(q.resolvedCheckpointRoot, batchId, conf.get(key), q.sparkSession.conf.get(key))
        }
      }
  }
}

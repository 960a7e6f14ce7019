package org.apache.spark.sql.execution.streaming.state.lineagestore

import java.util.UUID

import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.execution.streaming.checkpointing.OffsetSeqLog
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

  def of(queryId: UUID): Option[Recorded] =
    SparkSession.getActiveSession
      .orElse(SparkSession.getDefaultSession)
      .flatMap(s => Option(s.streams.get(queryId)))
      .collect { case w: StreamingQueryWrapper => w.streamingQuery }
      .flatMap { q =>
        latest(q.offsetLog).map { case (batchId, provider) =>
          Recorded(q.resolvedCheckpointRoot, batchId, provider, q.sparkSession.conf.get(ProviderKey))
        }
      }

  /** The newest entry of an offset log: its batch id and the provider class it records (None: it records
    * none), if the log has an entry.
    */
  def latest(offsetLog: OffsetSeqLog): Option[(Long, Option[String])] =
    offsetLog.getLatest().map { case (batchId, offsets) =>
      batchId -> offsets.metadataOpt.flatMap(_.conf.get(ProviderKey))
    }

  private val ProviderKey = SQLConf.STATE_STORE_PROVIDER_CLASS.key
}

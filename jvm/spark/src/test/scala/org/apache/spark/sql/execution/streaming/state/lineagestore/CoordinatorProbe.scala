package org.apache.spark.sql.execution.streaming.state.lineagestore

import java.util.UUID

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.execution.streaming.state.{StateStoreId, StateStoreProviderId}

/** Test-only access to the driver's state store coordinator, which is Spark-internal. */
object CoordinatorProbe {
  private def coordinator(spark: SparkSession) =
    spark.streams.asInstanceOf[org.apache.spark.sql.classic.StreamingQueryManager].stateStoreCoordinator

  /** The newest snapshot version the coordinator was told of for this store in this query run. */
  def latestSnapshotVersion(spark: SparkSession, storeId: StateStoreId, runId: UUID): Option[Long] =
    coordinator(spark).getLatestSnapshotVersionForTesting(StateStoreProviderId(storeId, runId))
}

package io.lineagestore.adjunct

import io.lineagestore.lineage.CheckpointId

/** What one maintain batch decides, in one place (docs/adjunct-tables.md "How attempts, re-runs and lost
  * executors resolve"): which partitions' tasks commit, and the table record the driver writes last over the
  * checkpoints the tasks returned. Pure: the glue runs the tasks and writes the record.
  */
object MaintainRecord {

  /** Whether partition `p`'s maintain task commits a checkpoint: the one store of a table of one partition
    * always does (an empty batch still commits a version, as a stateful operator's store does); a partition
    * of a partitioned table only when the batch changes it, or when a generation (`replace`) must empty a
    * partition that holds rows (`parent` not empty) and gets none.
    */
  def commits(partitions: Int, hasChanges: Boolean, replace: Boolean, parent: CheckpointId): Boolean =
    partitions == 1 || hasChanges || (replace && !parent.isEmptyState)

  /** The record of table version `latest.version + 1` (1 for a new table) naming, per partition, the
    * checkpoint its task `committed` (one result per partition: Spark returns one attempt's) or, for a
    * partition the batch left alone, the one `latest` names. Refuses a result that is not a child of the
    * parent `latest` names for its partition (a task that loaded another parent would fork the table), or two
    * results for one partition, naming the table at `path`; nothing is written then.
    */
  def record(
      path: String,
      latest: Option[AdjunctCommit],
      partitions: Int,
      committed: Seq[(Int, CheckpointId)],
      source: String,
      sourceBatchId: Long,
      freshUniqueId: () => String
  ): AdjunctCommit = {
    def parent(p: Int) = latest.fold(CheckpointId.Empty)(_.storeCheckpoint(p))
    committed.groupBy(_._1).collectFirst { case (p, rs) if rs.size > 1 => p -> rs.map(_._2) }.foreach {
      case (p, ids) =>
        throw new IllegalStateException(
          s"adjunct table $path: partition $p's maintain returned ${ids.mkString(", ")}; a table version " +
            "names one checkpoint per partition. Nothing was recorded; the batch re-runs."
        )
    }
    committed.foreach { case (p, id) =>
      if (p < 0 || p >= partitions || id.version != parent(p).version + 1)
        throw new IllegalStateException(
          s"adjunct table $path: partition $p's maintain committed $id, not a child of ${parent(p)}, the " +
            s"checkpoint the latest table record names for it (of $partitions partition(s)). Nothing was " +
            "recorded; the batch re-runs over the recorded parents."
        )
    }
    val byPartition = committed.toMap
    if (partitions == 1) {
      val id = byPartition.getOrElse(
        0,
        throw new IllegalStateException(
          s"adjunct table $path: its one store's maintain returned no checkpoint; nothing was recorded"
        )
      )
      // a table of one store is its store: the table version is the store's, under the same unique ID
      AdjunctCommit(id.version, id.uniqueId, source, sourceBatchId)
    } else {
      val unchanged = latest.fold(Map.empty[Int, CheckpointId])(_.stores)
      AdjunctCommit(
        latest.fold(1L)(_.version + 1),
        freshUniqueId(),
        source,
        sourceBatchId,
        partitions,
        unchanged ++ byPartition
      )
    }
  }
}

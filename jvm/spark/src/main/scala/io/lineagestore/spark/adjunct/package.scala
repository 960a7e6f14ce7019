package io.lineagestore.spark

/** Adjunct tables' Spark glue (docs/adjunct-tables.md): the entry points Python's `lineagestore.adjunct`
  * calls through py4j ([[adjunct.AdjunctMaintain]] writes a batch of changes as one table version,
  * [[adjunct.AdjunctLookup]] joins events with a version, [[adjunct.AdjunctTable]] the table as the driver
  * sees it), the executors' replicas ([[adjunct.AdjunctReplicas]]), the changes a task ships to the driver
  * ([[adjunct.ChangePacking]]) and what a DataFrame's plan says of its partitioning
  * ([[adjunct.PlanPartitioning]]).
  *
  * Everything about the table that needs no Spark (its commit log, replica markers and storage layout, the
  * retention decisions, `lineagestore inspect`'s view) is core's [[io.lineagestore.adjunct]]. What needs
  * Spark's `private[sql]` APIs stays in the shim,
  * `org.apache.spark.sql.execution.streaming.state.lineagestore`: `InternalFrames` (a DataFrame over internal
  * rows, `internalCreateDataFrame`) and `SparkKeyPlacement` (the partition of a key by Spark's own
  * `HashPartitioning`, shared with repartition and migrate).
  */
package object adjunct

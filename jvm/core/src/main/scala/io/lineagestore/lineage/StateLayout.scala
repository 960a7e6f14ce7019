package io.lineagestore.lineage

/** Where Spark keeps each state store under a query's checkpoint (Spark's `StateStoreId`:
  * `storeCheckpointLocation`), decided here once for the tools, repartition and migrate:
  * `<checkpoint>/state/<operatorId>/<partitionId>`, plus `/<storeName>` for every store but the operator's
  * default one (a stream-stream join's four stores have names; most operators have the default store only).
  */
object StateLayout {
  val StateDir = "state"

  /** Spark's `StateStoreId.DEFAULT_STORE_NAME`. */
  val DefaultStoreName = "default"

  /** `<checkpoint>/state` (`state` when `checkpoint` is empty: a path relative to the checkpoint). */
  def stateRoot(checkpoint: String): String = under(checkpoint, StateDir)

  /** `<checkpoint>/state/<operatorId>`. */
  def operatorDir(checkpoint: String, operatorId: Long): String = s"${stateRoot(checkpoint)}/$operatorId"

  /** `<operatorDir>/<partitionId>[/<storeName>]`. */
  def storeDir(operatorDir: String, partitionId: Int, storeName: String): String = {
    val partition = under(operatorDir, partitionId.toString)
    if (storeName == DefaultStoreName) partition else s"$partition/$storeName"
  }

  /** `<checkpoint>/state/<operatorId>/<partitionId>[/<storeName>]`. */
  def storeDir(checkpoint: String, operatorId: Long, partitionId: Int, storeName: String): String =
    storeDir(operatorDir(checkpoint, operatorId), partitionId, storeName)

  private def under(dir: String, name: String): String =
    if (dir.isEmpty) name else s"${dir.stripSuffix("/")}/$name"
}

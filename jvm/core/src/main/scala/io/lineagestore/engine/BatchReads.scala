package io.lineagestore.engine

/** Whether each key the batch in progress read from committed state has a committed value: a write's
  * existence check (for key counts) then needs no lookup of its own.
  *
  * Batch-wide, because Spark's streaming aggregation reads every group's state (StateStoreRestoreExec) before
  * it writes any (StateStoreSaveExec, after a hash aggregation): remembering the last reads only (as this
  * class once did) missed every write and left a RocksDB lookup per written key (a tenth of the task's time
  * in the scale profile, docs/benchmarks.md). What it remembers is committed existence, which nothing changes
  * within a batch: the batch's own writes are answered by its pending writes first, and whatever changes the
  * committed state (a commit, a replayed delta, a replaced directory) forgets everything. At most `maxKeys`
  * keys are remembered (then later reads are not, and their writes look up). Task thread only, like every
  * write to the store.
  */
private[engine] final class BatchReads(maxKeys: Int) {
  import BatchReads._

  private val known = new java.util.HashMap[ByteKey, java.lang.Boolean]()

  /** `key` (not modified by the caller afterwards) has a committed value, or not. */
  def read(key: Array[Byte], exists: Boolean): Unit =
    if (known.size < maxKeys) known.put(new ByteKey(key), java.lang.Boolean.valueOf(exists))

  /** [[Exists]], [[Absent]] or [[Unknown]] (no boxing on the path of every write). */
  def existence(key: Array[Byte]): Int = known.get(new ByteKey(key)) match {
    case null => Unknown
    case b    => if (b.booleanValue) Exists else Absent
  }

  def forget(): Unit = if (!known.isEmpty) known.clear()
}

private[engine] object BatchReads {
  val Exists = 1
  val Absent = 0
  val Unknown: Int = -1

  /** Keys remembered per batch and store: 200,000 keys of ~50 bytes are ~25 MiB, held only until the batch
    * commits or aborts.
    */
  val MaxKeys = 200000
}

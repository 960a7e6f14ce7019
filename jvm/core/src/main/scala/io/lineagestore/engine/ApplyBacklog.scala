package io.lineagestore.engine

/** The bytes of committed batches handed to the apply threads and not yet written into RocksDB,
  * executor-wide, bounded: a commit whose batch would take the backlog past the bound waits, on its task
  * thread, until earlier batches are written (a batch larger than the bound by itself waits until the backlog
  * is empty, then goes alone). Each store holds its batch in progress within its `maxPendingBytes`; without
  * this bound, the batches its commits handed over were bounded by nothing: at 10M keys of 1 KiB, the first
  * batches of 16 stores (640 MiB each) waiting for two apply threads exhausted an 8 GiB heap
  * (docs/benchmarks.md).
  *
  * The bound only grows ([[raiseTo]]): the executor's stores share one backlog, bounded by the largest
  * `maxPendingBytes` among them (a store allowed a batch that large may hand one over).
  *
  * Thread-safe (its own monitor). Applies never wait for a commit, so a commit's wait always ends.
  */
final class ApplyBacklog(initialLimitBytes: Long) {
  require(initialLimitBytes > 0, s"the apply backlog's bound must be positive, got $initialLimitBytes")
  private var limit = initialLimitBytes
  private var bytes = 0L

  /** Waits until `n` bytes (at most the bound) fit, takes them, and returns what to [[release]]. */
  def acquire(n: Long): Long = synchronized {
    while (bytes > 0 && bytes + math.min(n, limit) > limit) wait()
    val take = math.max(0L, math.min(n, limit))
    bytes += take
    take
  }

  /** Gives back what [[acquire]] returned, once the batch is written (or failed). */
  def release(taken: Long): Unit = synchronized {
    bytes -= taken
    notifyAll()
  }

  /** Raises the bound to `limitBytes` if it is larger. */
  def raiseTo(limitBytes: Long): Unit = synchronized {
    if (limitBytes > limit) { limit = limitBytes; notifyAll() }
  }

  def limitBytes: Long = synchronized(limit)

  /** Bytes handed over and not yet written. */
  def backlogBytes: Long = synchronized(bytes)
}

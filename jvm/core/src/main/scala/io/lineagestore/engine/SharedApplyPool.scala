package io.lineagestore.engine

import java.util.concurrent.ExecutorService

/** The executor-wide threads that write committed batches into the local RocksDB instances after their
  * commits returned ([[LocalRocksDb.commitInBackground]]): as many as the JVM has processors, shared by every
  * store of the executor (an executor holding 200 stores still runs that many, never one per store). Daemon
  * threads; the pool lives as long as the JVM. A write never waits for another write on the pool, so a
  * bounded pool cannot deadlock.
  */
object SharedApplyPool {
  private var sharedBacklog: ApplyBacklog = null

  /** The executor's backlog of committed batches not yet written ([[ApplyBacklog]]), bounded by the largest
    * `limitBytes` (a store's `maxPendingBytes`) it was asked for.
    */
  def backlog(limitBytes: Long): ApplyBacklog = synchronized {
    if (sharedBacklog == null) sharedBacklog = new ApplyBacklog(limitBytes)
    else sharedBacklog.raiseTo(limitBytes)
    sharedBacklog
  }

  lazy val pool: ExecutorService =
    DaemonThreads.pool(math.max(1, Runtime.getRuntime.availableProcessors()), "lineagestore-apply")
}

package io.lineagestore.engine

import java.util.concurrent.{ExecutorService, Executors, ThreadFactory}
import java.util.concurrent.atomic.AtomicInteger

/** The executor-wide threads that write committed batches into the local RocksDB instances after their
  * commits returned ([[LocalRocksDb.commitInBackground]]): as many as the JVM has processors, shared by every
  * store of the executor (an executor holding 200 stores still runs that many, never one per store). Daemon
  * threads; the pool lives as long as the JVM. A write never waits for another write on the pool, so a
  * bounded pool cannot deadlock.
  */
object SharedApplyPool {
  lazy val pool: ExecutorService = {
    val counter = new AtomicInteger
    Executors.newFixedThreadPool(
      math.max(1, Runtime.getRuntime.availableProcessors()),
      new ThreadFactory {
        override def newThread(r: Runnable): Thread = {
          val t = new Thread(r, s"lineagestore-apply-${counter.incrementAndGet()}")
          t.setDaemon(true)
          t
        }
      }
    )
  }
}

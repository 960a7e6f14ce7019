package io.lineagestore.store

import java.util.concurrent.ExecutorService

import io.lineagestore.engine.DaemonThreads

/** The executor-wide pool every store's file transfers run on (uploads, downloads, hashing), as RocksDB
  * memory is shared ([[io.lineagestore.engine.SharedRocksDbMemory]]): an executor holding 200 stores runs
  * `transferThreads` transfer threads, not 200 times that. The first caller's size wins for the JVM's
  * lifetime; the threads are daemons and the pool is never shut down (stores come and go).
  *
  * No task on the pool waits for another task on it (callers wait from the task or maintenance thread), so a
  * bounded pool cannot deadlock; a store's large restore can delay another store's transfers, never block
  * them.
  */
object SharedTransferPool {
  private var current: Option[(Int, ExecutorService)] = None

  def apply(threads: Int): ExecutorService = synchronized {
    require(threads >= 1, s"transfer threads must be >= 1, got $threads")
    current.getOrElse {
      val pool = DaemonThreads.pool(threads, "lineagestore-transfer")
      current = Some((threads, pool))
      current.get
    }._2
  }

  /** The pool's size, once a store has created it. */
  def size: Option[Int] = synchronized(current.map(_._1))
}

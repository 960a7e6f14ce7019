package io.lineagestore.engine

import java.util.concurrent.{ExecutorService, Executors, ThreadFactory}
import java.util.concurrent.atomic.AtomicInteger

/** Threads of lineagestore's own pools: daemons, so an executor or a command's JVM never waits on them to
  * exit (work on them is either awaited by its caller or safe to lose with the process), each named
  * `<prefix>-<n>` so a thread dump says whose it is.
  */
object DaemonThreads {

  def factory(prefix: String): ThreadFactory = {
    val counter = new AtomicInteger
    (r: Runnable) => {
      val t = new Thread(r, s"$prefix-${counter.incrementAndGet()}")
      t.setDaemon(true)
      t
    }
  }

  /** A fixed pool of `threads` daemon threads named `<prefix>-<n>`. */
  def pool(threads: Int, prefix: String): ExecutorService =
    Executors.newFixedThreadPool(threads, factory(prefix))
}

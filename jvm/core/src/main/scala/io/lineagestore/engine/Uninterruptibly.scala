package io.lineagestore.engine

import java.util.concurrent.{CountDownLatch, Future}

/** Waits an interrupt must not cut short. Spark kills a task by interrupting its thread (a stopped query, a
  * speculative copy that won, a cancelled job), and the store stays in the executor for the next task: a wait
  * for work that writes into the store's files (a batch being written into RocksDB, transfers into the local
  * directory) must outlast the interrupt, or the next use of the store would close or replace those files
  * under the work, or read a RocksDB that lacks a committed batch without knowing it. Each such wait is
  * bounded by the work itself (a local write; a transfer its waiter interrupted).
  *
  * An interrupt that arrives during the wait is set again on the thread once it ends, so the caller's next
  * blocking call sees it.
  */
object Uninterruptibly {

  /** `f`'s result (or its ExecutionException) once it is done, however often the thread is interrupted. */
  def get[T](f: Future[T]): T = {
    var interrupted = false
    try {
      var result: Option[T] = None
      while (result.isEmpty)
        try result = Some(f.get())
        catch { case _: InterruptedException => interrupted = true }
      result.get
    } finally if (interrupted) Thread.currentThread.interrupt()
  }

  /** Returns once `latch` is open, however often the thread is interrupted. */
  def await(latch: CountDownLatch): Unit = {
    var interrupted = false
    try {
      while (latch.getCount > 0)
        try latch.await()
        catch { case _: InterruptedException => interrupted = true }
    } finally if (interrupted) Thread.currentThread.interrupt()
  }
}

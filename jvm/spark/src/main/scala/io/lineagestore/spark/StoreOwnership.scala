package io.lineagestore.spark

import org.apache.spark.TaskContext

/** One task at a time owns a provider's store: the batch in progress lives in one buffer, so two attempts of
  * a partition on one executor (speculation, a re-run) must not interleave. A second task waits for the owner
  * to commit, abort or finish (a task-completion listener releases for tasks that fail or never call either),
  * and fails with an error naming both after `timeoutMs`. The same task may acquire again (re-entrant).
  */
private[spark] final class StoreOwnership(describe: () => String, timeoutMs: Long) {
  private var owner: Option[Long] = None

  private def currentOwnerId: Long =
    Option(TaskContext.get()).map(_.taskAttemptId()).getOrElse(-1L - Thread.currentThread().getId)

  /** Blocks until the calling task owns the store; `onTaskEnd` runs when that task completes. */
  def acquire(onTaskEnd: () => Unit): Unit = {
    val me = currentOwnerId
    synchronized {
      val deadline = System.currentTimeMillis() + timeoutMs
      while (owner.exists(_ != me)) {
        val left = deadline - System.currentTimeMillis()
        if (left <= 0) {
          throw new IllegalStateException(
            s"${describe()} is in use by task ${owner.get}; task $me waited ${timeoutMs} ms for it. Two attempts " +
              "of one partition ran on one executor at once and the first did not finish."
          )
        }
        wait(left)
      }
      owner = Some(me)
    }
    Option(TaskContext.get()).foreach(_.addTaskCompletionListener[Unit] { _ =>
      try onTaskEnd()
      finally release(me)
    })
  }

  /** Releases ownership if the calling task (or `who`) holds it. */
  def release(who: Long = currentOwnerId): Unit = synchronized {
    if (owner.contains(who)) {
      owner = None
      notifyAll()
    }
  }
}

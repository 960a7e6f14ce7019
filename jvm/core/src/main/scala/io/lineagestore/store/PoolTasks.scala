package io.lineagestore.store

import java.util.concurrent.{CancellationException, CountDownLatch, ExecutorService}
import java.util.concurrent.atomic.AtomicBoolean

import io.lineagestore.engine.Uninterruptibly

/** Runs tasks on the transfer pool and waits for all of them: a snapshot's uploads, its downloads, the
  * hashing of local files before them.
  *
  * None outlives the wait. A download writes into the directory its load is filling: one still running after
  * the load gave up could replace a file that the next load (of another checkpoint, maybe) put there. So when
  * the waiting thread is interrupted (Spark kills a task that way), the tasks not yet started are skipped,
  * the running ones are interrupted, and the wait goes on until every task has ended; only then is the
  * InterruptedException thrown.
  */
private[store] object PoolTasks {

  /** The results of `bodies` run on `pool`, in order, once all have ended; the first failure (the others
    * suppressed in it) if any failed.
    */
  def runAll[T](pool: ExecutorService, bodies: Seq[() => T]): Seq[T] = {
    val skip = new AtomicBoolean(false)
    val ended = new CountDownLatch(bodies.size)
    val tasks = bodies.map(new Task(_, skip, ended))
    def stopAll(): Unit = { skip.set(true); tasks.foreach(_.interrupt()) }
    tasks.zipWithIndex.foreach { case (t, i) =>
      try pool.execute(t)
      catch {
        case e: Throwable => // never started (a pool shut down): the rest are not handed over either
          tasks.drop(i).foreach(_ => ended.countDown())
          stopAll()
          Uninterruptibly.await(ended)
          throw e
      }
    }
    try ended.await()
    catch {
      case e: InterruptedException =>
        stopAll()
        Uninterruptibly.await(ended)
        Thread.interrupted() // thrown below: the exception carries the interrupt, not the flag
        throw e
    }
    val outcomes = tasks.map(_.outcome)
    outcomes.collectFirst { case Left(t) => t }.foreach { first =>
      outcomes.collect { case Left(t) if t ne first => t }.foreach(first.addSuppressed)
      throw first
    }
    outcomes.collect { case Right(v) => v }
  }

  /** One body on the pool. Guarded: this object's monitor guards `runner`, so an interrupt meant for the body
    * never reaches the pool thread once it has moved on to another store's task.
    */
  private final class Task[T](body: () => T, skip: AtomicBoolean, ended: CountDownLatch) extends Runnable {
    @volatile var outcome: Either[Throwable, T] =
      Left(new CancellationException("not run: the thread waiting for it was interrupted"))
    private var runner: Thread = _

    override def run(): Unit =
      try {
        // the runner is known before `skip` is read: a stopAll that comes later interrupts it
        synchronized { runner = Thread.currentThread }
        try { if (!skip.get) outcome = Right(body()) }
        catch { case t: Throwable => outcome = Left(t) }
        finally synchronized { runner = null; Thread.interrupted() }
      } finally ended.countDown()

    def interrupt(): Unit = synchronized { if (runner != null) runner.interrupt() }
  }
}

package io.lineagestore.engine

import java.nio.charset.StandardCharsets.UTF_8
import java.util.concurrent.{CompletableFuture, Executor, LinkedBlockingQueue, TimeUnit}

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.testing.TempDirs

/** Committed batches waiting for the apply threads are bounded executor-wide ([[ApplyBacklog]]), on real
  * RocksDB instances: a commit past the bound waits until an earlier batch is written, and a written batch
  * stops holding memory before its store is used again.
  */
class ApplyBacklogSuite extends AnyFunSuite {

  /** An apply pool that runs nothing until the test says so. */
  private final class HeldPool extends Executor {
    private val held = new LinkedBlockingQueue[Runnable]()
    override def execute(r: Runnable): Unit = held.add(r)
    def runNext(): Unit = held.poll(10, TimeUnit.SECONDS).run()
    def heldCount: Int = held.size
  }

  private def k(i: Int): Array[Byte] = f"key-$i%06d".getBytes(UTF_8)
  private def v(i: Int): Array[Byte] = (s"$i-" + "x" * 1000).getBytes(UTF_8)

  private def newDb(pool: Executor, backlog: ApplyBacklog) =
    new LocalRocksDb(
      TempDirs.create("lineagestore-backlog"),
      RocksDbTuning(64L << 20, 16L << 20),
      Long.MaxValue,
      "maxPendingBytes",
      pool,
      backlog = backlog
    )

  test("a commit past the executor-wide bound waits for an earlier batch to be written") {
    val pool = new HeldPool
    val backlog = new ApplyBacklog(300L << 10)
    val a = newDb(pool, backlog)
    val b = newDb(pool, backlog)
    try {
      (0 until 200).foreach(i => a.put(k(i), v(i))) // ~200 KiB each
      (0 until 200).foreach(i => b.put(k(i), v(i)))
      a.commitInBackground()
      assert(backlog.backlogBytes > (200L << 10) && a.inFlightBytes > (200L << 10))
      assert(new String(a.get(k(7)), UTF_8) == new String(v(7), UTF_8), "reads look through the held batch")

      val bCommitted = CompletableFuture.runAsync(() => b.commitInBackground())
      Thread.sleep(300)
      assert(!bCommitted.isDone, "the second store's batch went past the bound")
      assert(pool.heldCount == 1)

      pool.runNext() // a's batch is written: b's commit goes on
      bCommitted.get(10, TimeUnit.SECONDS)
      assert(a.inFlightBytes == 0, "a written batch is still held until its store's next use")
      assert(new String(a.get(k(7)), UTF_8) == new String(v(7), UTF_8), "read from RocksDB once written")
      pool.runNext()
      assert(backlog.backlogBytes == 0)
      (0 until 200).foreach(i => assert(new String(b.get(k(i)), UTF_8) == new String(v(i), UTF_8)))
    } finally { a.close(); b.close() }
  }

  test("a batch larger than the bound waits until the backlog is empty, then goes alone") {
    val backlog = new ApplyBacklog(1000)
    assert(backlog.acquire(10) == 10)
    val big = CompletableFuture.supplyAsync(() => backlog.acquire(5000))
    Thread.sleep(200)
    assert(!big.isDone, "went past the bound beside another batch")
    backlog.release(10)
    assert(big.get(10, TimeUnit.SECONDS) == 1000, "takes the whole bound")
    val next = CompletableFuture.supplyAsync(() => backlog.acquire(1))
    Thread.sleep(200)
    assert(!next.isDone, "went in beside a batch that took the whole bound")
    backlog.raiseTo(2000) // a store with a larger maxPendingBytes opened
    assert(next.get(10, TimeUnit.SECONDS) == 1)
    assert(backlog.backlogBytes == 1001)
  }
}

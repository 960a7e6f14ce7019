package io.lineagestore.store

import java.io.InputStream
import java.util.concurrent.{CompletableFuture, CountDownLatch, Executor, Executors, TimeUnit}
import java.util.concurrent.atomic.{AtomicBoolean, AtomicInteger}

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.lineage.{CheckpointId, LoadBase}

/** Spark kills a task by interrupting its thread (a stopped query, a speculative copy that won, a cancelled
  * job) and keeps the store for the next task. Whatever the interrupt cuts short must not leave work running
  * under the store: a download still writing into the directory the next load fills, a batch still being
  * written into RocksDB that the next read does not wait for.
  */
class InterruptedTaskSuite extends AnyFunSuite with StoreFixture {
  override protected def defaultSettings: StoreSettings =
    StoreSettings.Default.copy(minDeltasForSnapshot = 3, maxSnapshotLagDeltas = 100)

  /** Runs `body` on a thread of its own; its outcome (result or failure) and whether it ended interrupted. */
  private def onThread[T](body: => T): (Thread, CompletableFuture[(Either[Throwable, T], Boolean)]) = {
    val outcome = new CompletableFuture[(Either[Throwable, T], Boolean)]
    val t = new Thread(() => {
      val r =
        try Right(body)
        catch { case e: Throwable => Left(e) }
      outcome.complete((r, Thread.currentThread.isInterrupted))
    })
    t.start()
    (t, outcome)
  }

  private def awaitWaiting(t: Thread): Unit = {
    val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10)
    while (t.getState != Thread.State.WAITING && t.getState != Thread.State.TIMED_WAITING) {
      assert(System.nanoTime() < deadline, s"${t.getName} never waited (${t.getState})")
      Thread.sleep(5)
    }
  }

  test(
    "a load interrupted while its snapshot's files download ends them all before it throws, detours none"
  ) {
    val s = newStore()
    s.load(CheckpointId.Empty)
    val ids = (1 to 3).map { v =>
      val id = commitBatch(s, (1 to 300).map(i => s"k$v-$i" -> ("v" * 300 + v)).toMap)
      s.load(id)
      s.uploadSnapshots()
      id
    }
    assert(files.hasSnapshot(ids(2)))
    // reading a shared file (an SST of the snapshot) blocks until interrupted while armed
    val armed = new AtomicBoolean(true)
    val reading = new AtomicInteger
    val firstRead = new CountDownLatch(1)
    val never = new CountDownLatch(1)
    val blocking = new DelegatingBlobStore(remoteBlobs) {
      override def open(name: String): InputStream = {
        if (armed.get && name.startsWith("shared/")) {
          reading.incrementAndGet()
          firstRead.countDown()
          try never.await()
          finally reading.decrementAndGet()
        }
        super.open(name)
      }
    }
    val cold = newStore(checkpointFiles = filesOn(blocking))
    val (loader, outcome) = onThread(cold.load(ids(2)))
    assert(firstRead.await(10, TimeUnit.SECONDS))
    loader.interrupt()
    val (result, _) = outcome.get(30, TimeUnit.SECONDS)
    assert(result.left.toOption.exists(_.isInstanceOf[InterruptedException]), result)
    // no transfer of the abandoned load still runs (the fixture's pool has 4 threads: several were reading)
    assert(reading.get == 0)
    assert(cold.counters.snapshotDetours.get == 0)
    armed.set(false)
    assert(cold.load(ids(2)).base == LoadBase.Snapshot(ids(2)))
    assert(contents(cold) == (1 to 3).flatMap(v => (1 to 300).map(i => s"k$v-$i" -> ("v" * 300 + v))).toMap)
  }

  test("a read interrupted while the last batch is still being written waits for it, then reads it") {
    val release = new CountDownLatch(1)
    val held: Executor = r => new Thread(() => { release.await(); r.run() }).start()
    val s = newStore(applyPool = held)
    s.load(CheckpointId.Empty)
    commitBatch(s, Map("a" -> "1", "b" -> "2")) // returns with the batch handed to the (held) apply thread
    val (reader, outcome) = onThread(contents(s))
    awaitWaiting(reader)
    reader.interrupt()
    Thread.sleep(300)
    assert(!outcome.isDone, "the read gave up on the batch in flight")
    release.countDown()
    // the read saw the batch once written, and the interrupt is still set for the task's next blocking call
    assert(outcome.get(30, TimeUnit.SECONDS) == ((Right(Map("a" -> "1", "b" -> "2")), true)))
    assert(contents(s) == Map("a" -> "1", "b" -> "2"))
  }

  test(
    "transfers not started when their waiter is interrupted never run, and no pool thread stays interrupted"
  ) {
    val single = Executors.newSingleThreadExecutor()
    try {
      val started = new CountDownLatch(1)
      val never = new CountDownLatch(1)
      val ran = new AtomicInteger
      val (waiter, outcome) = onThread(
        PoolTasks.runAll(
          single,
          Seq(() => { started.countDown(); never.await(); 1 }, () => { ran.incrementAndGet(); 2 })
        )
      )
      assert(started.await(10, TimeUnit.SECONDS))
      waiter.interrupt()
      val (result, _) = outcome.get(30, TimeUnit.SECONDS)
      assert(result.left.toOption.exists(_.isInstanceOf[InterruptedException]), result)
      assert(ran.get == 0)
      // the pool's thread runs the next task uninterrupted
      assert(PoolTasks.runAll(single, Seq(() => Thread.currentThread.isInterrupted)) == Seq(false))
      assert(PoolTasks.runAll(single, Seq(() => 1, () => 2, () => 3)) == Seq(1, 2, 3))
    } finally single.shutdownNow()
  }

  test("a close whose upload runs out of time returns once the interrupted upload has ended") {
    // writing a shared blob blocks until interrupted, then takes a moment to end (a part in flight)
    val writing = new AtomicInteger
    val firstWrite = new CountDownLatch(1)
    val never = new CountDownLatch(1)
    val slowToEnd = new DelegatingBlobStore(remoteBlobs) {
      override def write(name: String)(body: java.io.OutputStream => Unit): Unit = {
        if (name.startsWith("shared/")) {
          writing.incrementAndGet()
          firstWrite.countDown()
          try never.await()
          catch { case e: InterruptedException => Thread.sleep(300); throw e }
          finally writing.decrementAndGet()
        }
        super.write(name)(body)
      }
    }
    val s = newStore(checkpointFiles = filesOn(slowToEnd))
    s.load(CheckpointId.Empty)
    val id = commitBatch(s, (1 to 300).map(i => s"k$i" -> ("v" * 300)).toMap)
    s.load(id)
    s.freezeNow()
    assert(s.uploadBeforeClose(200) == Seq(id))
    assert(firstWrite.getCount == 0, "the upload never started")
    // nothing of the upload still runs when the close goes on (closing RocksDB, releasing the directory)
    assert(writing.get == 0)
    assert(!files.hasSnapshot(id))
  }
}

package io.lineagestore.store

import java.nio.charset.StandardCharsets.UTF_8
import java.util.concurrent.ConcurrentLinkedQueue
import java.util.concurrent.atomic.{AtomicInteger, AtomicReference}
import java.util.concurrent.locks.ReentrantReadWriteLock

import scala.jdk.CollectionConverters._

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.lineage.CheckpointId

/** The threading contract of [[CommittedView]]: any number of threads read one store's committed state at
  * once (an adjunct table's replica, read by an executor's concurrent tasks), beside the owner's writes to
  * its batch in progress, and between the owner's loads of other versions, which a lock keeps apart from the
  * reads (`AdjunctReplicas`'s gate, here a read-write lock). Every answer is the version's; a view is never
  * answered from another version; the readers are bounded in time, so a spin or deadlock fails the test
  * instead of hanging the build. `ConcurrentReplicaSuite` (spark) runs the same through the replicas.
  */
class CommittedViewSuite extends AnyFunSuite with StoreFixture {
  override protected def defaultSettings: StoreSettings = StoreSettings.Default

  private val Keys = 60000
  private val Versions = 5
  private def key(i: Int) = b(f"key-$i%06d")

  /** A lineage of `Versions` checkpoints: the first writes every key, each later one a hundredth of them anew
    * and deletes a few; with the state after each.
    */
  private def writeVersions(): IndexedSeq[(CheckpointId, Map[Int, String])] = {
    val writer = newStore()
    writer.load(CheckpointId.Empty)
    var state = Map.empty[Int, String]
    (1 to Versions).map { v =>
      (0 until Keys).foreach { i =>
        if (v == 1 || i % 100 == v) { state += i -> s"v$v-$i"; writer.put(D, key(i), b(s"v$v-$i")) }
        // i % 100 == 50 + v here, never a key the branch above puts (500 + v was: no key was ever deleted)
        else if (i % 1000 == 550 + v) { state -= i; writer.delete(D, key(i)) }
      }
      (writer.commit(), state)
    }
  }

  test("threads read one view at once, beside the owner's writes and between its loads; answers are right") {
    val versions = writeVersions()
    val store = newStore()
    val gate = new ReentrantReadWriteLock(true) // readers share it; the owner loads holding it alone
    store.load(versions(0)._1)
    val current = new AtomicReference((store.committedView(), versions(0)._2))
    val failures = new ConcurrentLinkedQueue[Throwable]()
    val inside = new AtomicInteger
    val mostInside = new AtomicInteger
    val rounds = new AtomicInteger
    val loads = new AtomicInteger
    val Loads = 2 * Versions // twice through the lineage: forward by one delta, and back to the first version
    def bounded(name: String)(body: => Unit): Thread = {
      val t = new Thread(
        () =>
          try body
          catch { case e: Throwable => failures.add(e) },
        name
      )
      t.setDaemon(true) // a thread spinning forever must not keep the test JVM alive
      t
    }
    def running = loads.get < Loads && failures.isEmpty
    val readers = (0 until 4).map { t =>
      bounded(s"view-reader-$t") {
        val rnd = new scala.util.Random(t)
        while (running) {
          gate.readLock().lock()
          try {
            mostInside.accumulateAndGet(inside.incrementAndGet(), math.max)
            val (view, expected) = current.get
            (0 until 3000).foreach { _ =>
              val i = rnd.nextInt(Keys + Keys / 10) // a tenth of the keys asked for were never written
              val got = Option(view.get(D, key(i))).map(new String(_, UTF_8))
              assert(got == expected.get(i), s"${view.checkpoint}, key $i")
            }
            // the same keys read together (one MultiGet), as the adjunct lookup reads a task's events
            val asked = IndexedSeq.fill(500)(rnd.nextInt(Keys + Keys / 10))
            val many = view.getMany(D, asked.map(key).asJava).asScala
            asked.zip(many).foreach { case (i, got) =>
              assert(
                Option(got).map(new String(_, UTF_8)) == expected.get(i),
                s"${view.checkpoint}, key $i read with others"
              )
            }
            // the owner's batch in progress is not committed state
            assert(view.get(D, b("pending")) == null, "a view saw the batch in progress")
            if (t == 0 && rnd.nextInt(8) == 0) {
              val it = view.scan(D, Array.emptyByteArray, null)
              val rows =
                try it.size
                finally it.close()
              assert(rows == expected.size, s"a scan of ${view.checkpoint}")
            }
            rounds.incrementAndGet()
          } finally { inside.decrementAndGet(); gate.readLock().unlock() }
        }
      }
    }
    val owner = bounded("view-owner") {
      var v = 0
      while (running) {
        // writes to the batch in progress while the readers read: a view never sees them
        store.put(D, b("pending"), b("uncommitted"))
        Thread.sleep(20)
        gate.writeLock().lock()
        try {
          v = (v + 1) % Versions
          store.load(versions(v)._1)
          current.set((store.committedView(), versions(v)._2))
          loads.incrementAndGet()
        } finally gate.writeLock().unlock()
      }
    }
    val threads = readers :+ owner
    threads.foreach(_.start())
    val bound = System.currentTimeMillis() + 60000L
    threads.foreach(t => t.join(math.max(1L, bound - System.currentTimeMillis())))
    val stuck = threads.filter(_.isAlive)
    if (stuck.nonEmpty)
      fail(
        s"${stuck.size} thread(s) still running a minute after the run should have ended (a spin or " +
          "deadlock):\n" + stuck
            .map(t => s"${t.getName}:\n  " + t.getStackTrace.take(12).mkString("\n  "))
            .mkString("\n")
      )
    failures.asScala.headOption.foreach(e => throw e)
    assert(mostInside.get >= 2, "no two readers ever read at once: the test tested nothing")
    assert(rounds.get >= Loads, s"${rounds.get} rounds of reads over $Loads loads")
  }

  test("a view used after its store loaded or committed another checkpoint fails, naming both") {
    val versions = writeVersions()
    val store = newStore()
    intercept[IllegalStateException](store.committedView()) // nothing loaded yet
    store.load(versions(1)._1)
    val view = store.committedView()
    assert(view.checkpoint == versions(1)._1)
    assert(
      new String(view.get(D, key(1)), UTF_8) == "v1-1" && new String(view.get(D, key(2)), UTF_8) == "v2-2"
    )
    store.load(versions(2)._1)
    val e = intercept[IllegalStateException](view.get(D, key(1)))
    assert(e.getMessage.contains(versions(1)._1.toString) && e.getMessage.contains(versions(2)._1.toString))
    intercept[IllegalStateException](view.scan(D, Array.emptyByteArray, null))
    intercept[IllegalStateException](view.getMany(D, java.util.List.of(key(1))))
    val again = store.committedView()
    store.put(D, key(3), b("next"))
    assert(new String(again.get(D, key(3)), UTF_8) == "v3-3", "a view read the batch in progress")
    // read together: in the order asked, null for a key never written or only in the batch in progress
    store.put(D, key(Keys + 1), b("pending"))
    val together = again.getMany(D, Seq(key(3), key(Keys + 5), key(1), key(Keys + 1)).asJava).asScala
    assert(together.map(Option(_).map(new String(_, UTF_8))) == Seq(Some("v3-3"), None, Some("v1-1"), None))
    assert(again.getMany(D, java.util.List.of()).isEmpty)
    val next = store.commit()
    assert(intercept[IllegalStateException](again.get(D, key(3))).getMessage.contains(next.toString))
    // a view taken after the commit waits for its batch to be in RocksDB, and reads it
    assert(new String(store.committedView().get(D, key(3)), UTF_8) == "next")
  }
}

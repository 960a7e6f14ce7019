package io.lineagestore.spark.adjunct

import java.io.File
import java.nio.charset.StandardCharsets.UTF_8
import java.util.concurrent.{ConcurrentLinkedQueue, Executors}
import java.util.concurrent.atomic.{AtomicInteger, AtomicLong}

import scala.jdk.CollectionConverters._

import org.apache.hadoop.fs.Path
import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.config.LineageConf
import io.lineagestore.adjunct.AdjunctTableLog
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.store.ColumnFamilies
import io.lineagestore.testing.{LocalStores, TempDirs}

/** An executor's replica of an adjunct table is read by its concurrent tasks (the readers-writer gate of
  * [[AdjunctReplicas.Replica]] lets every task of the loaded version in together), and a task wanting another
  * version waits until none reads, then loads it. Several threads here look keys up in one replica and scan
  * it, each going through a lineage of versions in the same order and back to the first, so the replica
  * reloads between rounds of concurrent reads; every answer must be the version's. Before the lookups read
  * through a view of the committed state ([[io.lineagestore.store.CommittedView]]), each get recorded the
  * read in the store's pending-writes table, which is not thread-safe: `ArrayIndexOutOfBoundsException` in
  * `KeyTable.insertAt`, or threads spinning forever in `KeyTable.slotOf` (issue 52). The readers are daemon
  * threads and the test waits for them within a bound, so a spin fails the test, naming where the threads
  * are, instead of hanging the build.
  */
class ConcurrentReplicaSuite extends AnyFunSuite {
  private val Keys = 120000
  private val Versions = 4
  private val Readers = 4
  private val GetsPerRound = 30000
  private val BoundMs = 60000L // far above a run on a loaded 2-core machine (seconds); reached only by a hang

  private def b(s: String) = s.getBytes(UTF_8)
  private def key(i: Int) = b(f"key-$i%06d")

  test("concurrent lookups and scans of one replica, reloading between versions, see each version's rows") {
    val root = TempDirs.create("lineagestore-concurrent-replica")
    val table = new Path(new File(root, "table").toURI)
    val storePath = new Path(table, AdjunctTableLog.StoreDir).toString
    val pool = Executors.newFixedThreadPool(2)
    // a chain of versions: the first writes every key, each later one rewrites a hundredth of them and deletes
    // a few, so loading the next version replays a small delta and the replica changes version often
    val writer = LocalStores.store(storePath, new File(root, "writer"), pool)
    val D = ColumnFamilies.DefaultId
    val versions =
      try {
        writer.load(CheckpointId.Empty)
        var state = Map.empty[Int, String]
        (1 to Versions).map { v =>
          (0 until Keys).foreach { i =>
            if (v == 1 || i % 100 == v) { state += i -> s"v$v-$i"; writer.put(D, key(i), b(s"v$v-$i")) }
            else if (i % 1000 == 500 + v) { state -= i; writer.delete(D, key(i)) }
          }
          (writer.commit(), state)
        }
      } finally writer.close()

    val replica = AdjunctReplicas.replica(
      storePath,
      Map(LineageConf.LocalDir.key -> new File(root, "local").getPath),
      -1
    )
    val failures = new ConcurrentLinkedQueue[Throwable]()
    val inside = new AtomicInteger // threads holding the replica now
    val mostInside = new AtomicInteger
    val rounds = new AtomicLong
    val threads = (0 until Readers).map { t =>
      val thread = new Thread(
        () =>
          try {
            val rnd = new scala.util.Random(t)
            // every reader goes through the versions in the same order, and back to the first (a load from
            // scratch): the last to leave a version lets the first to want the next one load it, and the
            // others then read it together
            for (round <- 0 to Versions if failures.isEmpty) {
              val v = round % Versions
              val (id, expected) = versions(v)
              val store = replica.acquire(id)
              mostInside.accumulateAndGet(inside.incrementAndGet(), math.max)
              try {
                rounds.incrementAndGet()
                (0 until GetsPerRound).foreach { _ =>
                  val i = rnd.nextInt(Keys + Keys / 10) // a tenth of the keys asked for were never written
                  val got = Option(store.get(D, key(i))).map(new String(_, UTF_8))
                  if (got != expected.get(i))
                    throw new AssertionError(
                      s"version ${id.version}, key $i: got $got, expected ${expected.get(i)}"
                    )
                }
                if (t == 0 && round % 2 == 1) { // a whole-table read (AdjunctLookup.read) beside the lookups
                  val scan = store.scan(D, Array.emptyByteArray, null)
                  val rows =
                    try scan.size
                    finally scan.close()
                  if (rows != expected.size)
                    throw new AssertionError(
                      s"version ${id.version}: a scan saw $rows rows, not ${expected.size}"
                    )
                }
              } finally {
                inside.decrementAndGet()
                replica.release()
              }
            }
          } catch { case e: Throwable => failures.add(e) },
        s"replica-reader-$t"
      )
      thread.setDaemon(true) // a thread spinning forever must not keep the test JVM alive
      thread
    }
    try {
      threads.foreach(_.start())
      val bound = System.currentTimeMillis() + BoundMs
      threads.foreach(t => t.join(math.max(1L, bound - System.currentTimeMillis())))
      val stuck = threads.filter(_.isAlive)
      if (stuck.nonEmpty)
        fail(
          s"${stuck.size} reader(s) of one replica still running ${BoundMs / 1000} s after the run should have " +
            "ended (a spin or deadlock):\n" + stuck
              .map(t => s"${t.getName}:\n  " + t.getStackTrace.take(12).mkString("\n  "))
              .mkString("\n")
        )
      failures.asScala.headOption.foreach(e => throw e)
      // the run read concurrently, and the replica changed version under the gate while it did
      assert(mostInside.get >= 2, "no two readers ever held the replica at once: the test tested nothing")
      assert(rounds.get == Readers * (Versions + 1))
      assert(replica.stats("deltasReplayed") > 1, s"the replica never changed version: ${replica.stats}")
    } finally pool.shutdown() // the replica stays open, as on an executor, until the JVM ends
  }
}

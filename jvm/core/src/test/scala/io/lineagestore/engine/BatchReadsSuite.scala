package io.lineagestore.engine

import java.nio.charset.StandardCharsets.UTF_8

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.testing.TempDirs

/** A write's existence check (key counts) reuses the batch's earlier read of its key, remembered in the
  * batch's pending-writes map ([[PendingWrites.noteRead]]), on a real RocksDB: streaming aggregation reads
  * every group's state before it writes any.
  */
class BatchReadsSuite extends AnyFunSuite {
  private def k(i: Int): Array[Byte] = f"key-$i%04d".getBytes(UTF_8)
  private val v = "v".getBytes(UTF_8)

  private def withDb(body: LocalRocksDb => Unit): Unit = withLimitedDb(Long.MaxValue)(body)

  private def withLimitedDb(pendingLimitBytes: Long)(body: LocalRocksDb => Unit): Unit = {
    val dir = TempDirs.create("lineagestore-batch-reads")
    val db = new LocalRocksDb(dir, RocksDbTuning(64L << 20, 16L << 20), pendingLimitBytes, "maxPendingBytes")
    try body(db)
    finally db.close()
  }

  test("every key read, then every key written: the writes look nothing up, and their answers are right") {
    withDb { db =>
      (0 until 200 by 2).foreach(i => db.put(k(i), v)) // even keys exist
      db.commit()
      (0 until 200).foreach(i => db.get(k(i)))
      val before = db.committedLookups
      val existed = (0 until 200).map { i =>
        val e = db.exists(k(i))
        if (i % 3 == 0) db.delete(k(i)) else db.put(k(i), v)
        e
      }
      assert(db.committedLookups == before, "an existence check looked up a key the batch had read")
      assert(existed == (0 until 200).map(_ % 2 == 0))
      // the batch's own writes answer before what was read
      assert(!db.exists(k(0)) && db.exists(k(1)))
    }
  }

  test("what a batch read is forgotten when the committed state changes or the batch is dropped") {
    withDb { db =>
      db.put(k(1), v)
      db.commit()
      assert(db.get(k(1)) != null && db.get(k(2)) == null)
      db.delete(k(1))
      db.put(k(2), v)
      db.commitInBackground() // committed state changes: the reads above no longer hold
      val before = db.committedLookups
      assert(!db.exists(k(1)) && db.exists(k(2)))
      assert(db.committedLookups == before + 2)
      assert(db.get(k(2)) != null)
      db.abort()
      db.put(k(3), v)
      db.commit()
      assert(db.exists(k(2)) && db.exists(k(3)) && !db.exists(k(1)))
    }
  }

  test("a remembered read is not a change: not in the batch's size, entries, scans, log or what it applies") {
    val logged = scala.collection.mutable.ArrayBuffer.empty[String]
    val log = new BatchLog {
      def put(key: Array[Byte], value: Array[Byte]): Unit = logged += new String(key, UTF_8)
      def delete(key: Array[Byte]): Unit = logged += ("-" + new String(key, UTF_8))
      def discard(): Unit = logged += "discarded"
    }
    val dir = TempDirs.create("lineagestore-batch-reads")
    val db =
      new LocalRocksDb(
        dir,
        RocksDbTuning(64L << 20, 16L << 20),
        Long.MaxValue,
        "maxPendingBytes",
        openLog = () => log
      )
    try {
      db.put(k(1), v)
      db.put(k(2), v)
      db.pending.takeLog()
      db.commit()
      logged.clear()
      (0 until 4).foreach(i => db.get(k(i)))
      assert(db.pending.isEmpty && db.pending.size == 0 && db.pending.sizeBytes == 0)
      assert(db.pending.range(k(0), null).isEmpty)
      db.put(k(0), v) // read before: still the key's first change, so the log takes it
      db.delete(k(1))
      assert(db.pending.size == 2 && !db.pending.logRefused)
      assert(
        db.pending.range(k(0), null).map(e => new String(e._1, UTF_8)).toList == List("key-0000", "key-0001")
      )
      val entries = scala.collection.mutable.ArrayBuffer.empty[String]
      db.pending.foreachEntry((key, _) => entries += new String(key, UTF_8))
      assert(entries.sorted == Seq("key-0000", "key-0001"))
      assert(logged == Seq("key-0000", "-key-0001"))
      assert(db.pending.takeLog() eq log)
      db.commit()
      assert(db.scan(k(0), null).map(e => new String(e._1, UTF_8)).toList == List("key-0000", "key-0002"))
    } finally db.close()
  }

  test("a replayed change forgets the reads, keeping the batch's writes") {
    withDb { db =>
      db.put(k(1), v)
      db.commit()
      assert(db.get(k(1)) != null && db.get(k(2)) == null)
      db.put(k(3), v)
      db.applyCommitted { records => records.delete(k(1)); records.put(k(2), v) }
      assert(!db.exists(k(1)) && db.exists(k(2)) && db.exists(k(3)))
      assert(db.pending.size == 1)
    }
  }

  test("reads are remembered within their share of the batch's bound; a read then written leaves it") {
    // a budget of 128 KiB (an eighth of 1 MiB): about 1,800 reads of these keys
    withLimitedDb(1L << 20) { db =>
      def r(i: Int) = f"r-$i%07d".getBytes(UTF_8)
      val n = 4000
      (0 until n).foreach(i => db.get(r(i)))
      var before = db.committedLookups
      assert(!db.exists(r(n - 1)) && !db.exists(r(0)))
      assert(db.committedLookups == before + 1, "the first read is remembered, the last is not")
      // every remembered read written: the budget is free again for the reads that follow
      (0 until n).foreach(i => db.put(r(i), v))
      (n until 2 * n).foreach(i => db.get(r(i)))
      before = db.committedLookups
      assert(!db.exists(r(n)) && db.committedLookups == before)
    }
  }

  test(
    "a read of committed state for threads sharing the store leaves no trace in the batch, and needs no batch in flight"
  ) {
    val held = new java.util.concurrent.LinkedBlockingQueue[Runnable]
    @volatile var holding = false // the apply pool holds each batch's write until the test runs it
    val applyPool: java.util.concurrent.Executor = r => if (holding) held.add(r) else r.run()
    val dir = TempDirs.create("lineagestore-batch-reads")
    val db =
      new LocalRocksDb(dir, RocksDbTuning(64L << 20, 16L << 20), Long.MaxValue, "maxPendingBytes", applyPool)
    def keys(it: CloseableIterator[(Array[Byte], Array[Byte])]) =
      try it.map(kv => new String(kv._1, UTF_8)).toList
      finally it.close()
    try {
      db.put(k(1), v)
      db.commit()
      assert(db.readCommitted(k(1)) sameElements v)
      assert(db.readCommitted(k(2)) == null)
      var before = db.committedLookups
      assert(db.exists(k(1)) && !db.exists(k(2)))
      assert(db.committedLookups == before + 2, "a shared read was remembered in the batch")
      db.get(k(4)) // the owner's read is (a write's existence check then looks nothing up)
      before = db.committedLookups
      assert(!db.exists(k(4)) && db.committedLookups == before)
      db.put(k(3), v) // the batch in progress: not committed state
      assert(db.readCommitted(k(3)) == null)
      assert(keys(db.scanCommitted(k(0), null)) == List("key-0001"))
      assert(keys(db.scan(k(0), null)) == List("key-0001", "key-0003"))
      holding = true
      db.commitInBackground()
      intercept[IllegalStateException](db.readCommitted(k(3))) // RocksDB may not hold the batch yet
      intercept[IllegalStateException](db.scanCommitted(k(0), null))
      held.take().run()
      db.awaitApplied()
      assert(db.readCommitted(k(3)) sameElements v)
      assert(keys(db.scanCommitted(k(0), null)) == List("key-0001", "key-0003"))
    } finally { holding = false; db.close() }
  }

  test(
    "appends to a list check existence without its value: one lookup per key and batch, batch in flight too"
  ) {
    val held = new java.util.concurrent.LinkedBlockingQueue[Runnable]
    @volatile var holding = false // the apply pool holds each batch's write until the test runs it
    val applyPool: java.util.concurrent.Executor = r => if (holding) held.add(r) else r.run()
    val dir = TempDirs.create("lineagestore-batch-reads")
    val db =
      new LocalRocksDb(dir, RocksDbTuning(64L << 20, 16L << 20), Long.MaxValue, "maxPendingBytes", applyPool)
    val element = Array.fill[Byte](64)('e'.toByte)
    def list(n: Int) = Seq.fill(n)(new String(element, UTF_8)).mkString(",")
    // 50 appends to each of 12 keys; the committed lookups they made
    def appendRound(existedBefore: Int => Boolean): Long = {
      val before = db.committedLookups
      (0 until 50).foreach { round =>
        (0 until 12).foreach { i =>
          assert(db.exists(k(i)) == (round > 0 || existedBefore(i)), s"key $i, append $round")
          db.merge(k(i), element)
        }
      }
      db.committedLookups - before
    }
    try {
      (0 until 10).foreach(i => db.merge(k(i), element))
      db.commit()
      assert(appendRound(_ < 10) == 12, "appends looked up the committed lists")
      db.commit()
      assert(appendRound(_ => true) == 12)
      holding = true
      db.commitInBackground()
      // a batch in flight (its write held): existence answered from its entries, with no wait for the write
      // (one would wait until the rescue below runs the write)
      @volatile var rescued = false
      val rescue = new Thread(() => {
        Thread.sleep(5000)
        Option(held.poll()).foreach { r => rescued = true; r.run() }
      })
      rescue.setDaemon(true)
      rescue.start()
      db.delete(k(11)) // this batch clears one list, then appends to it
      assert(appendRound(_ != 11) == 11)
      assert(!rescued, "an existence check waited for the batch in flight")
      Option(held.poll()).foreach(_.run())
      holding = false
      db.commit()
      def elements(i: Int) = new String(db.get(k(i)), UTF_8).split(',').toSeq
      assert(elements(0) == list(1 + 3 * 50).split(',').toSeq)
      assert(elements(10) == list(3 * 50).split(',').toSeq)
      assert(elements(11) == list(50).split(',').toSeq) // cleared in the last batch, then 50 appends
    } finally { holding = false; db.close() }
  }
}

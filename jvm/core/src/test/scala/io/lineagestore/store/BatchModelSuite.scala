package io.lineagestore.store

import java.nio.charset.StandardCharsets.UTF_8

import scala.collection.immutable.TreeMap
import scala.util.Random

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.lineage.CheckpointId

/** A store against a plain in-memory model under random batches of reads, writes, deletes, appends, scans
  * (some deleting what they visit, as watermark eviction does), commits and aborts over a small key space, so
  * that keys are read, written and deleted several times within one batch. Checks every read, every scan, the
  * key count after each commit, and that a store restored from the blob store alone holds the same. Guards
  * the batch-in-progress structures (hash lookups, key order built on demand, the existence check that reuses
  * the last read) and the write of a commit on an apply thread (reads through the in-flight batch): with
  * seeds 4-6 every apply waits a random few milliseconds first, so the next batch's reads and writes meet
  * batches still in flight.
  */
class BatchModelSuite extends AnyFunSuite with StoreFixture {
  override protected def defaultSettings: StoreSettings = StoreSettings.Default.copy(minDeltasForSnapshot = 4)

  private def key(i: Int): String = f"key-$i%03d"
  private def str(a: Array[Byte]): String = if (a == null) null else new String(a, UTF_8)

  /** Runs each apply on its own thread after 0-4 ms. */
  private def slowApplies(seed: Int): java.util.concurrent.Executor = {
    val delays = new Random(seed * 31)
    r => {
      val delay = delays.synchronized(delays.nextInt(5))
      new Thread(() => { Thread.sleep(delay.toLong); r.run() }).start()
    }
  }

  for (seed <- 1 to 6)
    test(s"random batches agree with a model (seed $seed${if (seed > 3) ", slow applies" else ""})") {
      val rnd = new Random(seed)
      val s = if (seed > 3) newStore(applyPool = slowApplies(seed)) else newStore()
      s.load(CheckpointId.Empty)
      var committed = TreeMap.empty[String, String]
      var lastId = CheckpointId.Empty
      for (batch <- 1 to 25) {
        var model = committed
        def check(k: String): Unit =
          assert(str(s.get(D, b(k))) == model.getOrElse(k, null), s"get $k in batch $batch (seed $seed)")
        for (_ <- 1 to rnd.between(1, 300)) {
          val k = key(rnd.nextInt(60))
          rnd.nextInt(10) match {
            case 0 | 1 => check(k)
            case 2 | 3 => // read, then write the same key: the pattern of Spark's aggregation and dedup
              check(k)
              val v = s"$batch.${rnd.nextInt(1000)}"
              s.put(D, b(k), b(v)); model += k -> v
            case 4 | 5 =>
              val v = s"$batch.${rnd.nextInt(1000)}"
              s.put(D, b(k), b(v)); model += k -> v
            case 6 =>
              if (rnd.nextBoolean()) check(k)
              s.delete(D, b(k)); model -= k
            case 7 =>
              val e = s"m${rnd.nextInt(100)}"
              s.merge(D, b(k), b(e))
              model += k -> model.get(k).map(_ + "," + e).getOrElse(e)
            case 8 =>
              val from = key(rnd.nextInt(60))
              val it = s.scan(D, b(from), null)
              val seen =
                try it.map { case (kk, v) => str(kk) -> str(v) }.toList
                finally it.close()
              assert(seen == model.rangeFrom(from).toList, s"scan from $from in batch $batch (seed $seed)")
            case _ => // evict: delete every key visited from some point on
              val from = key(rnd.nextInt(60))
              val it = s.scan(D, b(from), null)
              try it.foreach { case (kk, _) => s.delete(D, kk) }
              finally it.close()
              model = model.filterNot(_._1 >= from)
          }
        }
        if (rnd.nextInt(6) == 0) {
          s.abort()
          committed.keys.foreach(k => assert(str(s.get(D, b(k))) == committed(k)))
        } else {
          lastId = s.commit()
          committed = model
          assert(s.columnFamilies.counts("default") == committed.size, s"key count after batch $batch")
          // now and then only: a scan waits for the apply, and the next batch should meet it in flight
          if (rnd.nextInt(4) == 0)
            assert(contents(s) == committed, s"after commit of batch $batch (seed $seed)")
        }
      }
      val restored = newStore()
      restored.load(lastId)
      assert(contents(restored) == committed)
      assert(restored.columnFamilies.counts("default") == committed.size)
    }

  test("reads during an apply still in flight see its puts, deletes and appends; a scan waits for it") {
    val delayed: java.util.concurrent.Executor =
      r => new Thread(() => { Thread.sleep(300); r.run() }).start()
    val s = newStore(applyPool = delayed)
    s.load(CheckpointId.Empty)
    commitBatch(s, Map("a" -> "1", "b" -> "2", "c" -> "3"))
    Thread.sleep(400) // the first apply landed
    s.merge(D, b("a"), b("x")) // appends to the committed value: resolved against RocksDB once written
    s.put(D, b("b"), b("new"))
    s.delete(D, b("c"))
    s.commit()
    assert(str(s.get(D, b("b"))) == "new" && s.get(D, b("c")) == null) // from the in-flight batch
    assert(str(s.get(D, b("a"))) == "1,x")
    assert(s.columnFamilies.counts("default") == 2)
    s.put(D, b("d"), b("4"))
    s.commit()
    assert(contents(s) == Map("a" -> "1,x", "b" -> "new", "d" -> "4"))
  }
}

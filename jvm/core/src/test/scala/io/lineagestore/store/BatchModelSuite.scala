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
  * the last read).
  */
class BatchModelSuite extends AnyFunSuite with StoreFixture {
  override protected def defaultSettings: StoreSettings = StoreSettings.Default.copy(minDeltasForSnapshot = 4)

  private def key(i: Int): String = f"key-$i%03d"
  private def str(a: Array[Byte]): String = if (a == null) null else new String(a, UTF_8)

  for (seed <- 1 to 4) test(s"random batches agree with a model (seed $seed)") {
    val rnd = new Random(seed)
    val s = newStore()
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
        lastId = s.commit(CheckpointId.newUniqueId())
        committed = model
        assert(contents(s) == committed, s"after commit of batch $batch (seed $seed)")
        assert(s.columnFamilies.counts("default") == committed.size, s"key count after batch $batch")
      }
    }
    val restored = newStore()
    restored.load(lastId)
    assert(contents(restored) == committed)
    assert(restored.columnFamilies.counts("default") == committed.size)
  }
}

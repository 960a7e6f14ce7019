package io.lineagestore.engine

import java.nio.charset.StandardCharsets.UTF_8
import java.util.concurrent.{CountDownLatch, Executor}

import scala.collection.mutable
import scala.util.Random

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.testing.TempDirs

/** A batch's values in its arena ([[ValueArena]]): positions across chunks, and a batch on a real RocksDB
  * whose values span many chunks, read back while pending, while the apply thread writes them, and once
  * committed.
  */
class ValueArenaSuite extends AnyFunSuite {
  private def value(rnd: Random, n: Int): Array[Byte] = { val a = new Array[Byte](n); rnd.nextBytes(a); a }

  test("values of any size up to the largest keep their bytes across chunks that grow to a region") {
    val rnd = new Random(5)
    val arena = new ValueArena
    val added = mutable.ArrayBuffer.empty[(Long, Array[Byte])]
    var total = 0L
    while (total < 3L * ValueArena.LargeChunkBytes) {
      val v = value(rnd, if (rnd.nextInt(50) == 0) ValueArena.MaxValueBytes else rnd.nextInt(3000))
      added += arena.add(v) -> v
      total += v.length
    }
    added += arena.add(Array.emptyByteArray) -> Array.emptyByteArray
    added.foreach { case (at, v) =>
      assert(arena.lengthOf(at) == v.length)
      assert(arena.copyOf(at).sameElements(v))
      assert(
        java.util.Arrays
          .equals(arena.chunkOf(at), arena.offsetOf(at), arena.offsetOf(at) + v.length, v, 0, v.length)
      )
    }
    val chunks = added.map(p => (p._1 >>> 32).toInt).distinct
    assert(
      chunks.size > 3 && arena.heldBytes >= total && arena.heldBytes < 2 * total + ValueArena.LargeChunkBytes
    )
    assert(added.map(p => arena.chunkOf(p._1).length).max == ValueArena.LargeChunkBytes)
    intercept[IllegalArgumentException](arena.add(new Array[Byte](ValueArena.MaxValueBytes + 1)))
  }

  test("a batch spanning many chunks reads right pending, in flight and committed; replaced values count") {
    val dir = TempDirs.create("lineagestore-value-arena")
    val release = new CountDownLatch(1)
    val held: Executor = r => new Thread(() => { release.await(); r.run() }).start() // apply waits for us
    val db = new LocalRocksDb(dir, RocksDbTuning(64L << 20, 16L << 20), 1L << 30, "maxPendingBytes", held)
    try {
      val rnd = new Random(9)
      val model = mutable.HashMap.empty[String, Array[Byte]]
      def k(i: Int) = s"key-$i".getBytes(UTF_8)
      db.put(k(-1), "base".getBytes(UTF_8)); model("key--1") = "base".getBytes(UTF_8)
      val n = 12000 // 12 MiB of 1 KiB values: chunks up to the largest
      (0 until n).foreach { i =>
        val v = value(rnd, if (i % 997 == 0) ValueArena.MaxValueBytes + 1 else 1024) // a few too large
        db.put(k(i), v); model(s"key-$i") = v
      }
      val beforeReplacing = db.pending.sizeBytes
      val replaced = (0 until n by 7).filter(_ % 997 != 0) // values in the arena
      replaced.foreach { i =>
        val v = value(rnd, 10); db.put(k(i), v); model(s"key-$i") = v
      }
      // a replaced arena value keeps its bytes until the batch ends, and is still counted
      assert(db.pending.sizeBytes == beforeReplacing + 10L * replaced.size)
      (1 until n by 11).foreach { i => db.delete(k(i)); model.remove(s"key-$i") }
      (2 until n by 13).foreach { i =>
        db.merge(k(i), "x".getBytes(UTF_8))
        model(s"key-$i") = ListMerge(model.get(s"key-$i").orNull, "x".getBytes(UTF_8))
      }
      def readAll(when: String): Unit = (-1 until n).foreach { i =>
        val expected = model.get(s"key-$i").orNull
        val got = db.get(k(i))
        assert(
          if (expected == null) got == null else got != null && got.sameElements(expected),
          s"key-$i $when"
        )
      }
      readAll("pending")
      val scanned = mutable.ArrayBuffer.empty[String]
      val it = db.scan("key-1".getBytes(UTF_8), "key-2".getBytes(UTF_8))
      it.foreach { case (key, v) =>
        val name = new String(key, UTF_8); scanned += name
        assert(v.sameElements(model(name)), s"$name scanned")
      }
      assert(scanned.toSet == model.keySet.filter(s => s >= "key-1" && s < "key-2"))
      db.commitInBackground()
      readAll("in flight") // the apply thread has not started: reads look through the batch it holds
      release.countDown()
      db.awaitApplied()
      readAll("committed")
      assert(db.pending.isEmpty && db.pending.sizeBytes == 0)
    } finally db.close()
  }
}

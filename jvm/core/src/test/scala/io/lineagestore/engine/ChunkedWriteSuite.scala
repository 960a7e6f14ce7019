package io.lineagestore.engine

import java.nio.charset.StandardCharsets.UTF_8

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.testing.TempDirs

/** A committed batch bigger than a memtable reaches RocksDB in chunks ([[ChunkedWriteBatch]]), on a real
  * RocksDB with 1 MiB memtables: it passes through several memtables (each flushed to its own SST) instead of
  * one memtable of the whole batch, and every key lands, merges resolved against the committed value.
  */
class ChunkedWriteSuite extends AnyFunSuite {
  private def k(i: Int): Array[Byte] = f"key-$i%06d".getBytes(UTF_8)
  private def v(i: Int, round: Int): Array[Byte] = (s"$round-$i-" + "x" * 100).getBytes(UTF_8)

  test("a batch of 5 memtables goes through several memtables, and every key lands") {
    val dir = TempDirs.create("lineagestore-chunked")
    val db = new LocalRocksDb(dir, RocksDbTuning(64L << 20, 1L << 20), Long.MaxValue, "maxPendingBytes")
    try {
      val n = 40000 // ~5 MB of keys and values
      (0 until n).foreach(i => db.put(k(i), v(i, 0)))
      db.commitInBackground()
      db.flush()
      val files = db.liveSstSizes.size
      assert(files >= 3, s"one memtable took the whole batch: $files SST files after the flush")

      // a second batch: overwrites, deletes and appends to committed values, also in chunks
      (0 until n).foreach { i =>
        if (i % 3 == 0) db.put(k(i), v(i, 1))
        else if (i % 3 == 1) db.delete(k(i))
        else db.merge(k(i), "y".getBytes(UTF_8))
      }
      db.commit()
      (0 until n).foreach { i =>
        val expected =
          if (i % 3 == 0) new String(v(i, 1), UTF_8)
          else if (i % 3 == 1) null
          else new String(v(i, 0), UTF_8) + ",y"
        val got = Option(db.get(k(i))).map(new String(_, UTF_8)).orNull
        assert(got == expected, s"key $i")
      }
    } finally db.close()
  }
}

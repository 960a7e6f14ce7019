package io.lineagestore.engine

import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files

import org.scalatest.funsuite.AnyFunSuite

/** A write's existence check (key counts) reuses the batch's earlier read of its key ([[BatchReads]]), on a
  * real RocksDB: streaming aggregation reads every group's state before it writes any.
  */
class BatchReadsSuite extends AnyFunSuite {
  private def k(i: Int): Array[Byte] = f"key-$i%04d".getBytes(UTF_8)
  private val v = "v".getBytes(UTF_8)

  private def withDb(body: LocalRocksDb => Unit): Unit = {
    val dir = Files.createTempDirectory("lineagestore-batch-reads").toFile
    val db = new LocalRocksDb(dir, RocksDbTuning(64L << 20, 16L << 20), Long.MaxValue, "maxPendingBytes")
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
}

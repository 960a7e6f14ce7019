package io.lineagestore.engine

import java.nio.charset.StandardCharsets.UTF_8

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.testing.TempDirs

/** A store that is only read is compacted into one sorted level when what it replayed is large
  * ([[ReadCompaction]]), on a real RocksDB.
  */
class ReadCompactionSuite extends AnyFunSuite {
  import ReadCompaction._

  test("due when the unsorted entries are past the floor and a quarter of the sorted ones") {
    assert(due(FloorEntries, 0)) // a first load: all of it unsorted
    assert(!due(FloorEntries - 1, 0)) // a small table: its memtable is as good as an SST
    assert(due(250000, 1000000) && !due(249999, 1000000))
    // a 1M-key table changing 10,000 keys per version: compacted once 25 versions have added up
    assert(!due(10000 * 24, 1000000) && due(10000 * 25, 1000000))
  }

  test(
    "a replayed store is compacted into one level, reads the same, and is left alone after a small change"
  ) {
    val dir = TempDirs.create("lineagestore-read-compaction")
    val db = new LocalRocksDb(dir, RocksDbTuning(256L << 20, 4L << 20), Long.MaxValue, "maxPendingBytes")
    try {
      val rnd = new scala.util.Random(3)
      def value(i: Int, round: Int) = s"v-$round-$i-${"x" * 150}".getBytes(UTF_8)
      def key(i: Int) = f"k-$i%08d".getBytes(UTF_8)
      val keys = 120000 // past the floor
      rnd.shuffle((0 until keys).toVector).foreach(i => db.put(key(i), value(i, 0)))
      db.commit()
      db.awaitApplied()
      assert(db.levelSizes.keySet.forall(_ == 0), db.levelSizes) // memtables and L0 only
      assert(db.compactForReads())
      assert(db.levelSizes.keySet.size == 1 && !db.levelSizes.contains(0), db.levelSizes)
      assert(db.l0Files == 0)
      (0 until keys by 997).foreach(i =>
        assert(new String(db.readCommitted(key(i)), UTF_8).startsWith("v-0-"))
      )
      // a change of a few hundred keys stays in the memtable: no rewrite of the table for it
      (0 until 300).foreach(i => db.put(key(i), value(i, 1)))
      db.commit()
      assert(!db.compactForReads())
      assert(new String(db.readCommitted(key(7)), UTF_8).startsWith("v-1-7-"))
      assert(new String(db.readCommitted(key(keys - 1)), UTF_8).startsWith("v-0-"))
    } finally db.close()
  }
}

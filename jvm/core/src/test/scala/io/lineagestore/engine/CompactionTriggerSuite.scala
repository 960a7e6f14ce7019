package io.lineagestore.engine

import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files

import org.scalatest.funsuite.AnyFunSuite

/** The L0 compaction trigger follows what each snapshot interval flushed against the store's size
  * ([[CompactionTrigger]]), on a real RocksDB.
  */
class CompactionTriggerSuite extends AnyFunSuite {
  import CompactionTrigger._

  test(
    "an interval that flushed several copies of the store compacts at 4, one of fewer at 8, between keeps"
  ) {
    val store = 100L << 20
    assert(forInterval(3 * store, store, FewCopies) == ManyCopies)
    assert(forInterval(store * 3 / 2, store, ManyCopies) == FewCopies)
    assert(forInterval(0, store, ManyCopies) == FewCopies)
    assert(forInterval(2 * store, store, FewCopies) == FewCopies)
    assert(forInterval(2 * store, store, ManyCopies) == ManyCopies)
    assert(forInterval(1L << 30, 0, ManyCopies) == ManyCopies) // nothing known of the store: as it was
  }

  test(
    "many copies put a store of up to half a GiB in the last level alone; few copies keep RocksDB's base"
  ) {
    assert(levelBaseBytes(FewCopies, 300L << 20) == DefaultLevelBase)
    assert(levelBaseBytes(ManyCopies, 1L << 20) == DefaultLevelBase)
    assert(levelBaseBytes(ManyCopies, 128L << 20) == DefaultLevelBase)
    assert(levelBaseBytes(ManyCopies, 200L << 20) == (512L << 20))
    assert(levelBaseBytes(ManyCopies, 300L << 20) == (1L << 30))
    assert(levelBaseBytes(ManyCopies, 5L << 30) == MaxLevelBase)
  }

  private def withStore(name: String)(body: (LocalRocksDb, (Int, Int) => Unit) => Unit): Unit = {
    val dir = Files.createTempDirectory(s"lineagestore-compaction-$name").toFile
    val db = new LocalRocksDb(dir, RocksDbTuning(256L << 20, 1L << 20), Long.MaxValue, "maxPendingBytes")
    val rnd = new scala.util.Random(7)
    // incompressible values: the flushed files' sizes are what was written
    def value: Array[Byte] = { val v = new Array[Byte](200); rnd.nextBytes(v); v }
    // keys in a shuffled order, as a hash partitioner delivers them: every flush spans the whole key range
    def batch(from: Int, keys: Int): Unit = {
      rnd.shuffle((from until from + keys).toVector).foreach(i => db.put(f"k-$i%08d".getBytes(UTF_8), value))
      db.commit()
    }
    try body(db, batch)
    finally db.close()
  }

  test("within an interval, flushes of several copies switch to 4 at a commit; a load of one copy does not") {
    withStore("within") { (db, batch) =>
      batch(0, 20000) // ~4.5 MB: several 1 MiB L0 files of overlapping ranges, no compaction yet
      assert(db.l0CompactionTrigger == FewCopies)
      (0 until 12).foreach(_ => batch(0, 2000)) // a tenth of the keys, again and again: not yet 3 copies
      assert(db.l0CompactionTrigger == FewCopies)
      (0 until 40).foreach(_ => batch(0, 20000)) // every key, again and again, no freeze
      assert(db.l0CompactionTrigger == ManyCopies)
    }
  }

  test(
    "a store whose every key is rewritten flush after flush switches to 4, and back when new keys are flushed"
  ) {
    withStore("trigger") { (db, batch) =>
      var freezes = 0
      def freeze(): Unit = {
        freezes += 1
        db.checkpointTo(new java.io.File(db.dir.getParentFile, s"${db.dir.getName}-f$freezes"))
      }
      assert(db.l0CompactionTrigger == Initial && Initial == FewCopies)
      batch(0, 2000) // the store: 2,000 keys, ~0.45 MB
      freeze() // one copy flushed: stays at 8
      assert(db.l0CompactionTrigger == FewCopies)
      (0 until 12).foreach(_ => batch(0, 2000)) // every key again and again: a copy per 1 MiB memtable
      freeze()
      assert(db.l0CompactionTrigger == ManyCopies)
      batch(2000, 500) // new keys, a quarter of the store
      freeze()
      assert(db.l0CompactionTrigger == FewCopies)
      (0 until 12).foreach(_ => batch(0, 2500))
      freeze()
      assert(db.l0CompactionTrigger == ManyCopies)
      // a reopened directory starts again from the initial trigger
      db.closeForReplace()
      db.reopen()
      assert(db.l0CompactionTrigger == Initial)
    }
  }
}

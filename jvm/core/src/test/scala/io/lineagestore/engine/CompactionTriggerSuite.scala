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
    "a store whose every key is rewritten flush after flush switches to 4, and back when new keys are flushed"
  ) {
    val dir = Files.createTempDirectory("lineagestore-compaction-trigger").toFile
    val db = new LocalRocksDb(dir, RocksDbTuning(256L << 20, 1L << 20), Long.MaxValue, "maxPendingBytes")
    val rnd = new scala.util.Random(7)
    // incompressible values: the flushed files' sizes are what was written
    def value: Array[Byte] = { val v = new Array[Byte](200); rnd.nextBytes(v); v }
    def batch(from: Int, keys: Int): Unit = {
      (from until from + keys).foreach(i => db.put(f"k-$i%08d".getBytes(UTF_8), value))
      db.commit()
    }
    var freezes = 0
    def freeze(): Unit = {
      freezes += 1
      db.checkpointTo(new java.io.File(dir.getParentFile, s"${dir.getName}-f$freezes"))
    }
    try {
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
    } finally db.close()
  }
}

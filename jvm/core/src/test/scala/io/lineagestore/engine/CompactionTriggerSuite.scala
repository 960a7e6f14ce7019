package io.lineagestore.engine

import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files

import org.scalatest.funsuite.AnyFunSuite

/** The L0 compaction trigger follows the flushes of each snapshot interval ([[CompactionTrigger]]), on a real
  * RocksDB.
  */
class CompactionTriggerSuite extends AnyFunSuite {
  import CompactionTrigger._

  test(
    "few flushes per interval compact at 8 L0 files, many at 4, and the margin between keeps the current"
  ) {
    assert(forInterval(0, ManyFlushes) == FewFlushes && forInterval(2, ManyFlushes) == FewFlushes)
    assert(forInterval(4, FewFlushes) == ManyFlushes && forInterval(9, FewFlushes) == ManyFlushes)
    assert(forInterval(3, FewFlushes) == FewFlushes && forInterval(3, ManyFlushes) == ManyFlushes)
  }

  test(
    "a store whose memtable fills several times between freezes switches to 4, and back once it does not"
  ) {
    val dir = Files.createTempDirectory("lineagestore-compaction-trigger").toFile
    val db = new LocalRocksDb(dir, RocksDbTuning(256L << 20, 1L << 20), Long.MaxValue, "maxPendingBytes")
    val value = new Array[Byte](200)
    def batch(from: Int, keys: Int): Unit = {
      (from until from + keys).foreach(i => db.put(f"k-$i%08d".getBytes(UTF_8), value))
      db.commit()
    }
    var freezes = 0
    def freeze(): Unit = {
      freezes += 1; db.checkpointTo(new java.io.File(dir.getParentFile, s"${dir.getName}-f$freezes"))
    }
    try {
      assert(db.l0CompactionTrigger == Initial && Initial == FewFlushes)
      freeze() // the interval starts here
      (0 until 6).foreach(b => batch(b * 6000, 6000)) // ~1.3 MB per batch into 1 MiB memtables
      freeze()
      assert(db.l0CompactionTrigger == ManyFlushes)
      (0 until 2).foreach { b => batch(b, 10); freeze() }
      assert(db.l0CompactionTrigger == FewFlushes)
      // a reopened directory starts again from the initial trigger
      (0 until 6).foreach(b => batch(b * 6000, 6000))
      freeze()
      assert(db.l0CompactionTrigger == ManyFlushes)
      db.closeForReplace()
      db.reopen()
      assert(db.l0CompactionTrigger == Initial)
    } finally db.close()
  }
}

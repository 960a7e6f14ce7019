package io.lineagestore.store

import java.nio.file.Files

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.lineage.{CheckpointId, LoadBase}

/** `loadEmpty`: a store rewritten from scratch at some version (offline repartitioning) against a real
  * RocksDB and a real local Hadoop filesystem. State of the older lineage must never come back.
  */
class LoadEmptySuite extends AnyFunSuite with StoreFixture {
  override protected def defaultSettings: StoreSettings =
    StoreSettings.Default.copy(minDeltasForSnapshot = 2, minVersionsToRetain = 3)

  /** Old lineage 1..5 with a snapshot at 4 and key "stale"; then loadEmpty(5) + commit: version 6. */
  private def repartitioned(): (LineageStore, Seq[CheckpointId], CheckpointId) = {
    val s = newStore()
    s.load(CheckpointId.Empty)
    val olds = (1 to 5).map(i => commitBatch(s, Map("stale" -> s"old$i", s"k$i" -> "old")))
    s.uploadSnapshots()
    assert(remoteNames.exists(_.endsWith(".zip")))
    s.loadEmpty(5)
    assert(contents(s).isEmpty && s.loadedVersion.contains(5L))
    val fresh = commitBatch(s, Map("kept" -> "new"))
    assert(fresh.version == 6)
    (s, olds, fresh)
  }

  test("the commit after loadEmpty is version+1, holds only the new batch, and starts from empty") {
    val (s, _, fresh) = repartitioned()
    assert(contents(s) == Map("kept" -> "new"))
    assert(s.columnFamilies.counts("default") == 1)
    val lineage = s.checkpointFiles.lineageOf(fresh).get
    assert(lineage.fromEmpty && lineage.ancestors.isEmpty)
    assert(s.frozenCount == 1, "a fresh start is snapshotted at once")
  }

  test("a stale key never reappears on reload from a fresh local directory, with or without the snapshot") {
    val (s, _, fresh) = repartitioned()
    val after = commitBatch(s, Map("later" -> "x")) // version 7 on top of the fresh start
    // without the snapshot: only the fresh start's delta and the one after it are replayed
    val noSnapshot = newStore()
    val plan = noSnapshot.load(after)
    assert(plan.base == LoadBase.Empty && plan.deltas == Seq(fresh, after))
    assert(contents(noSnapshot) == Map("kept" -> "new", "later" -> "x"))
    s.uploadSnapshots()
    assert(remoteNames.contains(fresh.snapshotFileName))
    val fromSnapshot = newStore()
    assert(fromSnapshot.load(after).base == LoadBase.Snapshot(fresh))
    assert(contents(fromSnapshot) == Map("kept" -> "new", "later" -> "x"))
    val atFresh = newStore()
    atFresh.load(fresh)
    assert(contents(atFresh) == Map("kept" -> "new"))
  }

  test("loadEmpty on a store that holds the old lineage locally, then a reload of the old head") {
    val (s, olds, fresh) = repartitioned()
    // the old checkpoints stay loadable by their own IDs (a reader of an older batch), and back again
    s.load(olds.last)
    assert(contents(s)("stale") == "old5")
    s.load(fresh)
    assert(contents(s) == Map("kept" -> "new"))
  }

  test("a restart after close resumes at the fresh start without the old state") {
    val (s, _, fresh) = repartitioned()
    val dir = Files.createTempDirectory(tmp.toPath, "reused").toFile
    val a = new LineageStore(files, dir, defaultSettings)
    a.load(fresh)
    a.close()
    val again = newStore(local = dir)
    assert(again.load(fresh).isNoOp)
    assert(contents(again) == Map("kept" -> "new"))
    assert(s.loadedCheckpoint.contains(fresh))
  }

  test("clean-up keeps the old lineage while the window reaches below the fresh start, then deletes it") {
    val (s, olds, fresh) = repartitioned()
    s.uploadSnapshots()
    val runner =
      newStore(
        StoreSettings.Default
          .copy(minDeltasForSnapshot = 1000, minVersionsToRetain = 3, orphanGracePeriodMs = 0)
      )
    runner.load(fresh)
    val v7 = commitBatch(runner, Map("a" -> "1"))
    runner.load(v7)
    assert(runner.cleanup().isEmpty, "window 5..7 still reaches below the fresh start at 6")
    assert(olds.forall(o => remoteNames.contains(o.deltaFileName)))
    val v8 = commitBatch(runner, Map("b" -> "2"))
    val v9 = commitBatch(runner, Map("c" -> "3"))
    runner.load(v9)
    runner.cleanup()
    val left = remoteNames
    assert(olds.forall(o => !left.contains(o.deltaFileName) && !left.contains(o.snapshotFileName)), left)
    assert(Seq(fresh, v7, v8, v9).forall(c => left.contains(c.deltaFileName)), left)
    val check = newStore()
    check.load(v9)
    assert(contents(check) == Map("kept" -> "new", "a" -> "1", "b" -> "2", "c" -> "3"))
  }

  test("loadEmpty(0) is the ordinary empty state: version 1 is written as before") {
    val s = newStore()
    s.loadEmpty(0)
    val v1 = commitBatch(s, Map("a" -> "1"))
    assert(v1.version == 1)
    assert(!s.checkpointFiles.lineageOf(v1).get.fromEmpty)
  }
}

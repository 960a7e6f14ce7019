package io.lineagestore.store

import java.nio.file.Files

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.lineage.CheckpointId

/** Issue 17: a lineage's snapshot lag is bounded whatever the run pattern, and a closing store uploads what
  * it froze. Here no maintenance thread ever runs: each "run" is a new store on a new local directory (a new
  * executor, or a short availableNow run whose process ended before maintenance), the worst case.
  */
class BoundedLagSuite extends AnyFunSuite with StoreFixture {
  override protected def defaultSettings: StoreSettings =
    StoreSettings.Default.copy(minDeltasForSnapshot = 2, maxSnapshotLagDeltas = 4, minVersionsToRetain = 2)

  private def snapshotVersions: Seq[Long] =
    files.listCheckpointFiles().filter(_.kind == CheckpointId.Snapshot).map(_.id.version).sorted

  /** `runs` runs of 2 commits each, every run on a new store that is dropped without maintenance or close. */
  private def scheduledRuns(runs: Int): (CheckpointId, Seq[Int]) = {
    var head = CheckpointId.Empty
    val replayed = (1 to runs).map { r =>
      val s = newStore()
      val plan = s.load(head)
      for (i <- 1 to 2) { head = commitBatch(s, Map(s"k$r-$i" -> s"v$r")); s.load(head) }
      plan.deltas.size
    }
    (head, replayed)
  }

  test("short runs without maintenance: every load replays at most maxSnapshotLagDeltas deltas") {
    val (head, replayed) = scheduledRuns(12)
    assert(head.version == 24)
    assert(replayed.max <= 4, s"deltas replayed per run: $replayed")
    assert(
      snapshotVersions.nonEmpty && head.version - snapshotVersions.max <= 4,
      s"snapshots $snapshotVersions"
    )
    val cold = newStore()
    assert(cold.load(head).deltas.size <= 4)
    assert(cold.snapshotLag <= 4)
  }

  test("the lag is reported, and catch-ups are counted") {
    val s = newStore(defaultSettings.copy(minDeltasForSnapshot = 100, maxSnapshotLagDeltas = 100))
    s.load(CheckpointId.Empty)
    var head = CheckpointId.Empty
    for (i <- 1 to 3) { head = commitBatch(s, Map(s"k$i" -> "v")); s.load(head) }
    assert(s.snapshotLag == 3)
    assert(s.counters.catchUpSnapshots.get == 0)
    val t = newStore(defaultSettings.copy(minDeltasForSnapshot = 100, maxSnapshotLagDeltas = 3))
    t.load(head)
    val next = commitBatch(t, Map("k4" -> "v"))
    assert(t.counters.catchUpSnapshots.get == 1)
    assert(files.hasSnapshot(next) && t.snapshotLag == 0)
  }

  test("a store closing with frozen snapshots uploads them within the bound; 0 uploads nothing") {
    def frozenStore() = {
      val s = newStore(defaultSettings.copy(maxSnapshotLagDeltas = 100))
      s.load(CheckpointId.Empty)
      val id = commitBatch(s, Map("a" -> "1"))
      s.load(id)
      s.freezeNow()
      (s, id)
    }
    val (skipped, _) = frozenStore()
    assert(skipped.uploadBeforeClose(0).size == 1)
    assert(snapshotVersions.isEmpty)
    val (s, id) = frozenStore()
    assert(s.uploadBeforeClose(60000).isEmpty)
    assert(files.hasSnapshot(id))
  }

  test("a clean close keeps what is known uploaded: resuming does not catch up again") {
    val dir = Files.createTempDirectory(tmp.toPath, "reused").toFile
    val settings = defaultSettings.copy(minDeltasForSnapshot = 100, maxSnapshotLagDeltas = 3)
    val s = newStore(settings, local = dir)
    s.load(CheckpointId.Empty)
    var head = CheckpointId.Empty
    for (i <- 1 to 4) { head = commitBatch(s, Map(s"k$i" -> "v")); s.load(head) }
    assert(s.counters.catchUpSnapshots.get == 1)
    s.close()
    val resumed = newStore(settings, local = dir)
    resumed.load(head)
    assert(resumed.snapshotLag == 0)
    commitBatch(resumed, Map("k5" -> "v"))
    assert(resumed.counters.catchUpSnapshots.get == 0)
  }
}

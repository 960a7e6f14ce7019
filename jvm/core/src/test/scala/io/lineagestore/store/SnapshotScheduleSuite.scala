package io.lineagestore.store

import java.io.File

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.config.LineageConf
import io.lineagestore.format.StoreIdentity
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.storage.HadoopBlobStore

/** Which commits freeze ([[SnapshotSchedule]]): the rule alone, then real stores of one query's partitions.
  */
class SnapshotScheduleSuite extends AnyFunSuite with StoreFixture {
  import SnapshotSchedule._

  override protected def defaultSettings: StoreSettings =
    StoreSettings.Default.copy(minDeltasForSnapshot = 4, maxSnapshotLagDeltas = 100)

  /** The versions a store of `phase` freezes at, committing one after another from `presumed` + 1 to `until`
    * (the presumed snapshot moves to each freeze; nothing lags; a fresh start when `fresh`).
    */
  private def freezesFrom(
      phase: Int,
      every: Int,
      until: Long,
      presumed: Long = 0L,
      fresh: Boolean = false
  ) = {
    var last = presumed
    (presumed + 1 to until).filter { v =>
      val freezes =
        SnapshotSchedule.freezes(v, last, fresh && v == presumed + 1, lagging = false, phase, every)
      if (freezes) last = v
      freezes
    }
  }

  test("partitions freeze on phases of their own: 16 stores at m = 10 spread over the interval") {
    assert(phase(0, 10) == 0 && phase(3, 10) == 3 && phase(13, 10) == 3 && phase(-1, 10) == 9)
    assert(freezesFrom(phase(0, 10), 10, 31) == Seq(10L, 20L, 30L)) // where every store froze before phases
    assert(freezesFrom(phase(3, 10), 10, 31) == Seq(3L, 13L, 23L))
    assert(freezesFrom(phase(9, 10), 10, 31) == Seq(9L, 19L, 29L))
    // each version freezes at most 2 of the 16 stores (partitions p and p + 10), and every version some
    val perVersion = (0 until 16).flatMap(p => freezesFrom(phase(p, 10), 10, 40)).groupBy(identity)
    assert(perVersion.keySet == (1L to 40L).toSet)
    assert(perVersion.values.map(_.size).max == 2, perVersion)
    // a fresh start at version 20 (a repartitioned store) freezes at once, then on its phase
    assert(freezesFrom(phase(3, 10), 10, 45, presumed = 19, fresh = true) == Seq(20L, 23L, 33L, 43L))
  }

  test("never more than m versions between two freezes, on phase or not") {
    for (every <- Seq(1, 2, 4, 10); phase <- 0 until every; presumed <- Seq(0L, 3L, 7L)) {
      for (fresh <- Seq(false, true)) {
        val at = presumed +: freezesFrom(phase, every, presumed + 5L * every, presumed, fresh)
        assert(at.sliding(2).forall { case Seq(a, b) => b - a <= every }, (every, phase, presumed, at))
        // on phase from the second freeze on (the first may be a fresh start's)
        assert(at.drop(2).forall(onPhase(_, phase, every)), (every, phase, presumed, at))
      }
    }
  }

  test("a fresh start, a lag and an old presumed snapshot freeze off phase") {
    assert(!onPhase(6, 3, 10))
    assert(freezes(6, 0, freshStart = true, lagging = false, 3, 10))
    assert(freezes(6, 4, freshStart = false, lagging = true, 3, 10))
    assert(freezes(16, 6, freshStart = false, lagging = false, 3, 10)) // ten since the presumed one
    assert(!freezes(15, 6, freshStart = false, lagging = false, 3, 10))
    assert(freezes(13, 12, freshStart = false, lagging = false, 3, 10)) // on phase, one after a catch-up
  }

  test("real stores of partitions 0 and 3 freeze and upload at their own phases") {
    def snapshotsOf(partition: Int, snapshotPartition: Option[Int] = None): Seq[Long] = {
      val remoteDir = new File(tmp, s"remote-$partition-${snapshotPartition.getOrElse("")}")
      val blobs = new HadoopBlobStore(
        new Path(remoteDir.toURI),
        new Configuration(),
        LineageConf.DeltaUploadPartBytes.default
      )
      val partitionFiles = new CheckpointFiles(blobs, StoreIdentity(0, partition, "default"), pool)
      val s = newStore(checkpointFiles = partitionFiles, snapshotPartition = snapshotPartition)
      var head = CheckpointId.Empty
      s.load(head)
      for (i <- 1 to 9) {
        head = commitBatch(s, Map(s"k$i" -> s"v$i"))
        s.uploadSnapshots()
        s.load(head)
      }
      assert(contents(s) == (1 to 9).map(i => s"k$i" -> s"v$i").toMap)
      partitionFiles.listCheckpointFiles().filter(_.kind == CheckpointId.Snapshot).map(_.id.version).sorted
    }
    assert(snapshotsOf(0) == Seq(4L, 8L))
    assert(snapshotsOf(3) == Seq(3L, 7L))
    // a store kept under partition 0's identity that names its partition (an adjunct table's) takes its phase
    assert(snapshotsOf(0, snapshotPartition = Some(3)) == Seq(3L, 7L))
  }
}

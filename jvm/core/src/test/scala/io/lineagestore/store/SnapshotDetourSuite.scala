package io.lineagestore.store

import java.io.{File, RandomAccessFile}
import java.nio.file.Files

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.format.CorruptCheckpointFileException
import io.lineagestore.lineage.{CheckpointId, LoadBase}

/** Issue 17: a load routes around a snapshot whose zip, INDEX or an SST is damaged or missing when an older
  * snapshot and deltas (or the deltas from version 1) rebuild the target, counts it and says which file it
  * skipped; without any route it fails naming the damaged file.
  */
class SnapshotDetourSuite extends AnyFunSuite with StoreFixture {
  override protected def defaultSettings: StoreSettings =
    StoreSettings.Default.copy(minDeltasForSnapshot = 3, maxSnapshotLagDeltas = 100)

  /** Versions 1..6, snapshots at 3 and 6 (each with its own SST: values large enough not to be inlined). */
  private def lineage(): Seq[CheckpointId] = {
    val s = newStore()
    s.load(CheckpointId.Empty)
    val ids = (1 to 6).map { v =>
      val id = commitBatch(s, (1 to 200).map(i => s"k$v-$i" -> ("v" * 200 + v)).toMap)
      s.load(id)
      s.uploadSnapshots()
      id
    }
    assert(files.hasSnapshot(ids(2)) && files.hasSnapshot(ids(5)))
    ids
  }
  private def expected(v: Int) =
    (1 to v).flatMap(w => (1 to 200).map(i => s"k$w-$i" -> ("v" * 200 + w))).toMap

  private def zipOf(id: CheckpointId) = new File(remote, id.snapshotFileName)
  private def flipByte(f: File, at: Long): Unit = {
    Files.deleteIfExists(new File(f.getParentFile, s".${f.getName}.crc").toPath)
    val raf = new RandomAccessFile(f, "rw")
    try { raf.seek(at); val b = raf.read(); raf.seek(at); raf.write(b ^ 0xff) }
    finally raf.close()
  }
  private def truncate(f: File): Unit = {
    Files.deleteIfExists(new File(f.getParentFile, s".${f.getName}.crc").toPath)
    val raf = new RandomAccessFile(f, "rw")
    try raf.setLength(raf.length() / 2)
    finally raf.close()
  }

  /** The shared SSTs snapshot `id` references that no other snapshot does. */
  private def ownSsts(id: CheckpointId, others: Seq[CheckpointId]): Seq[String] = {
    val theirs = others.flatMap(o => files.readSnapshotIndex(o).sharedBlobs).toSet
    files.readSnapshotIndex(id).sharedBlobs.filterNot(theirs).toSeq
  }

  private def loadsByDetour(ids: Seq[CheckpointId], damagedFile: String): Unit = {
    val cold = newStore()
    val plan = cold.load(ids(5))
    assert(plan.base == LoadBase.Snapshot(ids(2)) && plan.deltas == ids.slice(3, 6))
    assert(contents(cold) == expected(6))
    assert(cold.counters.snapshotDetours.get == 1)
    assert(cold.lastDetours.exists(_.contains(damagedFile)), cold.lastDetours)
  }

  test("a damaged zip: the load takes the older snapshot and more deltas") {
    val ids = lineage()
    truncate(zipOf(ids(5)))
    loadsByDetour(ids, ids(5).snapshotFileName)
  }

  test("a damaged INDEX: the load takes the older snapshot and more deltas") {
    val ids = lineage()
    flipByte(zipOf(ids(5)), 60) // inside the zip's first entry, the INDEX
    loadsByDetour(ids, ids(5).snapshotFileName)
  }

  test("a damaged or missing SST: the load takes the older snapshot and more deltas") {
    val ids = lineage()
    val ssts = ownSsts(ids(5), Seq(ids(2)))
    assert(ssts.nonEmpty)
    flipByte(new File(remote, s"shared/${ssts.head}"), 100)
    loadsByDetour(ids, ssts.head)
    ssts.foreach(n => Files.delete(new File(remote, s"shared/${n}").toPath))
    loadsByDetour(ids, ssts.head)
  }

  test("with every snapshot damaged the deltas from version 1 rebuild it") {
    val ids = lineage()
    Seq(ids(2), ids(5)).foreach(id => truncate(zipOf(id)))
    val cold = newStore()
    assert(cold.load(ids(5)).base == LoadBase.Empty)
    assert(contents(cold) == expected(6) && cold.counters.snapshotDetours.get == 2)
  }

  test("without any route the load fails naming the damaged file") {
    val ids = lineage()
    truncate(zipOf(ids(5)))
    Files.delete(new File(remote, ids(5).deltaFileName).toPath)
    val e = intercept[CorruptCheckpointFileException](newStore().load(ids(5)))
    assert(
      e.getMessage.contains(ids(5).snapshotFileName) && e.getMessage.contains("no other route"),
      e.getMessage
    )
  }
}

package io.lineagestore.store

import java.io.File
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.format.{CorruptCheckpointFileException, SnapshotZip}
import io.lineagestore.lineage.{CheckpointId, LoadBase}
import io.lineagestore.snapshot.RangedDownload
import io.lineagestore.testing.DiskDamage
import io.lineagestore.testing.DiskDamage.{Sidecar, ZipLayout}

/** Issue 46: damage as storage makes it, in every region of a snapshot's files, each resumed cold (a fresh
  * local directory). Files are damaged in place with their Hadoop `.crc` sidecar kept (what a disk fault
  * leaves, and what HDFS shows), and, where lineagestore's own checks are what must find it (as on s3a), with
  * the sidecar dropped. Where a route around the damage exists the load takes it, counts the detour and
  * rebuilds exactly the state (every key compared); where none does, the error is lineagestore's own, naming
  * every damaged file, the versions it cannot rebuild and the procedure. Never a raw exception.
  */
class DamageRoutingSuite extends AnyFunSuite with StoreFixture {
  override protected def defaultSettings: StoreSettings =
    StoreSettings.Default.copy(minDeltasForSnapshot = 3, maxSnapshotLagDeltas = 100)

  /** Versions 1..6, snapshots at 3 and 6 (each with its own SST: values large enough not to be inlined). */
  private def lineage(): Seq[CheckpointId] = {
    val s = newStore()
    s.load(CheckpointId.Empty)
    val ids = (1 to 6).map { v =>
      val id = commitBatch(s, (1 to 200).map(i => s"k$v-$i" -> (s"v$i-" * 50 + v)).toMap)
      s.load(id)
      s.uploadSnapshots()
      id
    }
    assert(files.hasSnapshot(ids(2)) && files.hasSnapshot(ids(5)))
    assert(!files.hasSnapshot(ids(3)) && !files.hasSnapshot(ids(4)))
    ids
  }
  private def expected(v: Int) =
    (1 to v).flatMap(w => (1 to 200).map(i => s"k$w-$i" -> (s"v$i-" * 50 + w))).toMap

  private def zipOf(id: CheckpointId) = new File(remote, id.snapshotFileName)
  private def deltaOf(id: CheckpointId) = new File(remote, id.deltaFileName)
  private def sharedOf(blob: String) = new File(remote, SnapshotZip.sharedPath(blob))

  /** The shared SSTs snapshot `id` references that no other snapshot does. */
  private def ownSsts(id: CheckpointId, others: Seq[CheckpointId]): Seq[String] = {
    val theirs = others.flatMap(o => files.readSnapshotIndex(o).sharedBlobs).toSet
    files.readSnapshotIndex(id).sharedBlobs.filterNot(theirs).toSeq.sorted
  }

  /** A cold load of version 6 routes around snapshot 6 (the file `damaged` names) to snapshot 3 and deltas
    * 4..6, and holds exactly the state of version 6.
    */
  private def loadsByDetour(
      ids: Seq[CheckpointId],
      damaged: String,
      checkpointFiles: CheckpointFiles = files
  ) = {
    val cold = newStore(checkpointFiles = checkpointFiles)
    val plan = cold.load(ids(5))
    assert(plan.base == LoadBase.Snapshot(ids(2)) && plan.deltas == ids.slice(3, 6))
    assert(contents(cold) == expected(6))
    assert(cold.counters.snapshotDetours.get == 1)
    assert(cold.lastDetours.size == 1 && cold.lastDetours.head.contains(damaged), cold.lastDetours)
    cold
  }

  // ---- the zip, region by region ------------------------------------------------------------------------

  /** Where in snapshot 6's zip, and whether reading it finds the damage without Hadoop's sidecar (the central
    * directory and the end record are never read: entries are read in order, each checked against the INDEX,
    * so damage there changes nothing a load uses).
    */
  private val zipRegions: Seq[(String, ZipLayout => Long, Boolean)] = Seq(
    ("the first entry's local header (compression method)", _.entries.head.compressionMethodAt, true),
    ("the first entry's name length", _.entries.head.nameLengthAt, true),
    ("the first entry's extra length", _.entries.head.extraLengthAt, true),
    ("the first entry's name bytes", _.entries.head.nameAt + 1, true),
    ("the INDEX's bytes", _.entries.head.dataAt + 20, true),
    ("the records of a later entry (the MANIFEST's bytes)", manifestOf(_).dataAt + 4, true),
    ("the central directory", _.centralDirectoryAt + 10, false),
    ("the end record (footer)", _.footerAt + 10, false)
  )
  private def manifestOf(z: ZipLayout) = z.entries.find(_.name.startsWith("MANIFEST-")).get

  for ((region, at, seenWithoutSidecar) <- zipRegions; sidecar <- Sidecar.Both) {
    test(s"a byte flipped in $region of the newest zip, .crc ${sidecar.toString.toLowerCase}: exact state") {
      val ids = lineage()
      val zip = zipOf(ids(5))
      DiskDamage.flip(zip, at(ZipLayout.of(zip)), sidecar)
      if (sidecar == Sidecar.Kept || seenWithoutSidecar) loadsByDetour(ids, zip.getName)
      else {
        // nothing a load reads changed: the snapshot itself rebuilds the state
        val cold = newStore()
        assert(cold.load(ids(5)).base == LoadBase.Snapshot(ids(5)))
        assert(contents(cold) == expected(6) && cold.counters.snapshotDetours.get == 0)
      }
    }
  }

  for (sidecar <- Sidecar.Both)
    test(s"the newest zip truncated, .crc ${sidecar.toString.toLowerCase}: exact state by a detour") {
      val ids = lineage()
      val zip = zipOf(ids(5))
      DiskDamage.truncate(zip, manifestOf(ZipLayout.of(zip)).dataAt + 10, sidecar)
      loadsByDetour(ids, zip.getName)
    }

  for (sidecar <- Sidecar.Both)
    test(
      s"a zeroed range in the newest zip, .crc ${sidecar.toString.toLowerCase}: no half-restored directory"
    ) {
      // the MANIFEST's entry zeroed: CURRENT (the entry before it) was restored, its MANIFEST is not
      val ids = lineage()
      val zip = zipOf(ids(5))
      DiskDamage.zero(zip, manifestOf(ZipLayout.of(zip)).headerAt, 64, sidecar)
      loadsByDetour(ids, zip.getName)
    }

  test("a restore RocksDB cannot open is damage of the snapshot: a detour, exact state") {
    val ids = lineage()
    val zip = zipOf(ids(5))
    // an index whose every listed file restores and checks out, but without an SST the MANIFEST needs
    val dropped = ownSsts(ids(5), Seq(ids(2))).head
    SnapshotZips.rewriteIndex(zip)(_.filterNot(_.endsWith(s" $dropped")))
    val cold = loadsByDetour(ids, zip.getName)
    assert(cold.lastDetours.head.contains("RocksDB cannot open"), cold.lastDetours)
  }

  // ---- shared SSTs ----------------------------------------------------------------------------------------

  private val rangedFiles = () =>
    new CheckpointFiles(
      remoteBlobs,
      files.store,
      pool,
      RangedDownload(minBytes = 1, partBytes = 1024, window = 2)
    )

  for ((how, checkpointFiles) <- Seq("one stream" -> (() => files), "byte ranges" -> rangedFiles)) {
    test(s"a shared SST truncated, .crc kept, read as $how: exact state by a detour") {
      val ids = lineage()
      val sst = sharedOf(ownSsts(ids(5), Seq(ids(2))).head)
      DiskDamage.truncate(sst, sst.length() - 100)
      loadsByDetour(ids, sst.getName, checkpointFiles())
    }

    test(s"a bit flipped in a shared SST, .crc kept, read as $how: exact state by a detour") {
      val ids = lineage()
      val sst = sharedOf(ownSsts(ids(5), Seq(ids(2))).head)
      DiskDamage.flip(sst, sst.length() / 2)
      loadsByDetour(ids, sst.getName, checkpointFiles())
    }
  }

  // ---- no route left --------------------------------------------------------------------------------------

  for (sidecar <- Sidecar.Both)
    test(
      s"the newest zip and a delta it needs damaged, .crc ${sidecar.toString.toLowerCase}: a named error"
    ) {
      val ids = lineage()
      val zip = zipOf(ids(5))
      DiskDamage.flip(zip, ZipLayout.of(zip).entries.head.dataAt + 20, sidecar)
      val delta = deltaOf(ids(4)) // version 5: every route to 5 and 6 without snapshot 6 needs it
      DiskDamage.flip(delta, delta.length() - 10, sidecar)
      val cold = newStore()
      val e = intercept[NoRouteException](cold.load(ids(5)))
      val message = e.getMessage
      Seq(ids(5).snapshotFileName, ids(4).deltaFileName).foreach { name =>
        assert(message.contains(files.blobs.locate(name)), message)
      }
      assert(message.contains("versions 5..6") && message.contains("no other route rebuilds"), message)
      assert(message.contains("docs/operations.md#restarting-from-an-older-checkpoint"), message)
      assert(e.unusable.map(_.file.split('/').last) == Seq(ids(5).snapshotFileName, ids(4).deltaFileName))
      assert(cold.counters.snapshotDetours.get == 1)
      // the store is usable after the failure: version 4 loads (snapshot 3 and delta 4)
      cold.load(ids(3))
      assert(contents(cold) == expected(4))
    }

  test("a damaged delta with its .crc kept and no detour taken names the delta") {
    val ids = lineage()
    val delta = deltaOf(ids(3))
    DiskDamage.flip(delta, delta.length() - 10)
    val e = intercept[CorruptCheckpointFileException](newStore().load(ids(4)))
    assert(e.file.endsWith(ids(3).deltaFileName) && e.getMessage.contains("checksum"), e.getMessage)
  }

  // ---- the check of a restored directory ------------------------------------------------------------------

  test("a directory is checked against the snapshot's index: missing, short, extra and unnamed files") {
    val ids = lineage()
    val dir = new File(tmp, "copy")
    val index = files.restoreSnapshot(ids(5), dir, new HashCache)._1
    assert(LocalCopyCheck.mismatches(index, dir).isEmpty)
    val sst = index.files.find(_.name.endsWith(".sst")).get
    val current = new File(dir, "CURRENT")
    val manifest = new String(Files.readAllBytes(current.toPath), UTF_8).trim

    Files.delete(new File(dir, sst.name).toPath)
    assert(LocalCopyCheck.mismatches(index, dir) == Seq(s"${sst.name} is missing"))
    files.restoreSnapshot(ids(5), dir, new HashCache)
    DiskDamage.truncate(new File(dir, manifest), 10, Sidecar.Dropped)
    assert(LocalCopyCheck.mismatches(index, dir).exists(_.startsWith(s"$manifest has 10 bytes")))
    files.restoreSnapshot(ids(5), dir, new HashCache)
    Files.write(new File(dir, "000999.log").toPath, Array[Byte](1, 2, 3))
    assert(LocalCopyCheck.mismatches(index, dir) == Seq("000999.log is not in the index"))
    files.restoreSnapshot(ids(5), dir, new HashCache)
    Files.write(current.toPath, "MANIFEST-999999\n".getBytes(UTF_8))
    assert(
      LocalCopyCheck
        .mismatches(index, dir)
        .contains("CURRENT names MANIFEST-999999, which the index does not list")
    )
    val e = intercept[CorruptCheckpointFileException](LocalCopyCheck.verify(index, dir, "the-zip"))
    assert(e.file == "the-zip" && e.detail.contains("does not match its index"), e.getMessage)
  }
}

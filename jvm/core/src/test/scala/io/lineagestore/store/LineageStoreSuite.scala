package io.lineagestore.store

import java.io.File
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.config.LineageConf
import io.lineagestore.engine.{CompactionTrigger, PendingWritesLimitException}
import io.lineagestore.format.{CorruptCheckpointFileException, StoreIdentity}
import io.lineagestore.lineage.{CheckpointId, LineageException, LoadBase}
import io.lineagestore.storage.HadoopBlobStore

/** The store against a real RocksDB and a real (local) Hadoop filesystem. */
class LineageStoreSuite extends AnyFunSuite with StoreFixture {
  override protected def defaultSettings: StoreSettings =
    StoreSettings.Default.copy(minDeltasForSnapshot = 1000, minVersionsToRetain = 5)

  /** A hook that, the first time an upload reaches the step between its blobs and its zip while `armed()`,
    * runs `store().cleanup()` on another thread (as Spark's maintenance may while close() uploads) and
    * records what it deleted, followed by "ran".
    */
  private final class CleanupMidUpload(store: () => LineageStore, armed: () => Boolean = () => true)
      extends CrashPoints {
    @volatile var deleted = Seq.empty[String]
    override def at(step: CrashPoints.Step): Unit =
      if (step == CrashPoints.SnapshotAfterBlobs && deleted.isEmpty && armed()) {
        val t = new Thread(() => deleted = store().cleanup() :+ "ran")
        t.start()
        t.join()
      }
  }

  test("commits survive a restart on a fresh local directory") {
    val s = newStore()
    s.load(CheckpointId.Empty)
    commitBatch(s, Map("a" -> "1", "b" -> "2"))
    val v2 = commitBatch(s, Map("a" -> "3"), Seq("b"))
    val fresh = newStore()
    val plan = fresh.load(v2)
    assert(plan.base == LoadBase.Empty && plan.deltas.size == 2)
    assert(contents(fresh) == Map("a" -> "3"))
    assert(fresh.columnFamilies.counts("default") == 1)
  }

  test("abort leaves no trace and an uncommitted write is visible only to its own batch") {
    val s = newStore()
    s.load(CheckpointId.Empty)
    val v1 = commitBatch(s, Map("a" -> "1"))
    s.put(D, b("x"), b("y"))
    assert(contents(s) == Map("a" -> "1", "x" -> "y"))
    s.abort()
    assert(contents(s) == Map("a" -> "1"))
    assert(s.load(v1).isNoOp)
    assert(remoteNames == Set(v1.deltaFileName))
  }

  test("two attempts of one batch each stay loadable by their own ID; a store at the other attempt reloads") {
    val s = newStore()
    s.load(CheckpointId.Empty)
    val v1 = commitBatch(s, Map("k" -> "base"))
    val attemptA = commitBatch(s, Map("k" -> "A"))
    s.load(v1)
    val attemptB = commitBatch(s, Map("k" -> "B"))
    assert(attemptA.version == attemptB.version && attemptA != attemptB)
    // s holds B in memory; the driver committed A
    val plan = s.load(attemptA)
    // B is not an ancestor of A: rebuild A from its lineage (no snapshot yet: from the empty state)
    assert(plan.base == LoadBase.Empty && plan.deltas == Seq(v1, attemptA))
    assert(contents(s) == Map("k" -> "A"))
    val v3 = commitBatch(s, Map("n" -> "3"))
    val other = newStore()
    other.load(v3)
    assert(contents(other) == Map("k" -> "A", "n" -> "3"))
    other.load(attemptB)
    assert(contents(other) == Map("k" -> "B"))
  }

  test("iteration tolerates removals of the keys it visits, like watermark eviction does") {
    val s = newStore()
    s.load(CheckpointId.Empty)
    commitBatch(s, (1 to 50).map(i => f"k$i%03d" -> i.toString).toMap)
    s.put(D, b("k100"), b("new"))
    val it = s.scan(D, Array.emptyByteArray, null)
    var seen = 0
    it.foreach { case (k, _) => seen += 1; s.delete(D, k) }
    assert(seen == 51)
    s.commit()
    assert(contents(s).isEmpty && s.columnFamilies.counts("default") == 0)
  }

  test("snapshots upload only new files; restore cold downloads, restore warm downloads nothing") {
    val s = newStore()
    s.load(CheckpointId.Empty)
    (1 to 3).foreach(i => commitBatch(s, (1 to 200).map(j => s"k$i-$j" -> ("v" * 100)).toMap))
    s.freezeNow()
    assert(s.uploadSnapshots() == 1)
    val firstBytes = s.counters.bytesUploaded.get
    assert(firstBytes > 0)
    s.freezeNow() // unchanged store: a second snapshot of the same checkpoint is skipped
    s.uploadSnapshots()
    val v4 = commitBatch(s, Map("one" -> "more"))
    s.freezeNow()
    s.uploadSnapshots()
    assert(s.counters.filesReused.get > 0, "the second snapshot must reference the first one's SST files")
    val cold = newStore()
    val plan = cold.load(v4)
    assert(plan.base == LoadBase.Snapshot(v4))
    assert(cold.counters.bytesDownloaded.get > 0)
    assert(contents(cold) == contents(s))
    // move the warm store off v4, then back: its SST files are still local, only small files travel
    commitBatch(cold, Map("x" -> "y"))
    val downloadedBefore = cold.counters.filesDownloaded.get
    val reusedBefore = cold.counters.filesReused.get
    assert(cold.load(v4).base == LoadBase.Snapshot(v4))
    assert(cold.counters.filesReused.get > reusedBefore)
    val inlineFiles = files.readSnapshotIndex(v4).files.count(_.blob.isEmpty)
    assert(cold.counters.filesDownloaded.get - downloadedBefore == inlineFiles) // no shared SST moved
    assert(contents(cold) == contents(s))
  }

  test("a load whose chosen base is cleaned before it is read plans again from what exists now") {
    val s = newStore()
    s.load(CheckpointId.Empty)
    val ids = (1 to 6).map { i =>
      val id = commitBatch(s, Map(s"k$i" -> s"v$i"))
      if (i == 2 || i == 4) { s.freezeNow(); s.uploadSnapshots() }
      id
    }
    // snapshot 4's zip is not there yet when the load plans (its upload still in flight elsewhere) ...
    val zip4 = new File(remote, ids(3).snapshotFileName)
    val hidden = new File(tmp, "hidden.zip")
    assert(zip4.renameTo(hidden))
    // ... and when the load opens snapshot 2, clean-up elsewhere has seen 4 complete and deleted 2 and delta 3
    val racing = new DelegatingBlobStore(remoteBlobs) {
      override def open(name: String): java.io.InputStream = {
        if (name == ids(1).snapshotFileName && hidden.exists()) {
          assert(hidden.renameTo(zip4))
          underlying.delete(ids(1).snapshotFileName)
          underlying.delete(ids(2).deltaFileName)
        }
        underlying.open(name)
      }
    }
    val cold = newStore(checkpointFiles = filesOn(racing))
    val plan = cold.load(ids(5))
    assert(plan.base == LoadBase.Snapshot(ids(3)) && plan.deltas == Seq(ids(4), ids(5)))
    assert(cold.counters.loadsReplanned.get == 1)
    assert(contents(cold) == (1 to 6).map(i => s"k$i" -> s"v$i").toMap)
  }

  test("a corrupt delta fails the load with its name and leaves the committed files intact") {
    val s = newStore()
    s.load(CheckpointId.Empty)
    commitBatch(s, Map("a" -> "1"))
    val v2 = commitBatch(s, Map("a" -> "2"))
    val f = new File(remote, v2.deltaFileName)
    val bytes = Files.readAllBytes(f.toPath)
    val good = bytes.clone()
    bytes(bytes.length - 6) = (bytes(bytes.length - 6) ^ 1).toByte
    Files.write(f.toPath, bytes)
    val e = intercept[CorruptCheckpointFileException](newStore().load(v2))
    assert(e.getMessage.contains(v2.deltaFileName))
    Files.write(f.toPath, good)
    val again = newStore()
    again.load(v2)
    assert(contents(again) == Map("a" -> "2"))
  }

  test("a missing delta fails the load naming its full location; put back, it loads") {
    val s = newStore()
    s.load(CheckpointId.Empty)
    commitBatch(s, Map("a" -> "1"))
    val v2 = commitBatch(s, Map("a" -> "2"))
    val f = new File(remote, v2.deltaFileName)
    val moved = new File(remote.getParentFile, s"${f.getName}.away")
    assert(f.renameTo(moved))
    val e = intercept[LineageException](newStore().load(v2))
    assert(
      e.getMessage.contains(s"${remote.getName}/${v2.deltaFileName} it depends on is missing"),
      e.getMessage
    )
    assert(moved.renameTo(f))
    val again = newStore()
    again.load(v2)
    assert(contents(again) == Map("a" -> "2"))
  }

  test("a batch past the pending-writes bound spills to local disk, commits and restores from its delta") {
    // a small bound, to spill a few times with some thousand rows
    val s = newStore(StoreSettings.Default.copy(maxPendingBytes = 1 << 20))
    s.load(CheckpointId.Empty)
    val rows = (1 to 10000).map(i => s"k$i" -> s"v$i-${"x" * 200}").toMap
    rows.foreach { case (k, v) => s.put(D, b(k), b(v)) }
    assert(s.pendingSpilledRuns >= 2, s"spilled ${s.pendingSpilledRuns} runs")
    val streamed = s.commit() // every change its key's first: the delta streamed as the batch ran
    // a second batch rewrites spilled keys: its delta is written at commit, from the runs and memory
    (1 to 10000 by 2).foreach(i => s.put(D, b(s"k$i"), b(s"w$i-${"y" * 200}")))
    (1 to 10000 by 2).foreach(i => s.put(D, b(s"k$i"), b(s"z$i")))
    s.delete(D, b("k2"))
    assert(s.pendingSpilledRuns >= 1)
    val rewritten = s.commit()
    val expected = rows ++ (1 to 10000 by 2).map(i => s"k$i" -> s"z$i") - "k2"
    assert(contents(s) == expected)
    val fresh = newStore()
    fresh.load(streamed)
    assert(contents(fresh) == rows)
    fresh.load(rewritten)
    assert(contents(fresh) == expected && fresh.columnFamilies.counts("default") == expected.size)
  }

  test("list appends past the pending-writes bound spill too; the delta keeps each, and restores") {
    val s = newStore(StoreSettings.Default.copy(maxPendingBytes = 1 << 20))
    s.load(CheckpointId.Empty)
    s.put(D, b("k1"), b("base"))
    val v1 = s.commit()
    val appended = (1 to 20000).map(i => s"k${i % 100}" -> s"e$i-${"x" * 100}")
    appended.foreach { case (k, e) => s.merge(D, b(k), b(e)) }
    assert(s.pendingSpilledRuns >= 2)
    val v2 = s.commit()
    val expected = appended.groupMap(_._1)(_._2).map { case (k, es) =>
      k -> ((if (k == "k1") Seq("base") else Nil) ++ es).mkString(",")
    }
    assert(contents(s) == expected)
    val fresh = newStore()
    fresh.load(v1)
    fresh.load(v2)
    assert(contents(fresh) == expected)
  }

  test("clean-up keeps every retained version loadable and deletes the rest, with losers after the window") {
    val s =
      newStore(
        StoreSettings.Default.copy(minDeltasForSnapshot = 4, minVersionsToRetain = 3, orphanGracePeriodMs = 0)
      )
    s.load(CheckpointId.Empty)
    var ids = Vector.empty[CheckpointId]
    for (i <- 1 to 14) {
      if (i == 3) { // a losing attempt of version 3
        commitBatch(s, Map("lost" -> "x"))
        s.load(ids.last)
      }
      ids :+= commitBatch(s, Map(s"k$i" -> i.toString))
      s.load(ids.last) // the driver committed it and the next batch loads it
      s.uploadSnapshots()
    }
    val deleted = s.cleanup()
    assert(deleted.nonEmpty)
    val names = remoteNames
    assert(!names.exists(_.startsWith("1_")), names)
    assert(names.count(n => n.startsWith("3_")) == 0)
    for (id <- ids.takeRight(3)) {
      val fresh = newStore()
      fresh.load(id)
      assert(contents(fresh).size == id.version)
    }
    // blobs of deleted snapshots are gone, those of retained ones stay
    val shared =
      Option(new File(remote, "shared").list()).getOrElse(Array.empty[String]).filterNot(_.endsWith(".crc"))
    assert(shared.nonEmpty)
  }

  test(
    "clean-up running while a snapshot upload is in flight deletes none of its blobs, even with no grace"
  ) {
    var store: LineageStore = null
    // between the upload's blobs and its zip, clean-up (with an orphan sweep and a zero grace period) runs
    val midUpload = new CleanupMidUpload(() => store)
    val settings =
      StoreSettings.Default.copy(
        minDeltasForSnapshot = 1000,
        minVersionsToRetain = 2,
        orphanGracePeriodMs = 0
      )
    store = newStore(settings, crash = midUpload)
    store.load(CheckpointId.Empty)
    var last = CheckpointId.Empty
    for (i <- 1 to 4) {
      last = commitBatch(store, (1 to 50).map(j => s"k$i-$j" -> "v").toMap); store.load(last)
    }
    store.freezeNow()
    store.uploadSnapshots()
    assert(midUpload.deleted.lastOption.contains("ran"))
    assert(!midUpload.deleted.exists(_.startsWith("shared/")), midUpload.deleted)
    val fresh = newStore()
    fresh.load(last)
    assert(contents(fresh).size == 200)
  }

  test(
    "a clean-up that meets an upload in flight keeps expired snapshots and lists nothing; the next deletes them"
  ) {
    val lists = new java.util.concurrent.atomic.AtomicInteger
    val counted = filesOn(
      new HadoopBlobStore(
        new Path(remote.toURI),
        new Configuration(),
        LineageConf.DeltaUploadPartBytes.default
      ) {
        override def list(dir: String) = { lists.incrementAndGet(); super.list(dir) }
      }
    )
    var store: LineageStore = null
    @volatile var armed = false
    val midUpload = new CleanupMidUpload(() => store, () => armed)
    val settings =
      StoreSettings.Default.copy(
        minDeltasForSnapshot = 1000,
        minVersionsToRetain = 2,
        orphanGracePeriodMs = 0
      )
    store = newStore(settings, counted, midUpload)
    store.load(CheckpointId.Empty)
    def batch(i: Int, snapshot: Boolean): CheckpointId = {
      val id = commitBatch(store, (1 to 50).map(j => s"k$i-$j" -> "v").toMap)
      if (snapshot) { store.freezeNow(); store.uploadSnapshots() }
      store.load(id) // as the next batch does: Spark committed it
      id
    }
    val ids = (1 to 4).map(batch(_, snapshot = true))
    store.cleanup() // the first clean-up lists the store once (the orphan sweep)
    val listsAfterFirst = lists.get
    assert(listsAfterFirst > 0)
    batch(5, snapshot = false)
    armed = true
    val head = batch(6, snapshot = true) // clean-up runs between this upload's blobs and its zip
    assert(midUpload.deleted.lastOption.contains("ran"))
    assert(!midUpload.deleted.exists(n => n.endsWith(".zip") || n.startsWith("shared/")), midUpload.deleted)
    assert(remoteNames.contains(ids(2).snapshotFileName), "the expired snapshot stays while uploads run")
    val deleted = store.cleanup()
    assert(deleted.contains(ids(2).snapshotFileName), deleted)
    assert(lists.get == listsAfterFirst, "neither clean-up listed the store")
    val fresh = newStore()
    fresh.load(head)
    assert(contents(fresh).size == 300)
  }

  test("clean-up deletes no shared blob while a retained snapshot's index cannot be read") {
    // Snapshots at versions 2 and n only; between them one flush per version, more than the L0 files that
    // trigger a compaction of mostly new keys, so RocksDB compacts the SST files of snapshot 2 away and
    // snapshot n no longer references all of them.
    val n = CompactionTrigger.FewCopies + 2
    val settings =
      StoreSettings.Default.copy(
        minDeltasForSnapshot = 1000,
        minVersionsToRetain = n - 1, // versions 2 to n: snapshot 2 is the base of version 2
        orphanGracePeriodMs = 0
      )
    val a = newStore(settings)
    a.load(CheckpointId.Empty)
    var ids = Vector.empty[CheckpointId]
    def batch(i: Int): Unit = {
      ids :+= commitBatch(a, (1 to 300).map(j => s"k${j % 150}-$i" -> s"v$i-$j").toMap)
      a.freezeNow()
      a.uploadSnapshots()
    }
    (1 until n).foreach(batch)
    Thread.sleep(1500) // let RocksDB's background compaction finish
    batch(n)
    val v2 = ids(1)
    val vn = ids.last
    // keep only the zips of versions 2 and n (as if no snapshot had been taken in between)
    ids.slice(2, n - 1).foreach { id =>
      new File(remote, id.snapshotFileName).delete()
      new File(remote, s".${id.snapshotFileName}.crc").delete()
    }
    val blobsOf2 = files.readSnapshotIndex(v2).sharedBlobs.toSet
    val blobsOfN = files.readSnapshotIndex(vn).sharedBlobs.toSet
    assert((blobsOf2 -- blobsOfN).nonEmpty, s"RocksDB did not compact in $n flushes: the test proves nothing")
    // A new store (nothing cached) at version n; snapshot 2 is retained (base of version 2) but unreadable.
    val b = newStore(settings)
    b.load(vn)
    val zip2 = new File(remote, v2.snapshotFileName)
    val good = Files.readAllBytes(zip2.toPath)
    new File(remote, s".${v2.snapshotFileName}.crc").delete()
    Files.write(zip2.toPath, "not a zip".getBytes(UTF_8))
    val deleted = b.cleanup() // the first clean-up of a store also sweeps orphans
    assert(!deleted.exists(_.startsWith("shared/")), deleted)
    // the store reads again: the next clean-up sweeps, and keeps what snapshot 2 references
    Files.write(zip2.toPath, good)
    b.cleanup()
    val shared = Option(new File(remote, "shared").list()).getOrElse(Array.empty[String]).toSet
    assert(blobsOf2.forall(shared.contains), blobsOf2 -- shared)
    val fresh = newStore(settings)
    assert(fresh.load(v2).base == LoadBase.Snapshot(v2))
    assert(contents(fresh).size == 300) // 150 keys from each of batches 1 and 2
  }

  test("a delta of another store is refused by name") {
    val s = newStore()
    s.load(CheckpointId.Empty)
    val v1 = commitBatch(s, Map("a" -> "1"))
    val foreign = new CheckpointFiles(remoteBlobs, StoreIdentity(0, 1, "default"), pool)
    val other = newStore(StoreSettings.Default, foreign)
    val e = intercept[CorruptCheckpointFileException](other.load(v1))
    assert(e.getMessage.contains("partition 0"))
  }
}

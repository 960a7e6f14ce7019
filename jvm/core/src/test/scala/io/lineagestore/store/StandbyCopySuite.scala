package io.lineagestore.store

import java.io.{File, InputStream, RandomAccessFile}
import java.util.concurrent.Executors
import java.util.concurrent.atomic.AtomicLong

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.format.StoreIdentity
import io.lineagestore.lineage.{CheckpointId, LineageResolver, LoadBase}
import io.lineagestore.storage.BlobStore
import io.lineagestore.testing.DiskDamage
import io.lineagestore.testing.DiskDamage.Sidecar

/** Standby copies against a real RocksDB and a real local Hadoop filesystem: a copy fetched, refreshed and
  * taken over by the store's next load on its executor; and a copy that lags, was half fetched, is damaged or
  * follows an attempt that was never committed never changes what a load loads (it equals the lineage's
  * state, from a directory with no standby).
  */
class StandbyCopySuite extends AnyFunSuite with StoreFixture {
  override protected def defaultSettings: StoreSettings = StoreSettings.Default.copy(minDeltasForSnapshot = 2)

  private val standbyPool = Executors.newFixedThreadPool(2)
  private val location = "file:/checkpoint/state/0/0"
  private val identity = StoreIdentity(0, 0, "default")

  /** Counts the bytes read from the shared area (SST blobs) and every open. */
  private final class CountingBlobStore(inner: BlobStore) extends DelegatingBlobStore(inner) {
    val sharedOpens = new AtomicLong
    val opens = new AtomicLong
    override def open(name: String): InputStream = {
      opens.incrementAndGet()
      if (name.startsWith("shared/")) sharedOpens.incrementAndGet()
      inner.open(name)
    }
  }

  private def executor(name: String) = new LocalDirectories(new File(tmp, name), 60L * 60 * 1000)

  private def standbyOf(dirs: LocalDirectories, blobs: BlobStore, crash: CrashPoints = CrashPoints.None) = {
    val lease = dirs.acquireStandby(location).getOrElse(fail("standby lock busy"))
    (lease, new StandbyCopy(lease, new CheckpointFiles(blobs, identity, standbyPool), crash))
  }

  /** Batches 1..n of 200 keys each on `s`, each uploaded; returns the head. */
  private def fill(s: LineageStore, batches: Range, tag: String = "v"): CheckpointId = batches.map { i =>
    (1 to 200).foreach(j => s.put(D, b(s"k$i-$j"), b(tag * 40 + i)))
    if (i > 1) s.delete(D, b(s"k${i - 1}-7"))
    val id = s.commit()
    s.uploadSnapshots()
    id
  }.last

  /** The snapshot a standby of `head` is refreshed to here: the one a cold load of the head starts from. */
  private def snapshotOf(head: CheckpointId): CheckpointId =
    LineageResolver.plan(head, None, files).base match {
      case LoadBase.Snapshot(s) => s
      case other                => fail(s"no snapshot under $head: the load starts from $other")
    }

  /** A store on `dirs`' own directory for the store (taking over its standby), and the lease. */
  private def storeOn(dirs: LocalDirectories, blobs: BlobStore): (LineageStore, LocalLease) = {
    val lease = dirs.acquire(location)
    (newStore(checkpointFiles = new CheckpointFiles(blobs, identity, pool), local = lease.dir), lease)
  }

  /** The state the lineage says `head` holds, loaded on a fresh directory with no standby. */
  private def lineageState(head: CheckpointId): Map[String, String] = {
    val fresh = newStore()
    fresh.load(head)
    contents(fresh)
  }

  test("a standby fetched on another executor is taken over: the load reads no SST from the blob store") {
    val owner = newStore()
    owner.load(CheckpointId.Empty)
    val head = fill(owner, 1 to 4)
    val expected = contents(owner)

    val blobs = new CountingBlobStore(remoteBlobs)
    val (standbyLease, standby) = standbyOf(executor("b"), blobs)
    val fetched = standby.refresh(snapshotOf(head), othersBytes = 0, maxBytes = Long.MaxValue)
    assert(fetched.isInstanceOf[StandbyCopy.Refresh.Fetched], fetched)
    assert(standby.reached.contains(snapshotOf(head)))
    assert(blobs.sharedOpens.get > 0)
    // a second refresh to the same snapshot reads nothing at all
    val opensBefore = blobs.opens.get
    assert(
      standby.refresh(snapshotOf(head), 0, Long.MaxValue) == StandbyCopy.Refresh.UpToDate(snapshotOf(head))
    )
    assert(blobs.opens.get == opensBefore)
    standbyLease.release()

    val dirs = executor("b")
    val loads = new CountingBlobStore(remoteBlobs)
    val (store, lease) = storeOn(dirs, loads)
    assert(lease.standby.exists(_.reached.contains(snapshotOf(head))), lease.standby)
    store.load(head)
    assert(contents(store) == expected)
    assert(loads.sharedOpens.get == 0, "every SST came from the standby")
    assert(store.counters.filesReused.get > 0)
    // the standby is the store's own directory now: nothing is left to take over again
    assert(dirs.standbyBytes == 0)
    lease.release()
  }

  /** Versions 1..4 (snapshots uploaded) and a 5th whose snapshot is not: the head, with deltas after the
    * snapshot a standby of version 4's lineage holds.
    */
  private def storeWithDeltasAfterSnapshot(owner: LineageStore): (CheckpointId, CheckpointId) = {
    owner.load(CheckpointId.Empty)
    val snapshot = snapshotOf(fill(owner, 1 to 4))
    (1 to 200).foreach(j => owner.put(D, b(s"k5-$j"), b("w" * 40)))
    owner.delete(D, b("k4-9"))
    (snapshot, owner.commit())
  }

  /** The follower's two steps for the deltas after `snapshot`: fetched with no lock into the incoming
    * directory, then put in place in `standby` (whose lease the caller holds).
    */
  private def copyDeltas(
      standby: StandbyCopy,
      snapshot: CheckpointId,
      roomBytes: Long = Long.MaxValue
  ): (TransferStats, Long) = {
    val incoming = executor("b").standbyIncoming(location)
    val (fetched, stats) =
      StandbyCopy.fetchDeltas(files, snapshot, deltasOnStorage, standby.deltaNames, incoming, roomBytes)
    (stats, standby.placeDeltas(snapshot, deltasOnStorage, fetched))
  }

  /** A standby on executor "b" holding `snapshot` and the deltas after it that fit in `roomBytes`. */
  private def standbyWithDeltas(
      snapshot: CheckpointId,
      roomBytes: Long = Long.MaxValue
  ): (StandbyLease, StandbyCopy, (TransferStats, Long)) = {
    val (standbyLease, standby) = standbyOf(executor("b"), remoteBlobs)
    standby.refresh(snapshot, 0, Long.MaxValue)
    (standbyLease, standby, copyDeltas(standby, snapshot, roomBytes))
  }

  private def deltasOnStorage: Seq[CheckpointId] =
    files.listCheckpointFiles().filter(_.kind == CheckpointId.Delta).map(_.id)

  /** The store's directory on `dirs` (taking its standby over) and a store reading its standby's deltas. */
  private def storeWithLocalDeltas(dirs: LocalDirectories): (LineageStore, LocalLease, LocalDeltaCopies) = {
    val lease = dirs.acquire(location)
    val local = LocalDeltaCopies.in(lease.dir)
    val files = new CheckpointFiles(remoteBlobs, identity, pool, localDeltas = Some(local))
    (newStore(checkpointFiles = files, local = lease.dir), lease, local)
  }

  test(
    "a standby's deltas after its snapshot: a takeover replays them from local disk, each verified first"
  ) {
    val owner = newStore()
    val (snapshot, head) = storeWithDeltasAfterSnapshot(owner)
    val after = deltasOnStorage.filter(_.version > snapshot.version)
    assert(after.nonEmpty && after.map(_.version).max == head.version)
    val (standbyLease, standby, (fetched, upTo)) = standbyWithDeltas(snapshot)
    assert(fetched.filesMoved == after.size && upTo == head.version, fetched)
    assert(copyDeltas(standby, snapshot) == ((TransferStats(), upTo)), "a second round fetches nothing")
    standbyLease.release()

    val (store, lease, local) = storeWithLocalDeltas(executor("b"))
    assert(lease.standby.exists(_.deltas == after.size), lease.standby)
    store.load(head)
    assert(contents(store) == contents(owner))
    assert(local.filesRead.get == after.size && local.rejected.get == 0)
    assert(Option(local.dir.listFiles()).forall(_.isEmpty), "replayed copies are deleted")
    lease.release()
  }

  test("a damaged standby delta is refused by its checksum: the load reads that one from storage") {
    val owner = newStore()
    val (snapshot, head) = storeWithDeltasAfterSnapshot(owner)
    val (standbyLease, standby, _) = standbyWithDeltas(snapshot)
    val damaged = new File(new File(standby.dir, StandbyCopy.DeltasDir), head.deltaFileName)
    DiskDamage.flip(damaged, damaged.length() / 2, Sidecar.Dropped) // written by java.io: it has none
    standbyLease.release()

    val (store, lease, local) = storeWithLocalDeltas(executor("b"))
    store.load(head)
    assert(contents(store) == contents(owner))
    assert(contents(store) == lineageState(head))
    assert(local.rejected.get == 1 && !damaged.exists())
    lease.release()
  }

  test("standby deltas stop at the disk bound, leave no partial file, and go once storage has them no more") {
    val owner = newStore()
    val (snapshot, head) = storeWithDeltasAfterSnapshot(owner)
    val (standbyLease, standby, (none, upTo)) = standbyWithDeltas(snapshot, roomBytes = 0)
    assert(none.filesMoved == 0 && upTo == snapshot.version)
    val deltasDir = new File(standby.dir, StandbyCopy.DeltasDir)
    val incoming = executor("b").standbyIncoming(location)
    assert(Option(deltasDir.listFiles()).forall(_.isEmpty) && Option(incoming.listFiles()).forall(_.isEmpty))
    assert(copyDeltas(standby, snapshot)._2 == head.version)
    assert(standby.deltaNames.contains(head.deltaFileName))
    // the head's delta gone from storage (say, a clean-up): its copy goes, and the copy holds one version less
    val stillStored = deltasOnStorage.filterNot(_ == head)
    assert(standby.placeDeltas(snapshot, stillStored, Nil) == head.version - 1)
    assert(!standby.deltaNames.contains(head.deltaFileName))
    // a copy that no longer holds the snapshot (taken over, or refreshed to another) takes no fetched file
    val stray = new File(incoming, head.deltaFileName)
    java.nio.file.Files.write(stray.toPath, Array[Byte](1, 2, 3))
    assert(
      standby.placeDeltas(
        CheckpointId(snapshot.version, "other"),
        deltasOnStorage,
        Seq(stray)
      ) == snapshot.version
    )
    assert(!stray.exists() && !standby.deltaNames.contains(head.deltaFileName))
    standbyLease.release()
  }

  test("a lagging standby: the load keeps what matches, fetches only the newer files, equals the lineage") {
    val owner = newStore()
    owner.load(CheckpointId.Empty)
    val early = fill(owner, 1 to 2)
    val (standbyLease, standby) = standbyOf(executor("b"), remoteBlobs)
    standby.refresh(snapshotOf(early), 0, Long.MaxValue)
    standbyLease.release()
    val head = fill(owner, 3 to 7)
    assert(snapshotOf(head) != snapshotOf(early))

    val loads = new CountingBlobStore(remoteBlobs)
    val (store, lease) = storeOn(executor("b"), loads)
    assert(lease.standby.exists(_.reached.contains(snapshotOf(early))))
    store.load(head)
    assert(contents(store) == lineageState(head))
    assert(contents(store) == contents(owner))
    assert(store.counters.filesReused.get > 0, "the lagging copy's SSTs that the newer snapshot still has")
    lease.release()
  }

  test("a standby that lags catches up fetching only what it lacks") {
    val owner = newStore()
    owner.load(CheckpointId.Empty)
    val early = fill(owner, 1 to 2)
    val blobs = new CountingBlobStore(remoteBlobs)
    val (lease, standby) = standbyOf(executor("b"), blobs)
    val first = standby.refresh(snapshotOf(early), 0, Long.MaxValue).asInstanceOf[StandbyCopy.Refresh.Fetched]
    val head = fill(owner, 3 to 6)
    val second = standby.refresh(snapshotOf(head), 0, Long.MaxValue).asInstanceOf[StandbyCopy.Refresh.Fetched]
    assert(second.stats.filesReused > 0, second)
    assert(standby.reached.contains(snapshotOf(head)))
    assert(
      LocalCopyCheck
        .mismatches(files.readSnapshotIndex(snapshotOf(head)), new File(standby.dir, "db"))
        .isEmpty
    )
    assert(first.stats.filesMoved > 0)
    lease.release()
  }

  test("a half-fetched standby (its fetch failed midway) has no record and never changes the load") {
    val owner = newStore()
    owner.load(CheckpointId.Empty)
    val head = fill(owner, 1 to 4)
    var sharedLeft = 1
    val failing = new DelegatingBlobStore(remoteBlobs) {
      override def open(name: String): InputStream = {
        if (name.startsWith("shared/")) synchronized {
          if (sharedLeft == 0) throw new java.io.IOException(s"injected: connection reset reading $name")
          sharedLeft -= 1
        }
        super.open(name)
      }
    }
    val (standbyLease, standby) = standbyOf(executor("b"), failing)
    intercept[Exception](standby.refresh(snapshotOf(head), 0, Long.MaxValue))
    assert(standby.reached.isEmpty)
    standbyLease.release()

    val (store, lease) = storeOn(executor("b"), remoteBlobs)
    assert(lease.standby.exists(_.reached.isEmpty), "an incomplete copy is still taken (its files may serve)")
    store.load(head)
    assert(contents(store) == lineageState(head))
    lease.release()
  }

  test("a crash after a refresh's files (no record yet) leaves a copy the load checks like any other") {
    val owner = newStore()
    owner.load(CheckpointId.Empty)
    val head = fill(owner, 1 to 4)
    val crash: CrashPoints =
      (s: CrashPoints.Step) => if (s == CrashPoints.StandbyAfterFiles) throw new RuntimeException("crash")
    val (standbyLease, standby) = standbyOf(executor("b"), remoteBlobs, crash)
    intercept[RuntimeException](standby.refresh(snapshotOf(head), 0, Long.MaxValue))
    assert(standby.reached.isEmpty)
    standbyLease.release()
    val loads = new CountingBlobStore(remoteBlobs)
    val (store, lease) = storeOn(executor("b"), loads)
    store.load(head)
    assert(contents(store) == lineageState(head))
    assert(loads.sharedOpens.get == 0)
    lease.release()
  }

  test("a damaged standby file is not kept: the load downloads it and equals the lineage") {
    val owner = newStore()
    owner.load(CheckpointId.Empty)
    val head = fill(owner, 1 to 4)
    val (standbyLease, standby) = standbyOf(executor("b"), remoteBlobs)
    standby.refresh(snapshotOf(head), 0, Long.MaxValue)
    val sst = new File(standby.dir, "db").listFiles().filter(_.getName.endsWith(".sst")).maxBy(_.length())
    val raf = new RandomAccessFile(sst, "rw")
    try { raf.seek(100); val x = raf.read(); raf.seek(100); raf.write(x ^ 0xff) }
    finally raf.close()
    standbyLease.release()

    val loads = new CountingBlobStore(remoteBlobs)
    val (store, lease) = storeOn(executor("b"), loads)
    store.load(head)
    assert(contents(store) == lineageState(head))
    assert(loads.sharedOpens.get == 1, "exactly the damaged SST is downloaded again")
    lease.release()
  }

  test("a standby of an attempt that was never committed: the load of the committed one equals its lineage") {
    val owner = newStore()
    owner.load(CheckpointId.Empty)
    val parent = fill(owner, 1 to 3)
    // two attempts of the next version from the same parent, each frozen and uploaded as a snapshot
    def attempt(tag: String): CheckpointId = {
      val s = newStore()
      s.load(parent)
      (1 to 300).foreach(j => s.put(D, b(s"a-$j"), b(tag * 30)))
      s.delete(D, b("k1-1"))
      val id = s.commit()
      s.freezeNow()
      s.uploadSnapshots()
      id
    }
    val losing = attempt("lost")
    val committed = attempt("won")
    assert(losing.version == committed.version && losing != committed)
    val (standbyLease, standby) = standbyOf(executor("b"), remoteBlobs)
    standby.refresh(losing, 0, Long.MaxValue)
    assert(standby.reached.contains(losing))
    standbyLease.release()

    val (store, lease) = storeOn(executor("b"), remoteBlobs)
    store.load(committed)
    val state = contents(store)
    assert(state == lineageState(committed))
    assert(state("a-1") == "won" * 30)
    lease.release()
  }

  test(
    "takeover rules: a clean-closed directory keeps its own files; a standby being fetched is left alone"
  ) {
    val owner = newStore()
    owner.load(CheckpointId.Empty)
    val head = fill(owner, 1 to 4)
    val dirs = executor("b")
    // a store closed cleanly on this executor: its directory resumes, the standby stays where it is
    val firstLease = dirs.acquire(location)
    val first =
      new LineageStore(new CheckpointFiles(remoteBlobs, identity, pool), firstLease.dir, defaultSettings)
    first.load(head)
    first.close()
    firstLease.release()
    val (standbyLease, standby) = standbyOf(dirs, remoteBlobs)
    standby.refresh(snapshotOf(head), 0, Long.MaxValue)
    standbyLease.release()
    val again = dirs.acquire(location)
    assert(again.reused && again.standby.isEmpty)
    assert(dirs.standbyBytes > 0)
    again.release()

    // on another executor, no directory of the store: the standby is taken, but not while its follower holds it
    val other = executor("d")
    val (otherLease, otherStandby) = standbyOf(other, remoteBlobs)
    otherStandby.refresh(snapshotOf(head), 0, Long.MaxValue)
    assert(other.acquireStandby(location).isEmpty, "one holder of a standby at a time")
    val busy = other.acquire(location)
    assert(busy.reused && busy.standby.isEmpty, "the acquire never waits for a fetch")
    busy.release()
    otherLease.release()
    val taken = other.acquire(location)
    assert(taken.standby.exists(_.reached.contains(snapshotOf(head))))
    taken.release()
  }

  test("the disk bound: a standby that does not fit beside the others is not fetched") {
    val owner = newStore()
    owner.load(CheckpointId.Empty)
    val head = fill(owner, 1 to 4)
    val blobs = new CountingBlobStore(remoteBlobs)
    val (lease, standby) = standbyOf(executor("b"), blobs)
    val r = standby.refresh(snapshotOf(head), othersBytes = 1000, maxBytes = 2000)
    assert(r.isInstanceOf[StandbyCopy.Refresh.TooLarge], r)
    assert(blobs.sharedOpens.get == 0 && standby.bytesHeld == 0 && standby.reached.isEmpty)
    lease.release()
  }

  test("idle standbys are evicted past the retention, held ones never") {
    val owner = newStore()
    owner.load(CheckpointId.Empty)
    val head = fill(owner, 1 to 2)
    var now = System.currentTimeMillis()
    val dirs = new LocalDirectories(new File(tmp, "c"), 1000, () => now)
    val (lease, standby) = standbyOf(dirs, remoteBlobs)
    standby.refresh(snapshotOf(head), 0, Long.MaxValue)
    now += 1000000
    assert(dirs.evictIdle().isEmpty, "held by its follower")
    lease.release()
    new File(tmp, "c/lineagestore/standby").listFiles().filter(_.isDirectory).foreach(_.setLastModified(0))
    assert(dirs.evictIdle().nonEmpty)
    assert(dirs.standbyBytes == 0)
  }
}

package io.lineagestore.store

import java.io.{File, InputStream}
import java.util.concurrent.Executors
import java.util.concurrent.atomic.AtomicBoolean

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.config.LineageConf
import io.lineagestore.format.StoreIdentity
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.storage.{BlobStore, HadoopBlobStore}

/** The standby follower against real stores (real RocksDB) on a real local Hadoop filesystem laid out as
  * Spark lays out a query's state (`<root>/<operator>/<partition>/`): what it follows, how it catches up,
  * that its copies are taken over by a load, and how a failing store backs off.
  */
class StandbyFollowerSuite extends AnyFunSuite with StoreFixture {
  override protected def defaultSettings: StoreSettings = StoreSettings.Default.copy(minDeltasForSnapshot = 2)

  private val standbyPool = Executors.newFixedThreadPool(2)
  private def root = new File(tmp, "checkpoint/state")
  private val op = FollowedOperator("unused", 0, "default")
  private def locationOf(p: Int) = new File(root, s"0/$p").toURI.toString.stripSuffix("/")
  private def hadoop(location: String): BlobStore =
    new HadoopBlobStore(new Path(location), new Configuration(), LineageConf.DeltaUploadPartBytes.default)

  /** A fixed cluster of `executors`, this one `self`; `failing` makes every read of storage fail; `registry`
    * plays the driver's (what every executor reports, as reported by this one's polls).
    */
  private final class Source(
      val self: String,
      all: Set[String],
      failing: AtomicBoolean = new AtomicBoolean,
      registry: Option[(StandbyRegistry, () => Long)] = None
  ) extends StandbySource {
    override def cluster(own: Set[FollowedOperator]): Set[FollowedOperator] = registry match {
      case Some((r, clock)) => r.report(StandbyRegistry.Report(self, own, Map.empty), clock()).operators
      case None             => Set.empty
    }
    def executors(): Set[String] = all
    def stores(o: FollowedOperator): Seq[FollowedStore] =
      Option(new File(root, s"${o.operatorId}").listFiles()).getOrElse(Array.empty[File]).toSeq.map { d =>
        val p = d.getName.toInt
        FollowedStore(locationOf(p), StoreIdentity(o.operatorId, p, o.storeName))
      }
    def blobsOf(s: FollowedStore): BlobStore = new DelegatingBlobStore(hadoop(s.location)) {
      override def open(name: String): InputStream = {
        if (failing.get) throw new java.io.IOException(s"injected: storage refuses $name")
        super.open(name)
      }
      override def list(dir: String) = {
        if (failing.get) throw new java.io.IOException(s"injected: storage refuses to list $dir")
        super.list(dir)
      }
    }
  }

  /** Partition `p`'s store, written where Spark would put it. */
  private def owner(p: Int): LineageStore = {
    val blobs = hadoop(locationOf(p))
    val s = newStore(checkpointFiles = new CheckpointFiles(blobs, StoreIdentity(0, p, "default"), pool))
    s.load(CheckpointId.Empty)
    s
  }
  private def batches(s: LineageStore, range: Range): CheckpointId = range.map { i =>
    (1 to 150).foreach(j => s.put(D, b(s"k$i-$j"), b("v" * 50 + i)))
    val id = s.commit()
    s.uploadSnapshots()
    id
  }.last

  private def follower(
      source: StandbySource,
      dirs: LocalDirectories,
      replicas: Int,
      clock: () => Long = () => 0L
  ) =
    new StandbyFollower(dirs, source, replicas, Long.MaxValue, 1000, standbyPool, clock = clock)

  test("with -1 the follower keeps a copy of every store not open here, at the newest snapshot") {
    val owners = (0 until 4).map(owner)
    owners.foreach(batches(_, 1 to 4))
    val dirs = new LocalDirectories(new File(tmp, "exec-1"), 3600000)
    var now = 0L
    val f = follower(new Source("exec-1", Set("exec-1", "exec-2")), dirs, -1, () => now)
    f.follow(op)
    f.owned(locationOf(2), op)
    val refreshed = f.poll(retentionMs = Long.MaxValue)
    assert(refreshed.map(_.location).toSet == Set(0, 1, 3).map(locationOf))
    assert(f.refreshes.get == 3 && f.bytesFetched.get > 0 && f.failures.get == 0)
    assert(f.takeUnreportedBytes() == f.bytesFetched.get && f.takeUnreportedBytes() == 0)
    assert(f.lagOf(locationOf(0)).isDefined)
    assert(dirs.acquireStandby(locationOf(2)).forall { l =>
      val empty = new StandbyCopy(l, files).bytesHeld == 0; l.release(); empty
    })

    // the stores move on: the next poll fetches only the newer snapshots' new files
    val fetchedBefore = f.bytesFetched.get
    owners.foreach(batches(_, 5 to 6))
    assert(f.poll(Long.MaxValue).isEmpty, "not due before one poll interval")
    now += 1000
    f.poll(Long.MaxValue)
    assert(f.refreshes.get == 6)
    assert(f.bytesFetched.get - fetchedBefore > 0)
    // nothing new: a poll reads listings only and fetches nothing
    val fetched = f.bytesFetched.get
    now += 1000
    assert(f.poll(Long.MaxValue).size == 3)
    assert(f.bytesFetched.get == fetched && f.refreshes.get == 6)
  }

  test(
    "a load on the follower's executor takes its copy over and equals the lineage, reading no SST or delta"
  ) {
    val s = owner(0)
    val head = batches(s, 1 to 5)
    val expected = contents(s)
    val dirs = new LocalDirectories(new File(tmp, "exec-2"), 3600000)
    val f = follower(new Source("exec-2", Set("exec-1", "exec-2")), dirs, -1)
    f.follow(op)
    f.poll(Long.MaxValue)
    assert(f.lagOf(locationOf(0)).contains(0L), "the deltas after its snapshot are copied too")
    var sharedReads = 0
    val counting = new DelegatingBlobStore(hadoop(locationOf(0))) {
      override def open(name: String): InputStream = {
        if (name.startsWith("shared/")) sharedReads += 1
        super.open(name)
      }
    }
    val lease = dirs.acquire(locationOf(0))
    assert(lease.standby.isDefined)
    f.owned(locationOf(0), op)
    val localDeltas = LocalDeltaCopies.in(lease.dir)
    val taken =
      new LineageStore(
        new CheckpointFiles(counting, StoreIdentity(0, 0, "default"), pool, localDeltas = Some(localDeltas)),
        lease.dir,
        defaultSettings
      )
    taken.load(head)
    assert(contents(taken) == expected)
    assert(sharedReads == 0)
    // every delta the load replayed came from the copy (the plan still reads their headers from storage)
    assert(taken.counters.deltasReplayed.get > 0)
    assert(localDeltas.filesRead.get == taken.counters.deltasReplayed.get && localDeltas.rejected.get == 0)
    // it is the store's own directory now: the follower leaves it alone, open or closed cleanly
    assert(f.poll(Long.MaxValue).isEmpty)
    taken.close()
    lease.release()
    f.released(locationOf(0))
    assert(dirs.resumable(locationOf(0)))
    assert(f.poll(Long.MaxValue).isEmpty)
  }

  test("an executor that never opened a store of an operator follows it from the cluster's registry") {
    (0 until 2).map(owner).foreach(batches(_, 1 to 4))
    var now = 0L
    val registry = new StandbyRegistry(minAgeMs = 10000)
    // exec-1 owns partition 0 and reports it; exec-2 has no provider of the operator at all
    registry.report(StandbyRegistry.Report("exec-1", Set(op), Map("k" -> "v")), now)
    val dirs = new LocalDirectories(new File(tmp, "exec-2-cold"), 3600000)
    val cold = follower(
      new Source("exec-2", Set("exec-1", "exec-2"), registry = Some(registry -> (() => now))),
      dirs,
      -1,
      () => now
    )
    assert(cold.poll(Long.MaxValue).map(_.location).toSet == Set(0, 1).map(locationOf))
    assert(cold.refreshes.get == 2)
    // exec-1's reports stop (its query stopped, or it is gone): past the registry's age nothing is followed
    now += 20000
    assert(cold.poll(Long.MaxValue).isEmpty)
  }

  test("an operator stays followed past the retention while a store of it is open here") {
    (0 until 2).map(owner).foreach(batches(_, 1 to 4))
    val dirs = new LocalDirectories(new File(tmp, "exec-1-long"), 3600000)
    var now = 0L
    val f = follower(new Source("exec-1", Set("exec-1", "exec-2")), dirs, -1, () => now)
    f.follow(op)
    f.owned(locationOf(1), op)
    assert(f.poll(retentionMs = 1000).map(_.location) == Seq(locationOf(0)))
    now += 5000 // a provider named it long ago, but is still open: the query runs on
    assert(f.poll(retentionMs = 1000).map(_.location) == Seq(locationOf(0)))
    f.released(locationOf(1))
    now += 5000
    assert(f.poll(retentionMs = 1000).isEmpty, "no store open here and named too long ago")
  }

  test(
    "a store closed cleanly here resumes until it moves on elsewhere, then its directory becomes the copy"
  ) {
    val s = owner(0)
    batches(s, 1 to 4)
    val dirs = new LocalDirectories(new File(tmp, "exec-3"), 3600000)
    var now = 0L
    val f = follower(new Source("exec-3", Set("exec-1", "exec-3")), dirs, -1, () => now)
    f.follow(op)
    val files0 = new CheckpointFiles(hadoop(locationOf(0)), StoreIdentity(0, 0, "default"), pool)
    // the store was here, closed cleanly at the head: resuming it is the cheapest copy, nothing is fetched
    val here = dirs.acquire(locationOf(0))
    val resumed = new LineageStore(files0, here.dir, defaultSettings)
    resumed.load(batches(s, 5 to 5))
    resumed.close()
    here.release()
    assert(dirs.closedAt(locationOf(0)).isDefined)
    now += 1000
    f.poll(Long.MaxValue)
    assert(dirs.resumable(locationOf(0)) && f.bytesFetched.get == 0 && f.refreshes.get == 0)

    // the store moves on on another executor: the directory it left becomes the copy, which fetches only
    // what changed since
    val head = batches(s, 6 to 9)
    val expected = contents(s)
    now += 1000
    f.poll(Long.MaxValue)
    assert(!dirs.resumable(locationOf(0)))
    assert(f.refreshes.get == 1 && f.bytesFetched.get > 0)
    val standby = dirs.acquireStandby(locationOf(0)).get
    val copy = new StandbyCopy(standby, files0)
    assert(copy.reached.exists(_.version >= 8), s"copy at ${copy.reached}")
    assert(
      f.bytesFetched.get < copy.bytesHeld,
      "the copy fetched every file: the left directory was not used"
    )
    standby.release()
    // and a load here takes it over and equals the lineage
    val lease = dirs.acquire(locationOf(0))
    assert(lease.standby.isDefined)
    val taken = new LineageStore(files0, lease.dir, defaultSettings)
    taken.load(head)
    assert(contents(taken) == expected)
    taken.close()
    lease.release()
  }

  test("with n replicas an executor follows exactly the stores StandbyPlan.follows gives it") {
    (0 until 6).foreach(p => batches(owner(p), 1 to 2))
    val all = Set("exec-1", "exec-2", "exec-3")
    val dirs = new LocalDirectories(new File(tmp, "exec-3"), 3600000)
    val f = follower(new Source("exec-3", all), dirs, 1)
    f.follow(op)
    val refreshed = f.poll(Long.MaxValue).map(_.location).toSet
    val expected = (0 until 6)
      .map(locationOf)
      .filter(l => StandbyPlan.follows("exec-3", all, ownedHere = false, 1, LocalDirectories.keyOf(l)))
      .toSet
    assert(refreshed == expected)
  }

  test("a failing store backs off; operators no provider named within the retention are dropped") {
    batches(owner(0), 1 to 2)
    var now = 0L
    val failing = new AtomicBoolean(true)
    val dirs = new LocalDirectories(new File(tmp, "exec-1"), 3600000)
    val f = follower(new Source("exec-1", Set("exec-1"), failing), dirs, -1, () => now)
    f.follow(op)
    assert(f.poll(Long.MaxValue).isEmpty && f.failures.get == 1) // due again 2 intervals later
    now = 1000
    f.poll(Long.MaxValue)
    assert(f.failures.get == 1, "backing off")
    now = 2000
    f.poll(Long.MaxValue)
    assert(f.failures.get == 2) // due again 4 intervals later, at 6000
    failing.set(false)
    now = 5000
    assert(f.poll(Long.MaxValue).isEmpty)
    now = 6000
    assert(f.poll(Long.MaxValue).size == 1)
    now += 10000
    assert(f.poll(retentionMs = 5000).isEmpty, "the operator was named 16 s ago")
  }
}

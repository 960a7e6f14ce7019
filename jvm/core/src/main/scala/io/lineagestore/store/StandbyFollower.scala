package io.lineagestore.store

import java.util.concurrent.ExecutorService
import java.util.concurrent.atomic.AtomicLong

import scala.util.control.NonFatal

import io.lineagestore.format.StoreIdentity
import io.lineagestore.lineage.{CheckpointFile, CheckpointId}
import io.lineagestore.storage.BlobStore

/** An operator's stores a standby follower keeps copies of: the query's state root (Spark's
  * `checkpointRootLocation`), the operator and the store name, as the executor's own providers learn them.
  */
final case class FollowedOperator(stateRoot: String, operatorId: Long, storeName: String)

/** One store a follower may copy: its location (Spark's `storeCheckpointLocation`) and identity. */
final case class FollowedStore(location: String, identity: StoreIdentity)

/** What a follower needs of the cluster and of storage, passed in (the glue implements it with Spark and
  * Hadoop; the suites with a fixed set and a local filesystem).
  */
trait StandbySource {

  /** This executor's ID. */
  def self: String

  /** The executors alive now, this one included. */
  def executors(): Set[String]

  /** The stores of `op` on storage now (its partitions' directories). */
  def stores(op: FollowedOperator): Seq[FollowedStore]

  /** The blob store at `store.location`. */
  def blobsOf(store: FollowedStore): BlobStore

  /** Tells the cluster which operators this executor owns a store of (`own`) and returns the operators any
    * executor does ([[StandbyRegistry]], on the driver), so that this executor follows them even with no
    * store of its own. Called once per poll; may block for one round trip. Empty where no registry is
    * reachable (then the executor follows only what its own providers named).
    */
  def cluster(own: Set[FollowedOperator]): Set[FollowedOperator] = Set.empty
}

/** Keeps this executor's standby copies ([[StandbyCopy]]) following their stores' lineages, with no task on
  * the executor: each poll lists the stores of every followed operator (named by a provider here, or by the
  * cluster's registry: [[StandbySource.cluster]]; one with a store open here stays followed as long as it
  * is), and for each store this executor follows ([[StandbyPlan.follows]]) lists the store's directory and
  * refreshes its copy to the newest snapshot found there and the deltas after it (a store closed cleanly here
  * is left to resume until it moves on elsewhere, then its directory becomes the copy: [[refreshNow]]).
  * Refreshes run one after another on the polling thread (one per executor), their file transfers on `pool`
  * (`standbyThreads`, executor-wide, apart from the stores' transfer pool, so a store's own restore never
  * queues behind a standby; no task on `pool` waits for another there). A failing store backs off
  * ([[StandbyPlan.nextPollMs]]).
  *
  * The newest snapshot on storage may be of an attempt Spark never committed (a retried or speculative task
  * that uploaded one); a copy of it only saves less. The lineage decides what a load loads: a copy is checked
  * by content when a load takes it over, never trusted ([[StandbyCopy]]).
  *
  * Threads: [[follow]], [[owned]] and [[released]] are called by task threads, [[poll]] by the follower's
  * scheduler (or a test); what they share (followed operators, owned stores, per-store state) is guarded by
  * this object's monitor and only read or replaced under it; the counters are atomics.
  */
final class StandbyFollower(
    dirs: LocalDirectories,
    source: StandbySource,
    replicas: Int,
    maxBytes: Long,
    pollMs: Long,
    pool: ExecutorService,
    crash: CrashPoints = CrashPoints.None,
    clock: () => Long = () => System.currentTimeMillis()
) {
  import StandbyFollower._

  private var operators = Map.empty[FollowedOperator, Long] // -> last time a provider named it
  private var ownedHere = Map.empty[String, FollowedOperator] // locations with a provider open here
  private var states = Map.empty[String, StoreState] // by location

  val bytesFetched = new AtomicLong
  val refreshes = new AtomicLong
  val failures = new AtomicLong
  val skippedTooLarge = new AtomicLong
  private val unreportedBytes = new AtomicLong

  /** A provider on this executor opened a store of `op`: follow the operator's other stores. */
  def follow(op: FollowedOperator): Unit = synchronized { operators += op -> clock() }

  /** A provider of the store at `location` (of `op`) is open here: its own directory is live, no standby of
    * it, and `op` stays followed while it is open.
    */
  def owned(location: String, op: FollowedOperator): Unit = synchronized { ownedHere += location -> op }

  def released(location: String): Unit = synchronized { ownedHere -= location }

  /** Bytes fetched by this executor's standbys since the last call (a sum metric reported by every store:
    * each byte once).
    */
  def takeUnreportedBytes(): Long = unreportedBytes.getAndSet(0)

  /** Versions the standby of `location` here stands behind the newest delta on storage at its last poll (the
    * newest it holds: its snapshot's, or the last of the deltas after it that it copied without a gap).
    */
  def lagOf(location: String): Option[Long] = synchronized(states.get(location).flatMap(_.lag))

  /** One round on the calling thread: every store due is refreshed. Returns the stores refreshed without a
    * failure. Operators no provider named for `retentionMs`, with no store open here, are dropped.
    */
  def poll(retentionMs: Long): Seq[FollowedStore] = {
    val now = clock()
    val (named, owned) = synchronized {
      val open = ownedHere.values.toSet
      operators = operators.filter { case (op, seen) => open(op) || now - seen <= retentionMs }
      (operators.keySet, ownedHere)
    }
    val ops = (named ++ scala.util.Try(source.cluster(owned.values.toSet)).getOrElse(Set.empty)).toSeq
    val executors = source.executors() + source.self
    val due = ops.flatMap(op => scala.util.Try(source.stores(op)).getOrElse(Nil)).filter { s =>
      StandbyPlan.follows(
        source.self,
        executors,
        owned.contains(s.location),
        replicas,
        LocalDirectories.keyOf(s.location)
      )
    }
    val started = synchronized(due.filter(s => states.get(s.location).forall(_.nextDueMs <= now)))
    started.filter(refresh)
  }

  private def refresh(s: FollowedStore): Boolean = {
    var lag: Option[Long] = None
    val ok =
      try {
        lag = refreshNow(s)
        true
      } catch {
        case NonFatal(_) =>
          failures.incrementAndGet()
          false
      }
    synchronized {
      val st = states.getOrElse(s.location, StoreState())
      val failed = if (ok) 0 else st.consecutiveFailures + 1
      val next = clock() + StandbyPlan.nextPollMs(failed, pollMs, pollMs * MaxBackoffFactor)
      states += s.location -> st.copy(
        consecutiveFailures = failed,
        nextDueMs = next,
        lag = if (ok) lag else st.lag
      )
    }
    ok
  }

  /** Refreshes the copy of `s` to the newest snapshot on storage; returns its lag behind the newest delta.
    *
    * A store closed cleanly here resumes from its own directory, cheaper than any copy, as long as no newer
    * checkpoint was written elsewhere; once one was (the store moved on to another executor), that directory
    * becomes the copy's starting files ([[LocalDirectories.demoteToStandby]]), so the copy fetches only what
    * changed since the store left.
    */
  private def refreshNow(s: FollowedStore): Option[Long] = {
    val files = new CheckpointFiles(source.blobsOf(s), s.identity, pool)
    val listed = files.listCheckpointFiles()
    val newestDelta = listed.filter(_.kind == CheckpointId.Delta).map(_.id.version).maxOption
    val follow = dirs.closedAt(s.location) match {
      case None         => true
      case Some(closed) => newestDelta.exists(_ > closed.version) && dirs.demoteToStandby(s.location)
    }
    if (follow) refreshCopy(s, files, listed, newestDelta) else None
  }

  private def refreshCopy(
      s: FollowedStore,
      files: CheckpointFiles,
      listed: Seq[CheckpointFile],
      newestDelta: Option[Long]
  ): Option[Long] = dirs.acquireStandby(s.location) match {
    case None        => None // taken over, or another refresh holds it
    case Some(lease) =>
      val followed =
        try {
          val newestSnapshot = listed.filter(_.kind == CheckpointId.Snapshot).map(_.id).maxByOption(_.version)
          newestSnapshot.map { snapshot =>
            val copy = new StandbyCopy(lease, files, crash, hashesOf(s.location))
            copy.refresh(snapshot, math.max(0L, dirs.standbyBytes - copy.bytesHeld), maxBytes) match {
              case StandbyCopy.Refresh.Fetched(_, stats) =>
                refreshes.incrementAndGet()
                bytesFetched.addAndGet(stats.bytesMoved)
                unreportedBytes.addAndGet(stats.bytesMoved)
              case _: StandbyCopy.Refresh.TooLarge => skippedTooLarge.incrementAndGet()
              case _                               => ()
            }
            (snapshot, copy.reached.contains(snapshot), copy.deltaNames)
          }
        } finally lease.release()
      followed.map { case (snapshot, complete, have) =>
        val held = if (complete) followDeltas(s, files, listed, snapshot, have) else snapshot.version
        newestDelta.map(v => math.max(0L, v - held)).getOrElse(0L)
      }
  }

  /** The deltas after the copy's snapshot, once it holds it, so a takeover reads nothing of the store from
    * storage but the plan's headers: downloaded with no lock held (a takeover never waits for them), then put
    * in place under the copy's lease, if it still exists and holds `snapshot`. Returns the newest version the
    * copy then holds without a gap.
    */
  private def followDeltas(
      s: FollowedStore,
      files: CheckpointFiles,
      listed: Seq[CheckpointFile],
      snapshot: CheckpointId,
      have: Set[String]
  ): Long = {
    val deltas = listed.filter(_.kind == CheckpointId.Delta).map(_.id)
    val incoming = dirs.standbyIncoming(s.location)
    val room = math.max(0L, maxBytes - dirs.standbyBytes)
    val (fetched, stats) = StandbyCopy.fetchDeltas(files, snapshot, deltas, have, incoming, room)
    bytesFetched.addAndGet(stats.bytesMoved)
    unreportedBytes.addAndGet(stats.bytesMoved)
    // what is left in incoming afterwards (all of it when the copy was taken over meanwhile) nobody wants
    try
      dirs.acquireExistingStandby(s.location) match {
        case None        => snapshot.version
        case Some(lease) =>
          try
            new StandbyCopy(lease, files, crash, hashesOf(s.location)).placeDeltas(snapshot, deltas, fetched)
          finally lease.release()
      }
    finally LocalDirectories.deleteRecursively(incoming)
  }

  private def hashesOf(location: String): HashCache = synchronized {
    val st = states.getOrElse(location, StoreState())
    st.hashes.getOrElse {
      val h = new HashCache
      states += location -> st.copy(hashes = Some(h))
      h
    }
  }
}

object StandbyFollower {

  /** A failing store polls at most this many poll intervals apart. */
  val MaxBackoffFactor = 16L

  private final case class StoreState(
      consecutiveFailures: Int = 0,
      nextDueMs: Long = 0L,
      lag: Option[Long] = None,
      hashes: Option[HashCache] = None
  )
}

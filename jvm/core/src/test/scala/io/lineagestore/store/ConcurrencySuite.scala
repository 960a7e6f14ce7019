package io.lineagestore.store

import java.io.File
import java.nio.charset.StandardCharsets.UTF_8
import java.util.concurrent.atomic.AtomicBoolean

import scala.collection.mutable

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.format.{ContentHashes, FileIdentity, SnapshotZip}
import io.lineagestore.lineage.CheckpointId

/** The threading contract of [[LineageStore]] under load: a task thread commits, aborts, re-runs batches from
  * older versions (loads that restore snapshots) while Spark's maintenance thread uploads snapshots and
  * cleans up without pause, and the transfer pool moves files for both. Afterwards every retained version
  * loads on a fresh directory with exactly the state the task committed, every snapshot's index matches the
  * bytes it names, and the store's hash cache matches the files it describes. (A load of an old version may
  * find the base it chose cleaned once a newer snapshot completed: it plans again, `loadsReplanned`.)
  */
class ConcurrencySuite extends AnyFunSuite with StoreFixture {
  // snapshots every other commit, a short window and a sweep on every clean-up: maintenance always has work
  override protected def defaultSettings: StoreSettings = StoreSettings.Default.copy(
    minDeltasForSnapshot = 2,
    minVersionsToRetain = 8,
    orphanGracePeriodMs = 0,
    orphanSweepEveryCleanups = 1
  )

  /** Checks every hash cache entry that describes an SST now in the store's directory (name and size) against
    * the file's content; returns how many it checked. A compaction may delete a file meanwhile: skipped.
    */
  private def checkHashCache(store: LineageStore): Int = {
    val (hashes, dbDir) = store.knownHashes
    hashes.count { case (name, (size, sha)) =>
      val f = new File(dbDir, name)
      name.endsWith(".sst") && f.isFile && f.length() == size && {
        val actual =
          try FileIdentity.ofFileAs(sha, f)
          catch { case _: java.io.FileNotFoundException => None }
        actual.foreach(h => assert(h == sha, s"hash cache entry of $name"))
        actual.isDefined
      }
    }
  }

  test("commits, loads and maintenance run concurrently; state, snapshots and hashes stay right") {
    val store = newStore()
    val rnd = new scala.util.Random(7)
    // the committed lineage as the task sees it: version -> (checkpoint, state after it)
    val committed = mutable.ArrayBuffer.empty[(CheckpointId, Map[String, String])]
    def stateAt(version: Long) =
      if (version == 0) Map.empty[String, String] else committed(version.toInt - 1)._2
    def idAt(version: Long) = if (version == 0) CheckpointId.Empty else committed(version.toInt - 1)._1

    val stop = new AtomicBoolean(false)
    val failures = new java.util.concurrent.ConcurrentLinkedQueue[Throwable]()
    // uploads and clean-ups on threads of their own, as when one store's snapshot upload (on close, or in
    // Spark's maintenance pool) overlaps another maintenance run's clean-up
    def loop(body: => Unit) = new Thread(() =>
      try while (!stop.get()) body
      catch { case t: Throwable => failures.add(t) }
    )
    val maintenance = Seq(loop(store.uploadSnapshots()), loop(store.cleanup()))
    maintenance.foreach(_.start())
    var restores = 0L
    var hashesChecked = 0
    var newest = 0L // the newest version ever loaded: retention keeps what reloads need below it
    try {
      for (batch <- 1 to 150) {
        val head = committed.size.toLong
        // mostly the next batch; sometimes a re-run from an older version (Spark re-running a batch whose
        // commit it never recorded, or a restart from an older checkpoint), inside the retention window
        val from =
          if (head > 4 && rnd.nextInt(6) == 0) math.max(newest - 7, head - 1 - rnd.nextInt(6)) else head
        newest = math.max(newest, from)
        val before = store.counters.filesDownloaded.get()
        store.load(idAt(from))
        if (store.counters.filesDownloaded.get() > before) restores += 1
        assert(contents(store) == stateAt(from), s"batch $batch loading version $from")
        val puts = (1 to 20).map(_ => s"k${rnd.nextInt(300)}" -> s"v$batch-${rnd.nextInt(1000)}").toMap
        val deletes = stateAt(from).keys.toSeq.sorted.filter(_ => rnd.nextInt(20) == 0)
        if (batch % 10 == 0) hashesChecked += checkHashCache(store)
        if (rnd.nextInt(10) == 0) {
          puts.foreach { case (k, v) => store.put(D, k.getBytes(UTF_8), v.getBytes(UTF_8)) }
          store.abort()
        } else {
          val id = commitBatch(store, puts, deletes)
          committed.remove(from.toInt, committed.size - from.toInt)
          committed += id -> ((stateAt(from) ++ puts) -- deletes) // commitBatch puts, then deletes
        }
      }
    } finally {
      stop.set(true)
      maintenance.foreach(_.join())
    }
    assert(failures.isEmpty, failures)
    assert(restores > 0, "no load restored a snapshot: the test would not exercise restores beside uploads")
    store.uploadSnapshots()
    store.cleanup()

    hashesChecked += checkHashCache(store)
    assert(hashesChecked > 0, "no hash cache entry described a file: the check would be vacuous")
    // every snapshot's index names blobs with exactly the content it says
    val zips = remoteNames.filter(_.endsWith(".zip"))
    assert(zips.nonEmpty)
    zips.foreach { zip =>
      val id = io.lineagestore.lineage.CheckpointId.parseFileName(zip).get._1
      files.readSnapshotIndex(id).files.filter(_.blob.isDefined).foreach { f =>
        val blob = new File(remote, SnapshotZip.sharedPath(f.blob.get))
        assert(
          blob.length() == f.size && FileIdentity.ofFileAs(f.identity, blob).contains(f.identity),
          s"${f.name} in $zip"
        )
        assert(f.crc32c.contains(ContentHashes.crc32cOf(blob)), s"${f.name} in $zip")
      }
    }
    // every retained version loads on a fresh directory with the state committed: the window of the newest
    // version ever loaded (a re-run may have gone back from it since)
    val head = committed.size.toLong
    (newest - 7 to head).foreach { v =>
      val fresh = newStore()
      fresh.load(idAt(v))
      assert(contents(fresh) == stateAt(v), s"version $v on a fresh directory")
      fresh.close()
    }
  }
}

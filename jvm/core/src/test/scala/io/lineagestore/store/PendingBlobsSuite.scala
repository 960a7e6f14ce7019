package io.lineagestore.store

import java.io.{IOException, OutputStream}

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.config.LineageConf
import io.lineagestore.format.SnapshotZip
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.storage.HadoopBlobStore

/** The pending-blob gauge (metric `lineagestorePendingBlobs`) through real uploads, a failed zip write and
  * the orphan sweep, on a real RocksDB and a local Hadoop filesystem.
  */
class PendingBlobsSuite extends AnyFunSuite with StoreFixture {
  override protected def defaultSettings: StoreSettings =
    StoreSettings.Default.copy(minDeltasForSnapshot = 1000, minVersionsToRetain = 5)

  /** Blob store whose next zip write fails after the body ran, as when the connection drops mid-PUT. */
  private final class FailNextZip
      extends HadoopBlobStore(
        new Path(remote.toURI),
        new Configuration(),
        LineageConf.DeltaUploadPartBytes.default
      ) {
    @volatile var armed = false
    override def write(name: String)(body: OutputStream => Unit): Unit =
      if (armed && name.endsWith(".zip")) {
        armed = false
        body(OutputStream.nullOutputStream())
        throw new IOException(s"injected: write of $name failed")
      } else super.write(name)(body)
  }

  /** Uploads blobs (counted while in flight), fails the next upload's zip and retries it: returns the store,
    * the blobs that failed upload left behind, and the committed head.
    */
  private def storeWithLeftovers(graceMs: Long): (LineageStore, Set[String], CheckpointId) = {
    val blobs = new FailNextZip
    var store: LineageStore = null
    var inFlight = -1
    val atBlobs: CrashPoints = step =>
      if (step == CrashPoints.SnapshotAfterBlobs) inFlight = store.pendingBlobs.count
    store = newStore(defaultSettings.copy(orphanGracePeriodMs = graceMs), filesOn(blobs), atBlobs)
    store.load(CheckpointId.Empty)
    def batch(i: Int): CheckpointId = {
      val id = commitBatch(store, (1 to 50).map(j => s"k$i-$j" -> "v").toMap)
      store.load(id)
      store.freezeNow()
      id
    }
    batch(1)
    store.uploadSnapshots()
    val firstBlobs = shared
    assert(firstBlobs.nonEmpty)
    assert(inFlight == firstBlobs.size, "an upload's blobs are pending between their writes and the zip")
    assert(store.pendingBlobs.count == 0, "the zip references them")

    val head = batch(2)
    blobs.armed = true
    val e = intercept[Exception](store.uploadSnapshots())
    assert(e.getMessage.contains(head.snapshotFileName), e.getMessage)
    val leftovers = shared -- firstBlobs
    assert(leftovers.nonEmpty)
    assert(store.pendingBlobs.count == leftovers.size, "a failed upload's blobs stay pending")

    store.uploadSnapshots() // the retry writes its own blobs and a zip referencing them
    assert(remoteNames.contains(head.snapshotFileName))
    assert(
      store.pendingBlobs.count == leftovers.size,
      "the retry's blobs are referenced, the failed ones not"
    )
    (store, leftovers, head)
  }

  private def shared: Set[String] =
    Option(new java.io.File(remote, SnapshotZip.SharedDir).list())
      .map(_.toSet)
      .getOrElse(Set.empty)
      .filter(_.endsWith(".sst"))

  test("a failed upload's blobs stay pending until the orphan sweep deletes them past the grace period") {
    val (store, leftovers, head) = storeWithLeftovers(graceMs = 0)
    val deleted = store.cleanup() // the first clean-up sweeps
    assert(leftovers.map(SnapshotZip.sharedPath).subsetOf(deleted.toSet), deleted)
    assert(store.pendingBlobs.count == 0)
    assert((shared & leftovers).isEmpty)
    val fresh = newStore()
    fresh.load(head)
    assert(contents(fresh).size == 100)
  }

  test("inside the grace period the sweep keeps unreferenced blobs and counts them as pending") {
    val (store, leftovers, _) = storeWithLeftovers(graceMs = 60L * 60 * 1000)
    val deleted = store.cleanup()
    assert(!deleted.exists(_.startsWith(SnapshotZip.SharedDir)), deleted)
    assert(leftovers.subsetOf(shared))
    assert(store.pendingBlobs.count == leftovers.size)
  }
}

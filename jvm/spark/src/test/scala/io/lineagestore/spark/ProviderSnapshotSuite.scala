package io.lineagestore.spark

import java.io.{File, RandomAccessFile}
import java.util.UUID
import java.util.concurrent.atomic.AtomicReference
import java.util.zip.ZipFile

import scala.util.Random

import org.apache.spark.sql.catalyst.expressions.{GenericInternalRow, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String

import io.lineagestore.format.SnapshotIndex

/** Conformance of [[LineageStateStoreProvider]] (continued): snapshots by maintenance, clean-up, store names
  * and partitions.
  */
class ProviderSnapshotSuite extends ProviderTestSupport {

  private val Default = StateStore.DEFAULT_COL_FAMILY_NAME

  // ---- snapshots and clean-up ----------------------------------------------------------------------------

  test("snapshots by doMaintenance; a fresh provider loads from the snapshot alone") {
    val p = newProvider() // minDeltasForSnapshot = 2
    var c = Empty
    val history = scala.collection.mutable.ArrayBuffer.empty[(Ckpt, Data)]
    for (v <- 1 to 7) {
      c = batch(p, c) { s => put(s, s"k$v", v); put(s, "last", v) }
      history += c -> ((1 to v).map(i => (s"k$i", 0) -> i).toMap + (("last", 0) -> v))
      if (v == 2) assert(snapshotFiles().isEmpty, "a snapshot is uploaded by maintenance, not by commit")
      p.doMaintenance()
    }
    val zips = snapshotFiles()
    assert(zips.nonEmpty)
    assert(storeFiles().exists(n => n.startsWith("shared/") && n.endsWith(".sst")), storeFiles())
    val newest = zips.map(fileVersion).max
    assert(newest >= 5, zips)
    closeProvider(p)

    // every delta below the newest snapshot can go: the snapshot alone rebuilds it and what follows
    val dir = new File(storeId().storeCheckpointLocation().toUri.getPath)
    deltaFiles().filter(fileVersion(_) < newest).foreach { n =>
      assert(new File(dir, n).delete())
      new File(dir, s".$n.crc").delete()
    }
    history.filter(_._1.version >= newest).foreach { case (ck, expected) =>
      val fresh = newProvider()
      val s = fresh.getStore(ck.version, ck.id)
      try {
        assert(data(s) === expected)
        if (ck.version == newest) {
          val replayed = s.metrics.customMetrics.collectFirst {
            case (m, n) if m.name == "lineagestoreDeltasReplayed" => n
          }
          assert(replayed === Some(0L))
        }
      } finally s.abort()
      closeProvider(fresh)
    }
  }

  test("forceSnapshotOnCommit makes the next maintenance upload that version's snapshot") {
    val p = newProvider(conf = storeConf(MinDeltasKey -> "1000"))
    val c1 = batch(p, Empty)(s => put(s, "a", 1))
    p.doMaintenance()
    assert(snapshotFiles().isEmpty)
    val s = p.getStore(1, c1.id, forceSnapshotOnCommit = true)
    put(s, "b", 2)
    s.commit()
    val c2 = Ckpt(2, s.getStateStoreCheckpointInfo().stateStoreCkptId)
    p.doMaintenance()
    assert(snapshotFiles() === Set(s"2_${c2.id.get}.zip"))
    closeProvider(p)
    assert(readAt(newProvider(), c2) === Map(("a", 0) -> 1, ("b", 0) -> 2))
  }

  /** Shared blobs each remaining snapshot's INDEX references. */
  private def referencedBlobs(zips: Set[String]): Map[String, Set[String]] = {
    val dir = new File(storeId().storeCheckpointLocation().toUri.getPath)
    zips.map { z =>
      val zip = new ZipFile(new File(dir, z))
      try {
        z -> SnapshotIndex.parse(zip.getInputStream(zip.getEntry("INDEX")).readAllBytes(), z).sharedBlobs
      } finally zip.close()
    }.toMap
  }

  test("clean-up keeps minBatchesToRetain versions loadable and deletes older files and blobs") {
    val conf = storeConf(MinBatchesKey -> "3", MinDeltasKey -> "2")
    val p = newProvider(conf = conf)
    var c = Empty
    val history = scala.collection.mutable.ArrayBuffer.empty[(Ckpt, Data)]
    var losing: Ckpt = null
    for (v <- 1 to 20) {
      if (v == 5) losing = batch(p, c)(s => put(s, "losing", 1)) // an attempt the driver did not record
      c = batch(p, c) { s =>
        put(s, s"k${v % 7}", v)
        if (v % 4 == 0) remove(s, s"k${(v + 3) % 7}")
      }
      val previous = history.lastOption.map(_._2).getOrElse(Map.empty)
      history += c -> {
        val m = previous + ((s"k${v % 7}", 0) -> v)
        if (v % 4 == 0) m - ((s"k${(v + 3) % 7}", 0)) else m
      }
      p.doMaintenance()
      if (v == 6) assert(fileOf(losing, "delta").exists(), "a losing attempt inside the window is kept")
    }
    // Spark loads the newest version at the next batch; maintenance after it
    p.getStore(c.version, c.id).abort()
    p.doMaintenance()

    val versions = storeFiles().filter(n => n.endsWith(".delta") || n.endsWith(".zip")).map(fileVersion)
    assert(
      versions.min >= 20 - 3 - 2,
      s"files older than the retained versions' snapshot remain: ${storeFiles()}"
    )
    assert(!fileOf(losing, "delta").exists(), "the losing attempt left the window and should be deleted")
    assert(!storeFiles().exists(_.startsWith("1_")))

    // blobs: exactly those the remaining snapshots reference
    val refs = referencedBlobs(snapshotFiles())
    val blobs = storeFiles().filter(_.startsWith("shared/")).map(_.stripPrefix("shared/"))
    assert(refs.values.flatten.toSet === blobs, s"indexes reference ${refs}, shared/ holds $blobs")
    closeProvider(p)

    history.filter(_._1.version >= 20 - 3 + 1).foreach { case (ck, expected) =>
      val fresh = newProvider(conf = conf)
      assert(readAt(fresh, ck) === expected, s"version ${ck.version}")
      closeProvider(fresh)
    }
  }

  test("clean-up by the provider that took over after an executor loss") {
    val conf = storeConf(MinBatchesKey -> "3", MinDeltasKey -> "3")
    val p = newProvider(conf = conf)
    var c = Empty
    for (v <- 1 to 10) c = batch(p, c)(s => put(s, "a", v))
    closeProvider(p) // no maintenance ran on this executor
    assert(deltaFiles().size === 10)

    val q = newProvider(conf = conf)
    for (v <- 11 to 16) {
      c = batch(q, c)(s => put(s, "a", v))
      q.doMaintenance()
    }
    q.getStore(c.version, c.id).abort()
    q.doMaintenance()
    val versions = (deltaFiles() ++ snapshotFiles()).map(fileVersion)
    assert(versions.min > 5, storeFiles())
    closeProvider(q)
    assert(readAt(newProvider(conf = conf), c) === Map(("a", 0) -> 16))
  }

  test("maintenance running concurrently with batches loses nothing") {
    val conf = storeConf(MinBatchesKey -> "4", MinDeltasKey -> "2")
    val p = newProvider(conf = conf)
    val failure = new AtomicReference[Throwable]()
    @volatile var running = true
    val maint = new Thread(() =>
      while (running) {
        try p.doMaintenance()
        catch { case t: Throwable => failure.compareAndSet(null, t) }
        Thread.sleep(2)
      }
    )
    maint.start()
    var c = Empty
    val history = scala.collection.mutable.ArrayBuffer.empty[(Ckpt, Data)]
    var model = Map.empty[(String, Int), Int]
    try {
      for (v <- 1 to 30) {
        c = batch(p, c) { s =>
          (0 until 20).foreach(i => put(s, s"k${(v * 7 + i) % 50}", v))
          remove(s, s"k${v % 50}")
        }
        model = model ++ (0 until 20).map(i => (s"k${(v * 7 + i) % 50}", 0) -> v) - ((s"k${v % 50}", 0))
        history += c -> model
      }
    } finally {
      running = false
      maint.join()
    }
    assert(failure.get() === null, s"maintenance failed: ${failure.get()}")
    p.doMaintenance()
    closeProvider(p)
    history.takeRight(4).foreach { case (ck, expected) =>
      val fresh = newProvider(conf = conf)
      assert(readAt(fresh, ck) === expected, s"version ${ck.version}")
      closeProvider(fresh)
    }
  }

  // ---- store names, partitions ---------------------------------------------------------------------------

  test("stores of other partitions and store names are isolated and laid out as Spark expects") {
    val left = storeId(opId = 1, partition = 0, storeName = "left-keyToNumValues")
    val other = storeId(opId = 1, partition = 1)
    val pl = newProvider(left)
    val po = newProvider(other)
    val cl = batch(pl, Empty)(s => put(s, "a", 1))
    val co = batch(po, Empty)(s => put(s, "a", 2))
    assert(new File(checkpointRoot, s"1/0/left-keyToNumValues/1_${cl.id.get}.delta").isFile)
    assert(new File(checkpointRoot, s"1/1/1_${co.id.get}.delta").isFile)
    closeProvider(pl)
    closeProvider(po)
    assert(readAt(newProvider(left), cl) === Map(("a", 0) -> 1))
    assert(readAt(newProvider(other), co) === Map(("a", 0) -> 2))
    // a checkpoint ID of another store is not found in this one
    intercept[Exception](readAt(newProvider(left), co))
  }
}

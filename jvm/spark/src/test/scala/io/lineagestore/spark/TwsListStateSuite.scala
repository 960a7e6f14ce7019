package io.lineagestore.spark

import java.io.File

import scala.collection.mutable

import org.apache.spark.sql.{Dataset, Encoders}
import org.apache.spark.sql.execution.streaming.runtime.MemoryStream
import org.apache.spark.sql.execution.streaming.state.StateStore
import org.apache.spark.sql.streaming._
import org.scalatest.funsuite.AnyFunSuite

/** Per key: a ListState every event appends to (a negative value clears it first) and a ValueState counting
  * the list's elements; reports the count beside the list's size and sum as read back.
  */
class AppendPerEvent extends StatefulProcessor[String, (String, Int), ListOut] {
  @transient private var values: ListState[Int] = _
  @transient private var count: ValueState[Long] = _

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    values = getHandle.getListState("values", Encoders.scalaInt, TTLConfig.NONE)
    count = getHandle.getValueState("count", Encoders.scalaLong, TTLConfig.NONE)
  }

  override def handleInputRows(
      key: String,
      rows: Iterator[(String, Int)],
      timerValues: TimerValues
  ): Iterator[ListOut] = {
    var c = if (count.exists()) count.get() else 0L
    rows.foreach { case (_, v) =>
      if (v < 0) { values.clear(); c = 0 }
      else { values.appendValue(v); c += 1 }
    }
    if (c == 0) count.clear() else count.update(c)
    val vs = values.get().toSeq
    Iterator(ListOut(key, c, vs.size.toLong, vs.map(_.toLong).sum))
  }
}

case class ListOut(k: String, count: Long, size: Long, sum: Long)

/** ListState appends at volume (many per key and batch, lists growing across batches) on lineagestore and on
  * Spark's own RocksDB provider: the same output and the same number of state rows (numKeys) batch by batch,
  * across a restart that keeps the local state and one that restores from the checkpoint's snapshot.
  */
class TwsListStateSuite extends AnyFunSuite with LocalSparkSession {
  private val Builtin = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
  protected val appName = "lineagestore-tws-list"
  protected val sessionConf = Seq(
    "spark.sql.extensions" -> classOf[LineageSessionExtensions].getName,
    "spark.sql.streaming.stateStore.minDeltasForSnapshot" -> "2"
  )

  /** Batch b: 30 keys, 40 appends each, 5 keys of them cleared midway (b >= 2); keys 30..39 from b = 3. */
  private def batch(b: Int): Seq[(String, Int)] = {
    val rng = new scala.util.Random(b)
    val keys = if (b >= 3) 40 else 30
    val appends = (0 until 40).flatMap(j => (0 until keys).map(i => (s"k$i", b * 1000 + j)))
    val clears = if (b >= 2) (0 until 5).map(_ => (s"k${rng.nextInt(keys)}", -1)) else Nil
    val (first, second) = rng.shuffle(appends).splitAt(appends.size / 2)
    first ++ clears ++ second
  }
  // query runs: batches 0-1, a restart (local state kept), batches 2-3, a cold restart (no local state:
  // restored from the snapshot in the checkpoint), batches 4-6
  private val runs = Seq(Seq(0, 1), Seq(2, 3), Seq(4, 5, 6))

  private def runOn(name: String, provider: String): (Map[Long, Set[ListOut]], Map[Long, Long], Long) = {
    val session = spark
    import session.implicits._
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", provider)
    val checkpoint = new File(tmp, name).getAbsolutePath
    val input = MemoryStream[(String, Int)](session)
    val out = mutable.Map.empty[Long, Set[ListOut]]
    val stateRows = mutable.Map.empty[Long, Long]
    var downloadedOnColdStart = 0L
    try {
      runs.zipWithIndex.foreach { case (batches, run) =>
        if (run == 2) {
          StateStore.stop() // unloads every provider (a snapshot is uploaded on close)
          LocalSparkSession.deleteRecursively(new File(tmp, "local"))
        }
        val write: (Dataset[ListOut], Long) => Unit =
          (ds, id) => out.synchronized(out(id) = ds.collect().toSet)
        val q = input
          .toDS()
          .groupByKey(_._1)
          .transformWithState(new AppendPerEvent, TimeMode.None(), OutputMode.Update())
          .writeStream
          .option("checkpointLocation", checkpoint)
          .outputMode(OutputMode.Update())
          .foreachBatch(write)
          .start()
        try batches.foreach { b => input.addData(batch(b)); q.processAllAvailable() }
        finally q.stop()
        q.exception.foreach(e => fail(s"$name on $provider failed", e))
        q.recentProgress.filter(_.stateOperators.nonEmpty).foreach { p =>
          stateRows(p.batchId) = p.stateOperators.head.numRowsTotal
          val downloaded = p.stateOperators.head.customMetrics.get("lineagestoreFilesDownloaded")
          if (run == 2 && p.batchId == batches.head && downloaded != null) downloadedOnColdStart = downloaded
        }
      }
    } finally spark.conf.unset("spark.sql.streaming.stateStore.providerClass")
    (out.toMap, stateRows.toMap, downloadedOnColdStart)
  }

  test("many ListState appends per key across batches and restarts: same values and numKeys as Spark's") {
    val (ours, ourRows, downloaded) = runOn("list-lineage", classOf[LineageStateStoreProvider].getName)
    val (theirs, theirRows, _) = runOn("list-builtin", Builtin)
    assert(ours.keySet == (0L to 6L).toSet, ours.keySet)
    assert(ours === theirs)
    assert(ourRows === theirRows, "state rows (numKeys) per batch")
    // the model: every key reported has its list and its count (2 rows) unless it ended its batch cleared
    val live = mutable.Map.empty[String, Long]
    (0 to 6).foreach { b =>
      val rows = ours(b.toLong)
      rows.foreach { r =>
        assert(r.count == r.size, s"batch $b: $r")
        if (r.count == 0) live -= r.k else live(r.k) = r.count
      }
      assert(ourRows(b.toLong) == 2 * live.size, s"batch $b: numKeys")
    }
    assert(live("k0") > 100, s"lists grew across batches: $live")
    assert(downloaded > 0, "the cold restart did not restore from a snapshot")
    val snapshots =
      LocalSparkSession.walk(new File(tmp, "list-lineage/state")).filter(_.getName.endsWith(".zip"))
    assert(snapshots.nonEmpty, "no snapshot was written")
  }
}

package io.lineagestore.spark

import java.io.File

import org.apache.spark.sql.Dataset
import org.apache.spark.sql.execution.streaming.runtime.MemoryStream
import org.apache.spark.sql.execution.streaming.state.StateStoreId
import org.apache.spark.sql.execution.streaming.state.lineagestore.CoordinatorProbe
import org.apache.spark.sql.streaming.{GroupStateTimeout, OutputMode}
import org.scalatest.concurrent.Eventually._
import org.scalatest.funsuite.AnyFunSuite
import org.scalatest.time.SpanSugar._

/** What Spark's driver expects to hear from a provider: snapshot uploads reach the coordinator (a regression
  * test; the provider once never reported them).
  */
class SparkCoordinatorRegressionSuite extends AnyFunSuite with LocalSparkSession {
  protected val appName = "lineagestore-coordinator"
  protected val sessionConf = Seq(
    "spark.sql.streaming.stateStore.providerClass" -> classOf[LineageStateStoreProvider].getName,
    "spark.sql.streaming.stateStore.minDeltasForSnapshot" -> "2",
    "spark.sql.streaming.stateStore.maintenanceInterval" -> "100ms"
  )

  /** A flatMapGroupsWithState query on 2 partitions at `cp`, after three batches of new keys. */
  private def runThreeBatches(cp: String) = {
    val session = spark
    import session.implicits._
    val input = MemoryStream[(String, Int)](session)
    val write: (Dataset[(String, Long, Long, Boolean)], Long) => Unit = (ds, _) => ds.collect()
    val q = input
      .toDS()
      .groupByKey(_._1)
      .flatMapGroupsWithState(OutputMode.Update(), GroupStateTimeout.NoTimeout())(
        GroupStateFunctions.countAndSum
      )
      .writeStream
      .option("checkpointLocation", cp)
      .outputMode(OutputMode.Update())
      .foreachBatch(write)
      .start()
    try
      (1 to 3).foreach { i =>
        input.addData((s"a$i", 1), (s"b$i", 2), (s"c$i", 3))
        q.processAllAvailable()
      }
    catch { case e: Throwable => q.stop(); throw e }
    q
  }

  // Cause: nothing in lineagestore calls StateStoreCoordinatorRef.snapshotUploaded after a snapshot upload
  // (LineageStore.uploadSnapshots / LineageStateStoreProvider.doSnapshotMaintenance). Spark's built-in
  // providers report every upload (HDFSBackedStateStoreProvider, RocksDB through RocksDBEventForwarder), and
  // Spark 4.3's coordinator uses the reports to find stores whose snapshots lag: with lineagestore it logs
  // "StateStoreCoordinator Snapshot Lag Detected ... latest snapshot: no upload for query run" for every store
  // once a run passes minDeltasForSnapshot * 5 batches, although snapshots are uploaded. Fix: after each
  // uploaded snapshot, StateStoreProvider.coordinatorRef.foreach(_.snapshotUploaded(
  // StateStoreProviderId(stateStoreId, runId from hadoopConf), version, System.currentTimeMillis())) when
  // StateStoreConf.reportSnapshotUploadLag is set (a shim in the state package can make that call).
  test("snapshot uploads are reported to Spark's state store coordinator") {
    val cp = new File(tmp, "cp").getAbsolutePath
    val q = runThreeBatches(cp)
    try {
      // the snapshots are there ...
      eventually(timeout(30.seconds), interval(200.millis)) {
        Seq(0, 1).foreach { part =>
          val zips = Option(new File(cp, s"state/0/$part").list()).getOrElse(Array.empty[String])
          assert(zips.exists(_.endsWith(".zip")), s"partition $part: ${zips.toSeq}")
        }
      }
      // ... and the driver must hear of them (Spark names the store by the qualified checkpoint path)
      eventually(timeout(10.seconds), interval(200.millis)) {
        Seq(0, 1).foreach { part =>
          val id = StateStoreId(s"file:$cp/state", 0, part)
          assert(CoordinatorProbe.latestSnapshotVersion(spark, id, q.runId).nonEmpty, s"partition $part")
        }
      }
    } finally q.stop()
  }

  test("each store's snapshot lag is in the progress by name, and the lag listener names the worst stores") {
    val q = runThreeBatches(new File(tmp, "cp-lag").getAbsolutePath)
    try {
      val progress = q.lastProgress
      val lags = SnapshotLagListener.lags(progress)
      // the metrics are taken right after a commit, whose own delta is past any uploaded snapshot: both
      // stores lag by at least 1, and far less than the bound
      assert(lags.map(_.store).toSet == Set("partition_0_default", "partition_1_default"), progress.json)
      assert(lags.forall(l => l.lag >= 1 && l.lag <= 20 && l.operator == 0), lags)
      assert(lags.map(_.lag) == lags.map(_.lag).sorted.reverse, "worst first")
      val summed = progress.stateOperators(0).customMetrics.get(LineageMetrics.SnapshotLag.name)
      assert(lags.map(_.lag).sum == summed.longValue)

      val bound = SnapshotLagListener.boundOf(spark)
      assert(bound == 20) // maxSnapshotLagDeltas' default, above minDeltasForSnapshot (2) here
      val info = SnapshotLagListener.report(progress, bound).get
      assert(
        !info.pastBound && info.text.contains("partition_0_default") && info.text.contains(
          "partition_1_default"
        )
      )
      val past = SnapshotLagListener.report(progress, 0).get
      assert(past.pastBound, past)
      assert(past.text.contains("2 state store(s) past the snapshot lag bound"), past.text)
      assert(
        past.text.contains("spark.sql.streaming.stateStore.lineagestore.maxSnapshotLagDeltas=0"),
        past.text
      )
    } finally q.stop()
  }
}

package io.lineagestore.spark

import java.io.File
import java.util.concurrent.ConcurrentLinkedQueue

import scala.jdk.CollectionConverters._

import org.apache.spark.SparkThrowable
import org.apache.spark.sql.{ForeachWriter, Row}
import org.apache.spark.sql.execution.streaming.sources.LowLatencyMemoryStream
import org.apache.spark.sql.functions.{count, lit, sum}
import org.apache.spark.sql.streaming.Trigger
import org.scalatest.funsuite.AnyFunSuite

/** Spark 4.3's real-time mode (`Trigger.RealTime`, issue 18) on lineagestore: what happens, recorded.
  *
  * Spark refuses to start a real-time query whose session sets any state store provider other than its own
  * RocksDB provider (`StreamingQueryManager.throwIfConfsAreRealTimeModeIncompatible`: a class-name
  * comparison, like transformWithState's, raised as
  * `STREAMING_REAL_TIME_MODE.SQL_CONFIGURATION_NOT_SUPPORTED` before the query runs, so no plan rule can lift
  * it). This suite shows the refusal for an aggregation and a dropDuplicates on lineagestore, and that the
  * very same queries run in real-time mode on Spark's provider (so the query, source and sink are valid and
  * the provider is the one reason).
  */
class RealTimeModeSuite extends AnyFunSuite with LocalSparkSession {
  private val Builtin = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
  private val ProviderKey = "spark.sql.streaming.stateStore.providerClass"

  protected val appName = "lineagestore-realtime"
  // real-time mode runs a batch's stages at once (pipelined shuffle): the source task and both shuffle
  // partitions need a core each
  override protected val master = "local[4]"
  protected val sessionConf = Seq("spark.sql.streaming.realTimeMode.minBatchDuration" -> "1000")

  private val Rows = Seq(("a", 1), ("b", 2), ("a", 3), ("b", 2), ("a", 1))

  /** The two queries, by name, on a fresh real-time source holding `Rows`. */
  private def queries(): Seq[(String, org.apache.spark.sql.DataFrame)] = {
    val s = spark
    import s.implicits._
    def source() = {
      val input = LowLatencyMemoryStream[(String, Int)](s)
      input.addData(Rows)
      input.toDF().toDF("k", "v")
    }
    Seq(
      "aggregation" -> source().groupBy("k").agg(count(lit(1)).as("n"), sum("v").as("total")),
      "dropDuplicates" -> source()
        .dropDuplicates("k", "v")
        .select($"k", lit(1L).as("n"), $"v".cast("long").as("total"))
    )
  }

  private def start(name: String, df: org.apache.spark.sql.DataFrame, provider: String, run: String) = {
    spark.conf.set(ProviderKey, provider)
    try
      df.writeStream
        .outputMode("update")
        .foreach(new RealTimeModeSuite.Collect(run))
        .option("checkpointLocation", new File(tmp, s"$run-$name").getAbsolutePath)
        .trigger(Trigger.RealTime("2 seconds"))
        .start()
    finally spark.conf.unset(ProviderKey)
  }

  test("lineagestore: Spark refuses real-time mode by the provider's class name, for both operators") {
    for ((name, df) <- queries()) {
      val e =
        intercept[IllegalArgumentException](start(name, df, classOf[LineageStateStoreProvider].getName, "ls"))
      assert(
        e.asInstanceOf[SparkThrowable]
          .getCondition === "STREAMING_REAL_TIME_MODE.SQL_CONFIGURATION_NOT_SUPPORTED",
        name
      )
      assert(e.getMessage.contains(ProviderKey) && e.getMessage.contains(Builtin), e.getMessage)
      assert(RealTimeModeSuite.rows("ls").isEmpty, "the refused query ran")
    }
  }

  test("EXPERIMENT: a checkpoint begun on lineagestore continues in real-time mode when the session names no provider") {
    val s = spark
    import s.implicits._
    val input = LowLatencyMemoryStream[(String, Int)](s)
    input.addData(Rows)
    val df = input.toDF().toDF("k", "v").groupBy("k").agg(count(lit(1)).as("n"), sum("v").as("total"))
    val ck = new File(tmp, "route-agg").getAbsolutePath
    spark.conf.set(ProviderKey, classOf[LineageStateStoreProvider].getName)
    val first = df.writeStream
      .outputMode("update")
      .foreach(new RealTimeModeSuite.Collect("route"))
      .option("checkpointLocation", ck)
      .trigger(Trigger.AvailableNow())
      .start()
    first.awaitTermination()
    spark.conf.unset(ProviderKey)
    info("after micro-batch: " + RealTimeModeSuite.rows("route"))
    input.addData(Seq(("a", 10), ("c", 5)))
    val q = df.writeStream
      .outputMode("update")
      .foreach(new RealTimeModeSuite.Collect("route"))
      .option("checkpointLocation", ck)
      .trigger(Trigger.RealTime("2 seconds"))
      .start()
    try {
      val expected = Set(("a", 4L, 15L), ("b", 2L, 4L), ("c", 1L, 5L))
      val deadline = System.nanoTime() + 60L * 1000 * 1000 * 1000
      def latest = RealTimeModeSuite.rows("route").groupBy(_._1).map(_._2.last).toSet
      while (latest != expected && System.nanoTime() < deadline && q.exception.isEmpty) Thread.sleep(200)
      info("rows: " + RealTimeModeSuite.rows("route"))
      info("exception: " + q.exception)
      Thread.sleep(5000)
      info("progress: " + q.recentProgress.map(p => p.batchId + ":" + p.stateOperators.map(_.customMetrics).mkString).mkString(" | "))
    } finally q.stop()
    val offsets = new File(ck, "offsets").listFiles().map(_.getName).sorted
    offsets.foreach { f =>
      val t = scala.io.Source.fromFile(new File(new File(ck, "offsets"), f)).mkString
      info(f + ": " + t.linesIterator.drop(1).next().split(",").filter(_.contains("providerClass")).mkString)
    }
    info("state files: " + new File(ck, "state/0/0").list().sorted.mkString(" "))
  }

  test("Spark's provider: the same queries run in real-time mode (the provider is the only reason)") {
    val expected = Map(
      "aggregation" -> Set(("a", 3L, 5L), ("b", 2L, 4L)),
      "dropDuplicates" -> Set(("a", 1L, 1L), ("b", 1L, 2L), ("a", 1L, 3L))
    )
    for ((name, df) <- queries()) {
      val run = s"builtin-$name"
      val q = start(name, df, Builtin, run)
      try {
        val deadline = System.nanoTime() + 120L * 1000 * 1000 * 1000
        def latest = RealTimeModeSuite
          .rows(run)
          .groupBy(r => (r._1, if (name == "dropDuplicates") r._3 else 0L))
          .map(_._2.last)
          .toSet
        while (latest != expected(name) && System.nanoTime() < deadline && q.exception.isEmpty)
          Thread.sleep(200)
        assert(q.exception.isEmpty, q.exception)
        assert(latest === expected(name), s"$name in real-time mode on $Builtin")
      } finally q.stop()
    }
  }
}

object RealTimeModeSuite {
  private val collected =
    new java.util.concurrent.ConcurrentHashMap[String, ConcurrentLinkedQueue[(String, Long, Long)]]()

  def rows(run: String): Seq[(String, Long, Long)] =
    Option(collected.get(run)).map(_.asScala.toSeq).getOrElse(Nil)

  /** Keeps every row a run's sink receives (local mode: executors share the test's JVM). */
  final class Collect(run: String) extends ForeachWriter[Row] {
    override def open(partitionId: Long, epochId: Long): Boolean = true
    override def process(r: Row): Unit =
      collected
        .computeIfAbsent(run, _ => new ConcurrentLinkedQueue())
        .add((r.getString(0), r.getLong(1), r.getLong(2)))
    override def close(errorOrNull: Throwable): Unit = ()
  }
}

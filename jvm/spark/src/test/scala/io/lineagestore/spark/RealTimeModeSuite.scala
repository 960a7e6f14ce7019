package io.lineagestore.spark

import java.io.File
import java.util.concurrent.ConcurrentLinkedQueue

import scala.jdk.CollectionConverters._

import org.apache.spark.SparkThrowable
import org.apache.spark.sql.{DataFrame, Encoders, ForeachWriter, Row}
import org.apache.spark.sql.execution.streaming.sources.LowLatencyMemoryStream
import org.apache.spark.sql.execution.streaming.state.lineagestore.{
  LineageTransformWithStateExec,
  RealTimeSession
}
import org.apache.spark.sql.functions.{count, lit, sum}
import org.apache.spark.sql.streaming._
import org.scalatest.funsuite.AnyFunSuite

/** Spark 4.3's real-time mode (`Trigger.RealTime`, issue 48) on lineagestore.
  *
  * Spark refuses to start a real-time query whose session sets any state store provider other than its own
  * (`StreamingQueryManager.throwIfConfsAreRealTimeModeIncompatible`, a class-name comparison), but restores
  * the provider a checkpoint's offset log recorded after that check: [[RealTimeQuery]] runs the first batch
  * in micro-batch mode on lineagestore and continues in real-time mode from a session without the key. This
  * suite runs aggregation and dropDuplicates through it against Spark's provider in real-time mode on the
  * same source (with a restart), shows its guards (a plan on Spark's provider stops before opening state; a
  * checkpoint of another provider is refused), and records what refuses transformWithState.
  */
class RealTimeModeSuite extends AnyFunSuite with LocalSparkSession {
  private val Builtin = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
  private val Ours = classOf[LineageStateStoreProvider].getName
  private val ProviderKey = "spark.sql.streaming.stateStore.providerClass"
  private val Batch = "2 seconds"

  protected val appName = "lineagestore-realtime"
  // real-time mode runs a batch's stages at once (pipelined shuffle): the source task and both shuffle
  // partitions need a core each
  override protected val master = "local[4]"
  protected val sessionConf = Seq(
    "spark.sql.streaming.realTimeMode.minBatchDuration" -> "1000",
    "spark.sql.extensions" -> classOf[LineageSessionExtensions].getName
  )

  private val Rows = Seq(("a", 1), ("b", 2), ("a", 3), ("b", 2), ("a", 1))
  private val More = Seq(("a", 10), ("c", 5), ("b", 2))

  private def source() = {
    val s = spark
    import s.implicits._
    val input = LowLatencyMemoryStream[(String, Int)](s)
    input.addData(Rows)
    input
  }

  private def aggregation(in: DataFrame) = in.groupBy("k").agg(count(lit(1)).as("n"), sum("v").as("total"))

  private def dedup(in: DataFrame) = {
    val s = spark
    import s.implicits._
    in.dropDuplicates("k", "v").select($"k", lit(1L).as("n"), $"v".cast("long").as("total"))
  }

  private def sink(run: String): DataStreamWriter[Row] => DataStreamWriter[Row] =
    _.outputMode("update").foreach(new RealTimeModeSuite.Collect(run))

  /** A real-time query on Spark's provider, started as Spark documents it (the session names the provider).
    */
  private def startBuiltin(df: DataFrame, ck: String, run: String): StreamingQuery =
    startBuiltin(df, ck, sink(run))

  private def startBuiltin(
      df: DataFrame,
      ck: String,
      w: DataStreamWriter[Row] => DataStreamWriter[Row]
  ): StreamingQuery = {
    spark.conf.set(ProviderKey, Builtin)
    try w(df.writeStream).option("checkpointLocation", ck).trigger(Trigger.RealTime(Batch)).start()
    finally spark.conf.unset(ProviderKey)
  }

  /** The newest row per key (and per value for dropDuplicates) a run's sink received. */
  private def latest(run: String, byValue: Boolean) =
    RealTimeModeSuite.rows(run).groupBy(r => (r._1, if (byValue) r._3 else 0L)).map(_._2.last).toSet

  /** Waits for `expected` in the sink, then for a real-time batch to commit, and stops the query. Returns the
    * committed batches' progress.
    */
  private def runUntil(
      q: StreamingQuery,
      run: String,
      byValue: Boolean,
      expected: Set[(String, Long, Long)]
  ) =
    try {
      val deadline = System.nanoTime() + 120L * 1000 * 1000 * 1000
      val batches = q.recentProgress.length
      while (
        (latest(run, byValue) != expected || q.recentProgress.length == batches) &&
        System.nanoTime() < deadline && q.exception.isEmpty
      ) Thread.sleep(100)
      assert(q.exception.isEmpty, q.exception)
      assert(latest(run, byValue) === expected, run)
      q.recentProgress.toSeq
    } finally q.stop()

  private def lineagestoreMetrics(progress: Seq[StreamingQueryProgress]) =
    progress
      .flatMap(_.stateOperators)
      .flatMap(_.customMetrics.keySet.asScala)
      .filter(_.startsWith("lineagestore"))

  private def compare(
      name: String,
      build: DataFrame => DataFrame,
      byValue: Boolean,
      expected1: Set[(String, Long, Long)],
      expected2: Set[(String, Long, Long)]
  ): Unit = {
    val input = source() // one source for both providers: each query reads it from its own checkpoint
    val df = build(input.toDF().toDF("k", "v"))
    val (ls, rocks) = (s"ls-$name", s"rocks-$name")
    val (lsCk, rocksCk) = (new File(tmp, ls).getAbsolutePath, new File(tmp, rocks).getAbsolutePath)

    val first = runUntil(RealTimeQuery.start(df, lsCk, Batch)(sink(ls)), ls, byValue, expected1)
    runUntil(startBuiltin(df, rocksCk, rocks), rocks, byValue, expected1)
    assert(latest(ls, byValue) === latest(rocks, byValue))
    assert(lineagestoreMetrics(first).nonEmpty, s"$name's real-time batches ran on lineagestore")
    assert(!spark.conf.getAll.contains(ProviderKey), "the helper changed the caller's session")

    input.addData(More)
    val restarted = runUntil(RealTimeQuery.start(df, lsCk, Batch)(sink(ls)), ls, byValue, expected2)
    runUntil(startBuiltin(df, rocksCk, rocks), rocks, byValue, expected2)
    assert(latest(ls, byValue) === latest(rocks, byValue), s"$name: lineagestore against Spark's provider")
    assert(lineagestoreMetrics(restarted).nonEmpty, s"$name after the restart ran on lineagestore")
    RealTimeSession.recordedProvider(spark, lsCk).foreach { case (_, p) => assert(p === Some(Ours)) }
    RealTimeSession.recordedProvider(spark, rocksCk).foreach { case (_, p) => assert(p === Some(Builtin)) }
  }

  test("lineagestore: Spark refuses real-time mode when the session names lineagestore, for both operators") {
    val input = source()
    for (
      (name, df) <- Seq(
        "aggregation" -> aggregation(input.toDF().toDF("k", "v")),
        "dropDuplicates" -> dedup(input.toDF().toDF("k", "v"))
      )
    ) {
      spark.conf.set(ProviderKey, Ours)
      val e =
        try
          intercept[IllegalArgumentException](
            sink("refused")(df.writeStream)
              .option("checkpointLocation", new File(tmp, s"refused-$name").getAbsolutePath)
              .trigger(Trigger.RealTime(Batch))
              .start()
          )
        finally spark.conf.unset(ProviderKey)
      assert(
        e.asInstanceOf[SparkThrowable]
          .getCondition === "STREAMING_REAL_TIME_MODE.SQL_CONFIGURATION_NOT_SUPPORTED",
        name
      )
      assert(e.getMessage.contains(ProviderKey) && e.getMessage.contains(Builtin), e.getMessage)
      assert(RealTimeModeSuite.rows("refused").isEmpty, "the refused query ran")
    }
  }

  test("aggregation in real-time mode through RealTimeQuery: as on Spark's provider, with a restart") {
    compare(
      "aggregation",
      aggregation,
      byValue = false,
      Set(("a", 3L, 5L), ("b", 2L, 4L)),
      Set(("a", 4L, 15L), ("b", 3L, 6L), ("c", 1L, 5L))
    )
  }

  test("dropDuplicates in real-time mode through RealTimeQuery: as on Spark's provider, with a restart") {
    val once = Set(("a", 1L, 1L), ("b", 1L, 2L), ("a", 1L, 3L))
    compare("dropDuplicates", dedup, byValue = true, once, once ++ Set(("a", 1L, 10L), ("c", 1L, 5L)))
  }

  test("a failed task fails the real-time batch; restarted through the helper, as on Spark's provider") {
    val input = source()
    val df = aggregation(input.toDF().toDF("k", "v"))
    val runs = Seq(
      "ls-kill" -> ((ck: String, w: DataStreamWriter[Row] => DataStreamWriter[Row]) =>
        RealTimeQuery.start(df, ck, Batch)(w)
      ),
      "rocks-kill" -> ((ck: String, w: DataStreamWriter[Row] => DataStreamWriter[Row]) =>
        startBuiltin(df, ck, w)
      )
    )
    val ck = runs.map { case (run, _) => run -> new File(tmp, run).getAbsolutePath }.toMap
    for ((run, begin) <- runs)
      runUntil(begin(ck(run), sink(run)), run, byValue = false, Set(("a", 3L, 5L), ("b", 2L, 4L)))
    input.addData(Seq(("c", 5), ("a", 1)))
    // the sink's task throws on its first row of key c (local mode: no task retries, the batch fails)
    for ((run, begin) <- runs) {
      val q = begin(ck(run), _.outputMode("update").foreach(new RealTimeModeSuite.FailOnce(run, "c")))
      val e = intercept[StreamingQueryException](q.awaitTermination(120000))
      assert(e.getMessage.contains(RealTimeModeSuite.Injected), e)
    }
    val expected = Set(("a", 4L, 6L), ("b", 2L, 4L), ("c", 1L, 5L))
    for ((run, begin) <- runs) runUntil(begin(ck(run), sink(run)), run, byValue = false, expected)
    assert(latest("ls-kill", byValue = false) === latest("rocks-kill", byValue = false))
  }

  test("an empty source: the first batch still records lineagestore; real-time batches then run on it") {
    val s = spark
    import s.implicits._
    val empty = LowLatencyMemoryStream[(String, Int)](s)
    val df = aggregation(empty.toDF().toDF("k", "v"))
    val ck = new File(tmp, "empty").getAbsolutePath
    // Spark's test source reports an offset when empty, so AvailableNow commits an empty batch 0 (a source
    // whose first offset never moves is tried again every second until firstBatchTimeoutMs)
    val q = RealTimeQuery.start(df, ck, Batch, firstBatchTimeoutMs = 60000)(sink("empty"))
    assert(RealTimeSession.recordedProvider(spark, ck).flatMap(_._2).contains(Ours))
    empty.addData(Rows)
    assert(
      lineagestoreMetrics(runUntil(q, "empty", byValue = false, Set(("a", 3L, 5L), ("b", 2L, 4L)))).nonEmpty
    )
  }

  /** Waits (up to two minutes) until `done`, failing on the query's error or the timeout, naming `what`. */
  private def await(q: StreamingQuery, what: String)(done: => Boolean): Unit = {
    val deadline = System.nanoTime() + 120L * 1000 * 1000 * 1000
    while (!done && q.exception.isEmpty && System.nanoTime() < deadline) Thread.sleep(100)
    assert(q.exception.isEmpty, q.exception)
    assert(done, what)
  }

  /** The state the statestore reader finds at `batchId` (key and value rows, Spark's state schema). */
  private def stateAt(ck: String, batchId: Long) =
    spark.read
      .format("statestore")
      .option("batchId", batchId)
      .load(ck)
      .select("key", "value")
      .collect()
      .map(r => (r.getStruct(0).toSeq, r.getStruct(1).toSeq))
      .toSet

  test(
    "a source without records: real-time batches end on their time bound and commit, as on Spark's provider"
  ) {
    val s = spark
    import s.implicits._
    val idleBatch = "1 second"
    val third = Seq(("d", 4), ("a", 2))
    val expected = Seq(
      Set(("a", 3L, 5L), ("b", 2L, 4L)),
      Set(("a", 4L, 15L), ("b", 3L, 6L), ("c", 1L, 5L)),
      Set(("a", 5L, 17L), ("b", 3L, 6L), ("c", 1L, 5L), ("d", 1L, 4L))
    )
    val runs = Seq("ls-idle", "rocks-idle")
    val ck = runs.map(r => r -> new File(tmp, r).getAbsolutePath).toMap
    def begin(run: String, df: DataFrame): StreamingQuery =
      if (run == "ls-idle") RealTimeQuery.start(df, ck(run), idleBatch)(sink(run))
      else {
        spark.conf.set(ProviderKey, Builtin)
        try
          sink(run)(df.writeStream)
            .option("checkpointLocation", ck(run))
            .trigger(Trigger.RealTime(idleBatch))
            .start()
        finally spark.conf.unset(ProviderKey)
      }
    // per provider: its idle batches' progress and the batch before them (the last one with records)
    val idle = runs.map { run =>
      val input =
        LowLatencyMemoryStream[(String, Int)](s) // one source each: the same records, the same pauses
      val df = aggregation(input.toDF().toDF("k", "v"))
      input.addData(Rows)
      val q = begin(run, df)
      val (before, empty) =
        try {
          await(q, s"$run: the first records")(latest(run, byValue = false) == expected(0))
          val seen = q.recentProgress.map(_.batchId).maxOption.getOrElse(-1L)
          // no records for at least two batch durations: two real-time batches end without input
          def quiet = q.recentProgress.filter(p => p.batchId > seen && p.numInputRows == 0)
          await(q, s"$run: two batches without records")(quiet.length >= 2)
          val empty = quiet.toSeq.sortBy(_.batchId)
          assert(empty.map(_.batchId) === (empty.head.batchId to empty.last.batchId), s"$run: one pause")
          input.addData(More)
          await(q, s"$run: the records after the pause")(latest(run, byValue = false) == expected(1))
          (empty.head.batchId - 1, empty)
        } finally q.stop()
      for (p <- empty) {
        // the batch ran its whole duration (it ends on its time bound, not on input), the store committed
        // without a change and kept both keys
        assert(p.durationMs.get("triggerExecution") >= 1000L, s"$run batch ${p.batchId}: ${p.json}")
        assert(p.stateOperators.map(o => (o.numRowsUpdated, o.numRowsTotal)).toSeq === Seq((0L, 2L)), p.json)
        assert(RealTimeSession.committedBatch(spark, ck(run)).exists(_ >= p.batchId), s"$run ${p.batchId}")
      }
      // a restart after the idle batches, with more records
      input.addData(third)
      val again = begin(run, df)
      try await(again, s"$run: after the restart")(latest(run, byValue = false) == expected(2))
      finally again.stop()
      run -> (before, empty)
    }.toMap
    assert(latest("ls-idle", byValue = false) === latest("rocks-idle", byValue = false))
    assert(lineagestoreMetrics(idle("ls-idle")._2).nonEmpty, "the idle batches ran on lineagestore")
    // each idle batch's store version holds the state of the batch before the pause, on both providers
    val atPause = stateAt(ck("rocks-idle"), idle("rocks-idle")._1)
    assert(atPause.size === 2)
    for ((run, (before, empty)) <- idle) {
      assert(stateAt(ck(run), before) === atPause, run)
      for (p <- empty) assert(stateAt(ck(run), p.batchId) === atPause, s"$run batch ${p.batchId}")
    }
  }

  test("guards: a plan on Spark's provider stops before opening state; Spark's checkpoints are refused") {
    val input = source()
    val df = aggregation(input.toDF().toDF("k", "v"))
    val ck = new File(tmp, "guard").getAbsolutePath
    // what the helper never does: real-time mode on a checkpoint without a batch, so Spark picks its provider
    val start = new RealTimeStart(df, ck)
    val q = sink("guard")(start.dataFrame.writeStream)
      .option("checkpointLocation", ck)
      .trigger(Trigger.RealTime(Batch))
      .start()
    val e = intercept[StreamingQueryException](q.awaitTermination(60000))
    assert(e.getCause.isInstanceOf[RealTimeRouteException], e)
    assert(e.getMessage.contains(s"$ProviderKey=$Builtin"), e.getMessage)
    // Spark's planner writes the operator's schema (state/0/_metadata, the same for every provider); no store
    // was opened, so no file of any provider is there
    val stores =
      RealTimeModeSuite.filesUnder(new File(ck, "state")).filterNot(_.getPath.contains("/_metadata/"))
    assert(stores.isEmpty, "a store was opened")
    assert(RealTimeModeSuite.rows("guard").isEmpty)

    // a real-time batch stopped at planning leaves no offset-log entry: nothing records a provider, and Spark refuses to
    // begin the checkpoint again (its planner wrote the operator's schema), on any provider
    assert(RealTimeSession.recordedProvider(spark, ck).isEmpty)
    val again = intercept[StreamingQueryException](RealTimeQuery.start(df, ck, Batch)(sink("guard")))
    assert(
      again.getCause.asInstanceOf[SparkThrowable].getCondition === "STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY"
    )

    // a checkpoint whose offset log records Spark's provider: the helper refuses it, naming file and provider
    val theirs = new File(tmp, "guard-rocks").getAbsolutePath
    spark.conf.set(ProviderKey, Builtin)
    try
      sink("guard-rocks")(df.writeStream)
        .option("checkpointLocation", theirs)
        .trigger(Trigger.AvailableNow())
        .start()
        .awaitTermination()
    finally spark.conf.unset(ProviderKey)
    val refused =
      intercept[RealTimeRouteException](RealTimeQuery.start(df, theirs, Batch)(sink("guard-rocks")))
    assert(refused.getMessage.contains(s"offsets/0) records $ProviderKey=$Builtin"), refused.getMessage)
    assert(refused.getMessage.contains("lineagestore migrate"), refused.getMessage)
  }

  test("transformWithState: real-time mode's allowlist refuses lineagestore's node by class name") {
    val s = spark
    import s.implicits._
    val input = source()
    val counted = input
      .toDS()
      .groupByKey(_._1)
      .transformWithState(new RealTimeModeSuite.CountPerKey, TimeMode.None(), OutputMode.Update())
      .toDF("k", "n", "total")
    val ck = new File(tmp, "tws").getAbsolutePath
    val q = RealTimeQuery.start(counted, ck, Batch)(sink("tws"))
    val e = intercept[StreamingQueryException](q.awaitTermination(60000))
    // the first batch ran in micro-batch mode on lineagestore (the extension's node passes Spark's provider
    // check); real-time mode's allowlist (RealTimeModeAllowlist) names Spark's TransformWithStateExec by class
    assert(RealTimeSession.committedBatch(spark, ck).contains(0L))
    assert(latest("tws", byValue = false) === Set(("a", 3L, 5L), ("b", 2L, 4L)))
    assert(
      e.getCause.asInstanceOf[SparkThrowable].getCondition ===
        "STREAMING_REAL_TIME_MODE.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST",
      e
    )
    assert(e.getMessage.contains(classOf[LineageTransformWithStateExec].getName), e.getMessage)

    // with Spark's check off ("at your own risk", not supported by Spark for this node): it runs, as Spark's
    // provider runs Spark's node in real-time mode on the same source
    input.addData(More)
    val expected = Set(("a", 4L, 15L), ("b", 3L, 6L), ("c", 1L, 5L))
    spark.conf.set("spark.sql.streaming.realTimeMode.allowlistCheck", "false")
    val unchecked =
      try RealTimeQuery.start(counted, ck, Batch)(sink("tws"))
      finally spark.conf.unset("spark.sql.streaming.realTimeMode.allowlistCheck")
    assert(lineagestoreMetrics(runUntil(unchecked, "tws", byValue = false, expected)).nonEmpty)
    runUntil(
      startBuiltin(counted, new File(tmp, "tws-rocks").getAbsolutePath, "tws-rocks"),
      "tws-rocks",
      false,
      expected
    )
  }
}

object RealTimeModeSuite {
  private val collected =
    new java.util.concurrent.ConcurrentHashMap[String, ConcurrentLinkedQueue[(String, Long, Long)]]()

  def filesUnder(f: File): Seq[File] =
    if (f.isDirectory) Option(f.listFiles()).toSeq.flatten.flatMap(filesUnder)
    else if (f.exists()) Seq(f)
    else Nil

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

  val Injected = "lineagestore test: the sink's task fails here"
  private val failed = java.util.concurrent.ConcurrentHashMap.newKeySet[String]()

  /** Throws on the first row of `key` a run's sink sees, once per run. */
  final class FailOnce(run: String, key: String) extends ForeachWriter[Row] {
    override def open(partitionId: Long, epochId: Long): Boolean = true
    override def process(r: Row): Unit =
      if (r.getString(0) == key && failed.add(run)) throw new IllegalStateException(Injected)
    override def close(errorOrNull: Throwable): Unit = ()
  }

  /** Per key: the count and sum of its values (one ValueState). */
  final class CountPerKey extends StatefulProcessor[String, (String, Int), (String, Long, Long)] {
    @transient private var acc: ValueState[(Long, Long)] = _
    override def init(outputMode: OutputMode, timeMode: TimeMode): Unit =
      acc =
        getHandle.getValueState("acc", Encoders.tuple(Encoders.scalaLong, Encoders.scalaLong), TTLConfig.NONE)
    override def handleInputRows(
        key: String,
        rows: Iterator[(String, Int)],
        timerValues: TimerValues
    ): Iterator[(String, Long, Long)] = {
      val (n, total) = rows.foldLeft(if (acc.exists()) acc.get() else (0L, 0L)) { case ((n, t), (_, v)) =>
        (n + 1, t + v)
      }
      acc.update((n, total))
      Iterator((key, n, total))
    }
  }
}

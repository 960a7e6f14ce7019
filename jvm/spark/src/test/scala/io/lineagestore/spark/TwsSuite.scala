package io.lineagestore.spark

import java.io.File
import java.sql.Timestamp

import scala.collection.mutable

import org.apache.spark.sql.{Dataset, Encoders}
import org.apache.spark.sql.execution.streaming.runtime.{MemoryStream, StreamingQueryWrapper}
import org.apache.spark.sql.execution.streaming.state.lineagestore.{LineageTransformWithStateExec, LineageTws}
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.streaming._
import org.scalatest.funsuite.AnyFunSuite

/** Per key: ValueState count, ListState of values, MapState parity -> n, and one event-time timer at (max
  * event time + 20 s) that reports and clears the key. (TTL needs ProcessingTime mode: the Python tests.)
  */
class CountListMapTimer extends StatefulProcessor[String, (String, Timestamp, Int), TwsOut] {
  @transient private var count: ValueState[Long] = _
  @transient private var maxT: ValueState[Long] = _
  @transient private var values: ListState[Int] = _
  @transient private var parity: MapState[String, Long] = _

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    val h = getHandle
    count = h.getValueState("count", Encoders.scalaLong, TTLConfig.NONE)
    maxT = h.getValueState("max_t", Encoders.scalaLong, TTLConfig.NONE)
    values = h.getListState("values", Encoders.scalaInt, TTLConfig.NONE)
    parity = h.getMapState("parity", Encoders.STRING, Encoders.scalaLong, TTLConfig.NONE)
  }

  private def snapshot(key: String, kind: String): TwsOut = {
    val vs = values.get().toSeq
    val p = parity.iterator().toSeq.sorted.map { case (k, n) => s"$k=$n" }.mkString(",")
    TwsOut(key, kind, count.get(), vs.size.toLong, vs.map(_.toLong).sum, p)
  }

  override def handleInputRows(
      key: String,
      rows: Iterator[(String, Timestamp, Int)],
      timerValues: TimerValues
  ): Iterator[TwsOut] = {
    var c = if (count.exists()) count.get() else 0L
    var m = if (maxT.exists()) maxT.get() else Long.MinValue
    rows.foreach { case (_, t, v) =>
      c += 1
      m = math.max(m, t.getTime)
      values.appendValue(v)
      val p = if (v % 2 == 0) "even" else "odd"
      parity.updateValue(p, (if (parity.containsKey(p)) parity.getValue(p) else 0L) + 1)
    }
    count.update(c)
    maxT.update(m)
    getHandle.listTimers().toList.foreach(getHandle.deleteTimer)
    getHandle.registerTimer(
      m + 20000L
    ) // a key is reported and cleared 20 s of event time after its last event
    Iterator(snapshot(key, "data"))
  }

  override def handleExpiredTimer(
      key: String,
      timerValues: TimerValues,
      expiredTimerInfo: ExpiredTimerInfo
  ): Iterator[TwsOut] = {
    val out = snapshot(key, "timer")
    count.clear(); maxT.clear(); values.clear(); parity.clear()
    Iterator(out)
  }
}

case class TwsOut(k: String, kind: String, count: Long, nValues: Long, sumValues: Long, parity: String)

object TwsSink {
  val rows: mutable.Map[(String, Long), Set[TwsOut]] = mutable.Map.empty
  def record(name: String, batchId: Long, out: Seq[TwsOut]): Unit = rows.synchronized {
    rows((name, batchId)) = out.toSet
  }
  def of(name: String): Seq[(Long, Set[TwsOut])] = rows.synchronized {
    rows.toSeq.filter(_._1._1 == name).map { case ((_, b), r) => (b, r) }.sortBy(_._1)
  }
}

/** Scala transformWithState on lineagestore through [[LineageSessionExtensions]]: the same input on
  * lineagestore and on Spark's own RocksDB provider in one session, restarted between batches, must give the
  * same output batch by batch; plus the session-start shape check.
  */
class TwsSuite extends AnyFunSuite with LocalSparkSession {
  private val Builtin = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

  protected val appName = "lineagestore-tws"
  protected val sessionConf = Seq(
    "spark.sql.extensions" -> classOf[LineageSessionExtensions].getName,
    "spark.sql.streaming.stateStore.minDeltasForSnapshot" -> "2"
  )

  test("the shape check passes on the Spark it was built for and names both versions on a mismatch") {
    TwsShape.checkRunningSpark()
    // the shim names the provider by string (it does not depend on the glue); it must be the real one
    assert(LineageTws.ProviderClassName === classOf[LineageStateStoreProvider].getName)
    val actual = TwsShape.Expected.toMap.map { case (what, params) => what -> Seq(params) }
    TwsShape.check(actual, "4.3.0")
    val (node, params) = TwsShape.Expected.head
    val changed = actual.updated(node, Seq(params :+ "boolean")) // as if Spark 4.4 added a parameter
    val e = intercept[TwsShapeMismatchException](TwsShape.check(changed, "4.4.0"))
    assert(e.getMessage.contains("built for Spark 4.3.0"), e.getMessage)
    assert(e.getMessage.contains("this is Spark 4.4.0"), e.getMessage)
    assert(e.getMessage.contains(node), e.getMessage)
    assert(
      e.getMessage.contains("remove io.lineagestore.spark.LineageSessionExtensions from spark.sql.extensions")
    )
    val gone = intercept[TwsShapeMismatchException](TwsShape.check(actual - node, "5.0.0"))
    assert(gone.getMessage.contains(s"$node does not exist"), gone.getMessage)
  }

  /** Events (key, event second, value); each inner Seq is one batch, each group of batches one query run. */
  private val runs: Seq[Seq[Seq[(String, Long, Int)]]] = Seq(
    Seq(Seq(("a", 1000, 1), ("b", 1002, 2), ("a", 1005, 4))),
    Seq(Seq(("c", 1010, 3), ("a", 1012, 7)), Seq(("b", 1030, 6), ("c", 1040, 9))),
    Seq(Seq(("d", 1061, 8), ("c", 1063, 5)), Seq(("a", 1100, 2)))
  )

  private def runOn(name: String, provider: String): (Seq[(Long, Set[TwsOut])], Seq[String]) = {
    val session = spark
    import session.implicits._
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", provider)
    val checkpoint = new File(tmp, name).getAbsolutePath
    val input = MemoryStream[(String, Long, Int)](session)
    val plans = mutable.ArrayBuffer.empty[String]
    try {
      runs.foreach { batches =>
        val write: (Dataset[TwsOut], Long) => Unit = (ds, id) => TwsSink.record(name, id, ds.collect().toSeq)
        val q = input
          .toDS()
          .select(col("_1"), col("_2").cast("timestamp"), col("_3"))
          .as[(String, Timestamp, Int)]
          .withWatermark("_2", "10 seconds")
          .groupByKey(_._1)
          .transformWithState(new CountListMapTimer, TimeMode.EventTime(), OutputMode.Update())
          .writeStream
          .option("checkpointLocation", checkpoint)
          .outputMode(OutputMode.Update())
          .foreachBatch(write)
          .start()
        try {
          batches.foreach { b => input.addData(b); q.processAllAvailable() }
          plans += q.asInstanceOf[StreamingQueryWrapper].streamingQuery.lastExecution.executedPlan.toString
        } finally q.stop()
        q.exception.foreach(e => fail(s"$name on $provider failed", e))
      }
    } finally spark.conf.unset("spark.sql.streaming.stateStore.providerClass")
    (TwsSink.of(name), plans.toSeq)
  }

  test("transformWithState (value, list, map, event-time timers) restarted: same as Spark's provider") {
    val (ours, ourPlans) = runOn("tws-lineage", classOf[LineageStateStoreProvider].getName)
    val (theirs, theirPlans) = runOn("tws-builtin", Builtin)
    assert(ours === theirs)
    val all = ours.flatMap(_._2)
    assert(all.exists(_.kind == "timer"), s"no timer fired: $ours")
    // the model: a key's running count is the number of its events since its last timer
    assert(all.filter(r => r.k == "a" && r.kind == "data").map(_.count).toSet === Set(2L, 3L, 1L))
    // the node's name in a plan is its class name less "Exec"
    val ourNode = classOf[LineageTransformWithStateExec].getSimpleName.stripSuffix("Exec")
    assert(ourPlans.size == runs.size && ourPlans.forall(_.contains(ourNode)), ourPlans)
    assert(theirPlans.size == runs.size && theirPlans.forall(!_.contains(ourNode)), theirPlans)
    val deltas =
      LocalSparkSession
        .walk(new File(tmp, "tws-lineage/state"))
        .filter(_.getName.matches("""\d+_[A-Za-z0-9-]+\.delta"""))
    assert(deltas.nonEmpty, "state was not written by lineagestore")
  }
}

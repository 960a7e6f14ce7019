package io.lineagestore.spark

import java.io.File

import io.lineagestore.config.{InvalidConfigException, LineageConf}
import org.apache.spark.sql.execution.streaming.runtime.MemoryStream
import org.apache.spark.sql.streaming.{OutputMode, StreamingQueryException}
import org.scalatest.funsuite.AnyFunSuite

/** The session extension checks the lineagestore keys on the driver when a stateful query is planned: a
  * misspelt key set after the session started (as `spark.conf.set`, or `--conf` of spark-submit) fails the
  * query before its first batch runs a task, naming the key and the nearest known one.
  */
class DriverConfCheckSuite extends AnyFunSuite with LocalSparkSession {
  protected val appName = "lineagestore-driver-conf-check"
  protected val sessionConf = Seq(
    "spark.sql.extensions" -> classOf[LineageSessionExtensions].getName,
    "spark.sql.streaming.stateStore.providerClass" -> classOf[LineageStateStoreProvider].getName
  )

  /** Runs a streaming count over one batch with `conf` set; the query's exception, if it failed. */
  private def countWith(name: String, conf: (String, String)): (Option[Throwable], File) = {
    val session = spark
    import session.implicits._
    val checkpoint = new File(tmp, name)
    val input = MemoryStream[Int](session)
    spark.conf.set(conf._1, conf._2)
    try {
      val q = input
        .toDF()
        .groupBy("value")
        .count()
        .writeStream
        .format("memory")
        .queryName(name)
        .option("checkpointLocation", checkpoint.getAbsolutePath)
        .outputMode(OutputMode.Complete())
        .start()
      try {
        input.addData(1, 2, 2)
        try q.processAllAvailable()
        catch { case _: StreamingQueryException => () }
      } finally q.stop()
      (q.exception.map(_.getCause), checkpoint)
    } finally spark.conf.unset(conf._1)
  }

  test("a misspelt key fails the query on the driver at its first planning, with the nearest key") {
    val typo = LineageConf.Prefix + "maxPendingByte"
    val (error, checkpoint) = countWith("typo", typo -> "256m")
    // thrown by the driver's planning itself: a task's failure would arrive wrapped in a SparkException
    val e = error.getOrElse(fail("the query ran with a misspelt lineagestore key"))
    assert(e.isInstanceOf[InvalidConfigException], e)
    assert(e.getMessage.contains(s"unknown configuration key $typo."), e.getMessage)
    assert(e.getMessage.contains(s"Did you mean ${LineageConf.MaxPendingBytes.key}?"), e.getMessage)
    assert(!new File(checkpoint, "commits/0").exists(), "no batch committed")
  }

  test("Spark's byte forms are accepted on the driver and by the stores") {
    val (error, checkpoint) = countWith("bytes", LineageConf.MaxPendingBytes.key -> "256mb")
    error.foreach(e => fail("256mb was refused", e))
    assert(new File(checkpoint, "commits/0").exists())
    assert(
      spark.table("bytes").collect().map(r => r.getInt(0) -> r.getLong(1)).toMap == Map(1 -> 1L, 2 -> 2L)
    )
  }
}

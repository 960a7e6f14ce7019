package io.lineagestore.spark

import java.io.File

import scala.collection.mutable
import scala.util.Random

import org.apache.spark.sql.Dataset
import org.apache.spark.sql.execution.streaming.runtime.MemoryStream
import org.apache.spark.sql.streaming.{GroupState, GroupStateTimeout, OutputMode, StreamingQuery}
import org.scalatest.funsuite.AnyFunSuite

/** The state functions and the sink, outside the suite so Spark's closures capture nothing else. */
object GroupStateFunctions {

  /** Running (count, sum) per key; the state is dropped once a key has seen 4 or more values. Emits (key,
    * count, sum, dropped).
    */
  def countAndSum(
      key: String,
      values: Iterator[(String, Int)],
      state: GroupState[(Long, Long)]
  ): Iterator[(String, Long, Long, Boolean)] = {
    val (c0, s0) = state.getOption.getOrElse((0L, 0L))
    val vs = values.map(_._2.toLong).toSeq
    val next = (c0 + vs.size, s0 + vs.sum)
    if (next._1 >= 4) { state.remove(); Iterator((key, next._1, next._2, true)) }
    else { state.update(next); Iterator((key, next._1, next._2, false)) }
  }

  /** Running (count, max) per key; a value of 0 resets the key's state. Emits (key, count, max). */
  def countAndMax(
      key: String,
      values: Iterator[(String, Int)],
      state: GroupState[(Long, Int)]
  ): (String, Long, Int) = {
    val vs = values.map(_._2).toSeq
    if (vs.contains(0)) { state.remove(); (key, -1L, 0) }
    else {
      val (c0, m0) = state.getOption.getOrElse((0L, Int.MinValue))
      val next = (c0 + vs.size, math.max(m0, vs.max))
      state.update(next)
      (key, next._1, next._2)
    }
  }

  /** Rows each micro-batch wrote, by query name and batch id (a replayed batch overwrites its entry). */
  val sink: mutable.Map[(String, Long), Seq[Any]] = mutable.Map.empty
  def record(name: String, batchId: Long, rows: Seq[Any]): Unit =
    sink.synchronized(sink((name, batchId)) = rows)
  def outputs(name: String): Seq[Set[Any]] = sink.synchronized {
    sink.toSeq.filter(_._1._1 == name).sortBy(_._1._2).map(_._2.toSet)
  }
}

/** flatMapGroupsWithState and mapGroupsWithState on lineagestore, the query stopped and restarted on the same
  * checkpoint between batches (a new query run each time: new providers that load from the checkpoint files),
  * outputs compared with a plain Scala model of the same functions.
  */
class FlatMapGroupsWithStateSuite extends AnyFunSuite with LocalSparkSession {
  import GroupStateFunctions._

  protected val appName = "lineagestore-fmgws"
  protected val sessionConf = Seq(
    "spark.sql.streaming.stateStore.providerClass" -> classOf[LineageStateStoreProvider].getName,
    "spark.sql.streaming.stateStore.minDeltasForSnapshot" -> "2",
    "spark.sql.streaming.minBatchesToRetain" -> "3",
    "spark.sql.streaming.stateStore.maintenanceInterval" -> "200ms",
    "spark.sql.streaming.noDataMicroBatches.enabled" -> "false"
  )

  /** Batches of (key, value) events; keys repeat within and across batches. */
  private def batches(seed: Int, n: Int): Seq[Seq[(String, Int)]] = {
    val rnd = new Random(seed)
    Seq.fill(n)(Seq.fill(5 + rnd.nextInt(10))((s"user${rnd.nextInt(8)}", rnd.nextInt(7))))
  }

  /** Runs `batches` through a query restarted before each group of `runs`; returns nothing, fills the sink.
    */
  private def runRestarting(
      name: String,
      checkpoint: File,
      input: MemoryStream[(String, Int)],
      start: String => StreamingQuery,
      runs: Seq[Seq[Seq[(String, Int)]]]
  ): Unit = runs.foreach { run =>
    val q = start(checkpoint.getAbsolutePath)
    try {
      run.foreach { b =>
        input.addData(b)
        q.processAllAvailable()
      }
    } finally q.stop()
    q.exception.foreach(e => fail(s"$name failed", e))
  }

  /** Groups of batches per run: 1, 2, 1, 3, 1, 2 ... */
  private def split[T](all: Seq[T]): Seq[Seq[T]] = {
    val sizes = Iterator.continually(Seq(1, 2, 1, 3)).flatten
    val out = mutable.ArrayBuffer.empty[Seq[T]]
    var rest = all
    while (rest.nonEmpty) { val k = sizes.next(); out += rest.take(k); rest = rest.drop(k) }
    out.toSeq
  }

  private def lineagestoreFiles(checkpoint: File): Seq[String] = {
    def walk(f: File): Seq[File] =
      Option(f.listFiles())
        .getOrElse(Array.empty[File])
        .toSeq
        .flatMap(c => if (c.isDirectory) walk(c) else Seq(c))
    walk(new File(checkpoint, "state")).map(_.getName).filter(_.matches("""\d+_[A-Za-z0-9-]+\.(delta|zip)"""))
  }

  test("flatMapGroupsWithState restarted between batches matches the model") {
    val session = spark
    import session.implicits._
    val name = "fmgws"
    val checkpoint = new File(tmp, name)
    val input = MemoryStream[(String, Int)](session)
    val all = batches(seed = 42, n = 8)

    val start: String => StreamingQuery = { cp =>
      val write: (Dataset[(String, Long, Long, Boolean)], Long) => Unit =
        (ds, id) => record(name, id, ds.collect().toSeq)
      input
        .toDS()
        .groupByKey(_._1)
        .flatMapGroupsWithState(OutputMode.Update(), GroupStateTimeout.NoTimeout())(countAndSum)
        .writeStream
        .option("checkpointLocation", cp)
        .outputMode(OutputMode.Update())
        .foreachBatch(write)
        .start()
    }
    runRestarting(name, checkpoint, input, start, split(all))

    var model = Map.empty[String, (Long, Long)]
    val expected = all.map { b =>
      b.groupBy(_._1)
        .map { case (k, rows) =>
          val (c0, s0) = model.getOrElse(k, (0L, 0L))
          val next = (c0 + rows.size, s0 + rows.map(_._2.toLong).sum)
          if (next._1 >= 4) { model -= k; (k, next._1, next._2, true) }
          else { model += k -> next; (k, next._1, next._2, false) }
        }
        .toSet[Any]
    }
    assert(outputs(name) === expected)
    assert(
      lineagestoreFiles(checkpoint).exists(_.endsWith(".delta")),
      "state was not written by lineagestore"
    )
  }

  test("mapGroupsWithState restarted between batches matches the model") {
    val session = spark
    import session.implicits._
    val name = "mgws"
    val checkpoint = new File(tmp, name)
    val input = MemoryStream[(String, Int)](session)
    val all = batches(seed = 7, n = 6)

    val start: String => StreamingQuery = { cp =>
      val write: (Dataset[(String, Long, Int)], Long) => Unit =
        (ds, id) => record(name, id, ds.collect().toSeq)
      input
        .toDS()
        .groupByKey(_._1)
        .mapGroupsWithState(GroupStateTimeout.NoTimeout())(countAndMax)
        .writeStream
        .option("checkpointLocation", cp)
        .outputMode(OutputMode.Update())
        .foreachBatch(write)
        .start()
    }
    runRestarting(name, checkpoint, input, start, split(all))

    var model = Map.empty[String, (Long, Int)]
    val expected = all.map { b =>
      b.groupBy(_._1)
        .map { case (k, rows) =>
          val vs = rows.map(_._2)
          if (vs.contains(0)) { model -= k; (k, -1L, 0) }
          else {
            val (c0, m0) = model.getOrElse(k, (0L, Int.MinValue))
            val next = (c0 + vs.size, math.max(m0, vs.max))
            model += k -> next
            (k, next._1, next._2)
          }
        }
        .toSet[Any]
    }
    assert(outputs(name) === expected)
    assert(
      lineagestoreFiles(checkpoint).exists(_.endsWith(".delta")),
      "state was not written by lineagestore"
    )
  }
}

package io.lineagestore.spark

import java.io.File
import java.nio.file.Files

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.execution.streaming.state.StateStore
import org.scalatest.{BeforeAndAfterAll, Suite}

/** One local SparkSession for a suite's queries: checkpoint format version 2, two shuffle partitions, no UI,
  * lineagestore's local directory under a temporary directory of the suite's own ([[tmp]]). Spark's state
  * stores are stopped before the session (their maintenance thread needs SparkEnv), then the directory is
  * removed.
  */
trait LocalSparkSession extends BeforeAndAfterAll { this: Suite =>

  /** The application's name, also the temporary directory's prefix. */
  protected def appName: String

  protected def master: String = "local[2]"

  /** The suite's settings beside the common ones (the provider class, snapshot cadence, ...). */
  protected def sessionConf: Seq[(String, String)]

  protected var tmp: File = _
  protected var spark: SparkSession = _

  override def beforeAll(): Unit = {
    super.beforeAll()
    tmp = Files.createTempDirectory(appName).toFile
    val builder = SparkSession
      .builder()
      .master(master)
      .appName(appName)
      .config("spark.ui.enabled", "false")
      .config("spark.sql.shuffle.partitions", "2")
      .config("spark.sql.streaming.stateStore.checkpointFormatVersion", "2")
      .config("spark.sql.streaming.stateStore.lineagestore.localDir", new File(tmp, "local").getAbsolutePath)
    sessionConf.foreach { case (k, v) => builder.config(k, v) }
    spark = builder.getOrCreate()
  }

  override def afterAll(): Unit = {
    try {
      StateStore.stop()
      if (spark != null) spark.stop()
    } finally {
      LocalSparkSession.deleteRecursively(tmp)
      super.afterAll()
    }
  }
}

object LocalSparkSession {

  /** Every file under `f` (none if it does not exist). */
  def walk(f: File): Seq[File] =
    Option(f.listFiles())
      .getOrElse(Array.empty[File])
      .toSeq
      .flatMap(c => if (c.isDirectory) walk(c) else Seq(c))

  def deleteRecursively(f: File): Unit = if (f != null) {
    if (f.isDirectory) Option(f.listFiles()).getOrElse(Array.empty[File]).foreach(deleteRecursively)
    f.delete()
  }
}

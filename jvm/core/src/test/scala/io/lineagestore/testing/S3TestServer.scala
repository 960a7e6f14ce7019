package io.lineagestore.testing

import java.io.{File, FileInputStream}
import java.util.{Properties, UUID}

import scala.jdk.CollectionConverters._

import org.apache.hadoop.conf.Configuration
import org.scalatest.Assertions

/** The real S3 server (MinIO on loopback) the test harness started for the JVM suites: `dev/test` runs sbt
  * through `python -m lineagestore.testing.with_s3`, which starts it, creates a bucket and names a properties
  * file in `LINEAGESTORE_TEST_S3` (the bucket and its s3a settings), and puts the s3a jars on the test class
  * path (`LINEAGESTORE_S3A_JARS`, see build.sbt). Child JVMs inherit both.
  */
object S3TestServer {
  val Env = "LINEAGESTORE_TEST_S3"
  // set by dev/test: a suite that finds no server then fails instead of cancelling
  val RequiredEnv = "LINEAGESTORE_REQUIRE_S3"

  final case class Server(bucket: String, hadoopConf: Map[String, String]) {
    def configuration: Configuration = {
      val c = new Configuration()
      hadoopConf.foreach { case (k, v) => c.set(k, v) }
      c
    }

    /** A fresh location in the bucket, for one test. */
    def freshUri(label: String): String = s"s3a://$bucket/$label-${UUID.randomUUID()}"
  }

  lazy val server: Either[String, Server] = sys.env.get(Env) match {
    case None => Left(s"no S3 server: $Env is not set; run through `python -m lineagestore.testing.with_s3`")
    case Some(path) =>
      val props = new Properties()
      val in = new FileInputStream(new File(path))
      try props.load(in)
      finally in.close()
      val all = props.asScala.toMap
      val hadoop = all.collect { case (k, v) if k.startsWith("hadoop.") => k.stripPrefix("hadoop.") -> v }
      all.get("bucket").map(Server(_, hadoop)).toRight(s"$path names no bucket")
  }

  /** The server, or the test is cancelled (failed when [[RequiredEnv]] is set: dev/test must not skip it). */
  def require(a: Assertions): Server = server match {
    case Right(s)                                   => s
    case Left(why) if sys.env.contains(RequiredEnv) => a.fail(why)
    case Left(why)                                  => a.cancel(why)
  }
}

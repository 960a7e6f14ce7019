package io.lineagestore.storage

import java.io.{File, IOException}
import java.nio.file.Files

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.config.LineageConf
import io.lineagestore.testing.TempDirs

/** Filesystem failures become [[BlobStoreAccessException]]s that say where, what and what to do; the writer's
  * own failures and missing blobs keep their types. (The same errors from real s3a against MinIO:
  * integration-tests/test_s3_bad_input.py.)
  */
class BlobStoreAccessSuite extends AnyFunSuite {
  import BlobStoreAccessException._

  test("the cause chain decides the problem") {
    def wrapped(t: Throwable) = new IOException("s3a failed", t)
    assert(
      classify(wrapped(new java.nio.file.AccessDeniedException("s3a://b/k: 403 Forbidden"))) == Credentials
    )
    assert(classify(new IOException("SignatureDoesNotMatch: (Service: S3, Status Code: 403)")) == Credentials)
    assert(classify(new IOException("The specified bucket does not exist (NoSuchBucket)")) == MissingBucket)
    assert(classify(wrapped(new java.net.ConnectException("Connection refused"))) == Unreachable)
    assert(classify(wrapped(new java.net.UnknownHostException("nosuchhost"))) == Unreachable)
    assert(classify(wrapped(new java.net.SocketTimeoutException("Read timed out"))) == TimedOut)
    assert(classify(new IOException("We encountered an internal error (Status Code: 500)")) == ServerError)
    assert(classify(new IOException("disk on fire")) == Other)
  }

  test("the message names operation, location, endpoint, problem, remedy and the cause") {
    val e = BlobStoreAccessException(
      "write",
      "s3a://bucket/cp/state/0/1/3_x.delta",
      Some("http://127.0.0.1:9 (fs.s3a.endpoint)"),
      new java.nio.file.AccessDeniedException("s3a://bucket/cp/state/0/1/3_x.delta: 403")
    )
    val m = e.getMessage
    assert(
      m.startsWith("lineagestore could not write s3a://bucket/cp/state/0/1/3_x.delta at http://127.0.0.1:9")
    )
    assert(m.contains("refused the credentials") && m.contains("fs.s3a.access.key"), m)
    assert(m.contains("committed state is intact"), m)
    assert(m.contains("Cause: java.nio.file.AccessDeniedException"), m)
    assert(e.getCause.isInstanceOf[java.nio.file.AccessDeniedException])
  }

  test("the s3a endpoint in messages is the setting in force for the bucket") {
    val conf = new Configuration(false)
    val uri = new java.net.URI("s3a://bkt/cp")
    assert(HadoopBlobStore.endpointOf(uri, conf).get.contains("fs.s3a.endpoint is not set"))
    conf.set("fs.s3a.endpoint", "http://a:1")
    assert(HadoopBlobStore.endpointOf(uri, conf).contains("http://a:1 (fs.s3a.endpoint)"))
    conf.set("fs.s3a.bucket.bkt.endpoint", "http://b:2")
    assert(HadoopBlobStore.endpointOf(uri, conf).contains("http://b:2 (fs.s3a.bucket.bkt.endpoint)"))
    assert(HadoopBlobStore.endpointOf(new java.net.URI("file:/tmp/x"), conf).isEmpty)
  }

  test("a filesystem failure is wrapped; the writer's own failure and a missing blob are not") {
    val tmp = TempDirs.create("blobs")
    val notADir = new File(tmp, "file")
    Files.write(notADir.toPath, Array[Byte](1))
    val store = new HadoopBlobStore(
      new Path(notADir.toURI),
      new Configuration(),
      LineageConf.DeltaUploadPartBytes.default
    )
    val e = intercept[BlobStoreAccessException](store.write("x.delta")(_.write(1)))
    assert(e.operation == "write" && e.location.endsWith("file/x.delta"), e.getMessage)
    val good =
      new HadoopBlobStore(new Path(tmp.toURI), new Configuration(), LineageConf.DeltaUploadPartBytes.default)
    val own = new IllegalStateException("the writer's own")
    assert(intercept[IllegalStateException](good.write("y.delta")(_ => throw own)) eq own)
    assert(!good.exists("y.delta"))
    intercept[BlobNotFoundException](good.open("missing"))
  }
}

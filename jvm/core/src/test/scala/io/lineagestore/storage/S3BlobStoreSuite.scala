package io.lineagestore.storage

import java.nio.charset.StandardCharsets.UTF_8

import org.apache.hadoop.fs.Path
import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.testing.S3TestServer

/** [[HadoopBlobStore]] on s3a against the real S3 server: the guarantees its interface states. */
class S3BlobStoreSuite extends AnyFunSuite {

  private def store(): HadoopBlobStore = {
    val s3 = S3TestServer.require(this)
    new HadoopBlobStore(new Path(s3.freshUri("blobs")), s3.configuration)
  }

  private def read(blobs: BlobStore, name: String): String = {
    val in = blobs.open(name)
    try new String(in.readAllBytes(), UTF_8)
    finally in.close()
  }

  test("a second write of an existing name is refused by the server (conditional PUT); the first stays") {
    val blobs = store()
    blobs.write("a.delta")(_.write("first".getBytes(UTF_8)))
    val e = intercept[Exception](blobs.write("a.delta")(_.write("second".getBytes(UTF_8))))
    assert(e.toString.contains("a.delta"), e.toString)
    assert(read(blobs, "a.delta") == "first")
  }

  test("a large blob goes up as a multipart upload and reads back byte for byte") {
    val s3 = S3TestServer.require(this)
    val conf = s3.configuration
    conf.set("fs.s3a.multipart.size", "5M") // S3's smallest part; s3a's default is 64M
    conf.set("fs.s3a.multipart.threshold", "5M")
    conf.setBoolean("fs.s3a.impl.disable.cache", true) // a filesystem of its own, with these settings
    val root = new Path(s3.freshUri("multipart"))
    val blobs = new HadoopBlobStore(root, conf)
    val bytes = new Array[Byte](12 << 20)
    new scala.util.Random(7).nextBytes(bytes)
    blobs.write("shared/big.sst")(_.write(bytes))
    val in = blobs.open("shared/big.sst")
    try assert(java.util.Arrays.equals(in.readAllBytes(), bytes))
    finally in.close()
    val status = root.getFileSystem(conf).getFileStatus(new Path(root, "shared/big.sst"))
    val etag = status.asInstanceOf[org.apache.hadoop.fs.EtagSource].getEtag
    assert(etag.stripSuffix("\"").endsWith("-3"), s"ETag $etag: not an upload in 3 parts")
  }

  test("a writer that fails publishes nothing under the name") {
    val blobs = store()
    intercept[IllegalStateException](blobs.write("b.delta") { out =>
      out.write(new Array[Byte](1 << 20))
      throw new IllegalStateException("the writer's own failure")
    })
    assert(!blobs.exists("b.delta"))
    intercept[BlobNotFoundException](blobs.open("b.delta"))
  }

  test(
    "a blob written while something else runs (create) appears only at complete; an abort leaves nothing"
  ) {
    val s3 = S3TestServer.require(this)
    val conf = s3.configuration
    conf.set("fs.s3a.multipart.size", "5M")
    conf.set("fs.s3a.multipart.threshold", "5M")
    conf.setBoolean("fs.s3a.impl.disable.cache", true)
    val blobs = new HadoopBlobStore(new Path(s3.freshUri("create")), conf)
    val bytes = new Array[Byte](12 << 20)
    new scala.util.Random(9).nextBytes(bytes)
    val kept = blobs.create("1_a.delta")
    kept.out.write(bytes) // two parts are uploaded by now (s3a sends each full block)
    assert(!blobs.exists("1_a.delta"), "visible before complete")
    kept.complete()
    val in = blobs.open("1_a.delta")
    try assert(java.util.Arrays.equals(in.readAllBytes(), bytes))
    finally in.close()
    val given = blobs.create("2_b.delta")
    given.out.write(bytes)
    given.abort()
    assert(!blobs.exists("2_b.delta") && blobs.list("").map(_.name) == Seq("1_a.delta"))
  }
}

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

  test("a writer that fails publishes nothing under the name") {
    val blobs = store()
    intercept[IllegalStateException](blobs.write("b.delta") { out =>
      out.write(new Array[Byte](1 << 20))
      throw new IllegalStateException("the writer's own failure")
    })
    assert(!blobs.exists("b.delta"))
    intercept[BlobNotFoundException](blobs.open("b.delta"))
  }
}

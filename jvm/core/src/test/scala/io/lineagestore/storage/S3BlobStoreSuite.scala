package io.lineagestore.storage

import java.nio.charset.StandardCharsets.UTF_8

import org.apache.hadoop.fs.Path
import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.config.LineageConf
import io.lineagestore.testing.S3TestServer

/** [[HadoopBlobStore]] on s3a against the real S3 server: the guarantees its interface states. */
class S3BlobStoreSuite extends AnyFunSuite {

  private def store(): HadoopBlobStore = {
    val s3 = S3TestServer.require(this)
    new HadoopBlobStore(
      new Path(s3.freshUri("blobs")),
      s3.configuration,
      LineageConf.DeltaUploadPartBytes.default
    )
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
    val blobs = new HadoopBlobStore(root, conf, LineageConf.DeltaUploadPartBytes.default)
    val bytes = randomBytes(12 << 20, seed = 7)
    blobs.write("shared/big.sst")(_.write(bytes))
    assert(java.util.Arrays.equals(readBytes(blobs, "shared/big.sst"), bytes))
    val etag = etagOf(blobs, "shared/big.sst")
    assert(etag.endsWith("-3"), s"ETag $etag: not an upload in 3 parts")
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

  private def etagOf(blobs: HadoopBlobStore, name: String): String = {
    val p = new Path(blobs.root, name)
    val status = p.getFileSystem(S3TestServer.require(this).configuration).getFileStatus(p)
    status.asInstanceOf[org.apache.hadoop.fs.EtagSource].getEtag.stripSuffix("\"")
  }

  private def readBytes(blobs: BlobStore, name: String): Array[Byte] = {
    val in = blobs.open(name)
    try in.readAllBytes()
    finally in.close()
  }

  private def randomBytes(n: Int, seed: Int): Array[Byte] = {
    val bytes = new Array[Byte](n)
    new scala.util.Random(seed).nextBytes(bytes)
    bytes
  }

  private val FiveMiB = 5L << 20 // S3's smallest part

  test(
    "a blob written while something else runs (create) goes up in parts of its own size, visible only at " +
      "complete; an abort leaves nothing"
  ) {
    val s3 = S3TestServer.require(this)
    // s3a's own part size stays at its default (64M): the parts below are the blob store's
    val blobs = new HadoopBlobStore(new Path(s3.freshUri("create")), s3.configuration, FiveMiB)
    val bytes = randomBytes((12 << 20) + 3, 9)
    val kept = blobs.create("1_a.delta")
    kept.out.write(bytes, 0, 7 << 20)
    kept.out.write(bytes, 7 << 20, bytes.length - (7 << 20)) // two parts are sent by now, the third waits
    assert(!blobs.exists("1_a.delta"), "visible before complete")
    kept.complete()
    assert(java.util.Arrays.equals(readBytes(blobs, "1_a.delta"), bytes))
    assert(etagOf(blobs, "1_a.delta").endsWith("-3"), s"ETag ${etagOf(blobs, "1_a.delta")}: not 3 parts")
    intercept[IllegalStateException](kept.out.write(1))
    val abandoned = blobs.create("2_b.delta")
    abandoned.out.write(bytes)
    abandoned.abort()
    assert(!blobs.exists("2_b.delta") && blobs.list("").map(_.name) == Seq("1_a.delta"))
  }

  test("a streamed blob of at most one part is one conditional PUT: a second write of its name is refused") {
    val s3 = S3TestServer.require(this)
    val blobs = new HadoopBlobStore(new Path(s3.freshUri("one-part")), s3.configuration, FiveMiB)
    val exactlyOnePart = randomBytes(FiveMiB.toInt, 3)
    val first = blobs.create("3_c.delta")
    exactlyOnePart.grouped(100000).foreach(chunk => first.out.write(chunk))
    first.complete()
    assert(java.util.Arrays.equals(readBytes(blobs, "3_c.delta"), exactlyOnePart))
    assert(
      !etagOf(blobs, "3_c.delta").contains("-"),
      s"ETag ${etagOf(blobs, "3_c.delta")}: a multipart upload"
    )
    val second = blobs.create("3_c.delta")
    second.out.write(Array[Byte](1, 2, 3))
    val e = intercept[Exception](second.complete())
    assert(e.toString.contains("3_c.delta"), e.toString)
    assert(java.util.Arrays.equals(readBytes(blobs, "3_c.delta"), exactlyOnePart))
    val empty = blobs.create("4_d.delta")
    empty.complete()
    assert(blobs.size("4_d.delta").contains(0L))
  }

  test("a part the server refuses fails the streamed write naming the blob; nothing appears under the name") {
    val s3 = S3TestServer.require(this)
    val root = new Path(s3.freshUri("refused"))
    val blobs = new HadoopBlobStore(root, s3.configuration, FiveMiB)
    val bytes = randomBytes(16 << 20, 5)
    val write = blobs.create("5_e.delta")
    write.out.write(bytes, 0, 6 << 20) // the upload starts with the first part
    // another client aborts the unfinished upload (as a lifecycle rule would): the parts still to come have
    // no upload to go to
    val fs = root.getFileSystem(s3.configuration).asInstanceOf[org.apache.hadoop.fs.s3a.S3AFileSystem]
    val key = fs.pathToKey(new Path(root, "5_e.delta"))
    val client = fs.getS3AInternals.getAmazonS3Client("a second client of the bucket")
    val uploads = client
      .listMultipartUploads(
        software.amazon.awssdk.services.s3.model.ListMultipartUploadsRequest
          .builder()
          .bucket(fs.getBucket)
          .prefix(key)
          .build()
      )
      .uploads()
    assert(uploads.size == 1, s"unfinished uploads of $key: $uploads")
    fs.abortMultipartUpload(uploads.get(0))
    val e = intercept[BlobStoreAccessException] {
      write.out.write(bytes, 6 << 20, bytes.length - (6 << 20))
      write.complete()
    }
    assert(e.getMessage.contains(blobs.locate("5_e.delta")), e.getMessage)
    write.abort()
    assert(!blobs.exists("5_e.delta") && blobs.list("").isEmpty)
  }
}

package io.lineagestore.storage

import java.io.File
import java.util.concurrent.ExecutionException

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.config.LineageConf
import io.lineagestore.testing.{DiskDamage, TempDirs}

/** The blob store decides what damage is (issue 46): a read its filesystem's checksum refuses is a
  * [[BlobDamagedException]] naming the blob, through a stream and through byte ranges, and no Hadoop
  * exception class reaches the caller. Real local filesystem (Hadoop's checksummed `LocalFileSystem`, `.crc`
  * sidecars).
  */
class BlobDamageSuite extends AnyFunSuite {
  private def damagedBlob(): (HadoopBlobStore, String) = {
    val root = TempDirs.create("lineagestore-blob-damage")
    val store =
      new HadoopBlobStore(new Path(root.toURI), new Configuration(), LineageConf.DeltaUploadPartBytes.default)
    val bytes = Array.tabulate[Byte](10000)(i => (i * 31).toByte)
    store.write("shared/a.sst")(_.write(bytes))
    DiskDamage.flip(new File(root, "shared/a.sst"), 7000) // in place, the .crc sidecar kept
    (store, "shared/a.sst")
  }

  test("a stream read the filesystem's checksum refuses is damage of the blob, named") {
    val (store, name) = damagedBlob()
    val in = store.open(name)
    val e =
      try intercept[BlobDamagedException](in.readAllBytes())
      finally in.close()
    assert(e.location == store.locate(name) && e.detail.contains("checksum"), e.getMessage)
  }

  test("a ranged read the filesystem's checksum refuses is damage of the blob, named") {
    val (store, name) = damagedBlob()
    val reader = store.openRanges(name, 10000)
    try {
      assert(reader.read(0, 4096).get().remaining == 4096) // undamaged ranges read as they are
      val e = intercept[ExecutionException](reader.read(4096, 4096).get())
      e.getCause match {
        case d: BlobDamagedException => assert(d.location == store.locate(name))
        case other                   => fail(s"not damage of the blob: $other")
      }
    } finally reader.close()
  }
}

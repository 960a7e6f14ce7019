package io.lineagestore.storage

import java.io.{IOException, OutputStream}
import java.nio.charset.StandardCharsets.UTF_8

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{
  FSDataOutputStream,
  FileAlreadyExistsException,
  FileSystem,
  FilterFileSystem,
  Path
}
import org.apache.hadoop.fs.permission.FsPermission
import org.apache.hadoop.util.Progressable
import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.testing.TempDirs

/** [[HadoopBlobStore.writeWhole]], how the tools write Spark's log entries (a repartition's offsets and
  * commit, a file sink's entry): a reader sees the whole file or none, on Hadoop's checksummed local
  * filesystem (the `.crc` sidecar goes with the rename).
  */
class WholeFileWriteSuite extends AnyFunSuite {
  private def localFs = FileSystem.getLocal(new Configuration())
  private def dir() = new Path(TempDirs.create("whole-write").toURI)
  private def read(fs: FileSystem, p: Path) = {
    val in = fs.open(p)
    try new String(in.readAllBytes(), UTF_8)
    finally in.close()
  }
  private def names(fs: FileSystem, d: Path) = fs.listStatus(d).map(_.getPath.getName).sorted.toSeq

  test("writes the file whole, leaves no temporary, refuses an existing name unless told to overwrite") {
    val fs = localFs
    val d = dir()
    val p = new Path(d, "7")
    HadoopBlobStore.writeWhole(fs, p, "v1\n{}".getBytes(UTF_8), overwrite = false)
    assert(read(fs, p) === "v1\n{}")
    intercept[FileAlreadyExistsException](
      HadoopBlobStore.writeWhole(fs, p, "other".getBytes(UTF_8), overwrite = false)
    )
    assert(read(fs, p) === "v1\n{}", "a refused write changed the file")
    HadoopBlobStore.writeWhole(fs, p, "v1\nnew".getBytes(UTF_8), overwrite = true)
    assert(read(fs, p) === "v1\nnew")
    // the checksum sidecar was renamed with the file, so Hadoop verifies what it reads
    assert(names(localFs.getRawFileSystem, d) === Seq(".7.crc", "7"))
  }

  test("a write that fails part-way (a full disk) leaves neither the name nor its temporary") {
    val d = dir()
    val fs = new FailingAfter(localFs, 3)
    val p = new Path(d, "commits-4")
    val e = intercept[IOException](HadoopBlobStore.writeWhole(fs, p, "v1\n{\"a\":1}".getBytes(UTF_8), false))
    assert(e.getMessage.contains("No space left"), e.getMessage)
    assert(!localFs.exists(p))
    assert(names(localFs.getRawFileSystem, d).isEmpty, "a temporary was left behind")
  }
}

/** The local filesystem whose output streams fail with ENOSPC after `limit` bytes: a disk filling up. */
private final class FailingAfter(fs: FileSystem, limit: Int) extends FilterFileSystem(fs) {
  override def create(
      f: Path,
      permission: FsPermission,
      overwrite: Boolean,
      bufferSize: Int,
      replication: Short,
      blockSize: Long,
      progress: Progressable
  ): FSDataOutputStream = {
    val real = fs.create(f, permission, overwrite, bufferSize, replication, blockSize, progress)
    val failing = new OutputStream {
      private var written = 0
      override def write(b: Int): Unit = {
        if (written >= limit) throw new IOException("No space left on device")
        written += 1
        real.write(b)
      }
      override def close(): Unit = real.close()
    }
    new FSDataOutputStream(failing, null)
  }
}

package io.lineagestore.tools

import java.io.{File, IOException}
import java.nio.file.{FileAlreadyExistsException, Files}

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileSystem, FileUtil, Path}

import io.lineagestore.format.SnapshotZip
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.snapshot.SnapshotPlanner
import io.lineagestore.store.CheckpointFiles

/** Files one clone step linked, copied inside the object store (`serverCopied`), or copied through this JVM
  * (`copied`); `bytes` counts all of them.
  */
final case class CloneStats(linked: Int, copied: Int, bytes: Long, serverCopied: Int = 0)

/** Copies a checkpoint file by file into a new location that shares nothing mutable with it.
  *
  * lineagestore's state files (`<version>_<uniqueId>.delta|zip` and `shared/<blob>.sst`) are immutable:
  * nothing ever writes them again under the same name, and deleting one only removes a name. On a local
  * filesystem they are therefore shared by hard link (with their Hadoop `.crc` sidecars), which costs no
  * space and no time; everything else (Spark's commits, offsets, sources, metadata, schema files) is copied
  * byte for byte. Between two s3a locations every file is copied server-side (S3 CopyObject, see
  * [[io.lineagestore.storage.s3.S3ServerSideCopy]]): no byte passes through this JVM. Otherwise, or when a
  * link or server-side copy is refused, files are copied through this JVM.
  */
object CheckpointCloner {

  /** Whether `name` in directory `relDir` (relative to the checkpoint root) is immutable lineagestore state.
    */
  def isImmutableStateFile(relDir: String, name: String): Boolean = {
    val parts = relDir.split("/").filter(_.nonEmpty)
    parts.headOption.contains("state") && (
      CheckpointId.parseFileName(name).isDefined ||
        (parts.lastOption.contains(SnapshotZip.SharedDir) && SnapshotPlanner.isShared(name))
    )
  }

  /** Clones the files `names` of directory `relDir` of checkpoint `srcRoot` into the same directory under
    * `dstRoot`. Never overwrites: an existing destination file is an error naming it.
    */
  def cloneFiles(
      srcRoot: String,
      dstRoot: String,
      relDir: String,
      names: Seq[String],
      conf: Configuration = ToolEnv.hadoopConf
  ): CloneStats = {
    val srcDir = under(srcRoot, relDir)
    val dstDir = under(dstRoot, relDir)
    val srcFs = srcDir.getFileSystem(conf)
    val dstFs = dstDir.getFileSystem(conf)
    if (!dstFs.mkdirs(dstDir)) throw new IOException(s"cannot create directory $dstDir")
    val bothS3 = scheme(srcFs) == "s3a" && scheme(dstFs) == "s3a"
    var linked, copied, serverCopied = 0
    var bytes = 0L
    names.foreach { n =>
      val s = new Path(srcDir, n)
      val d = new Path(dstDir, n)
      if (dstFs.exists(d)) throw new FileAlreadyExistsException(s"$d already exists: clone never overwrites")
      val len = srcFs.getFileStatus(s).getLen
      if (bothS3 && io.lineagestore.storage.s3.S3ServerSideCopy.copy(srcFs, s, dstFs, d, len))
        serverCopied += 1
      else if (isImmutableStateFile(relDir, n) && shareImmutable(srcFs, s, dstFs, d)) linked += 1
      else {
        if (!FileUtil.copy(srcFs, s, dstFs, d, false, false, conf))
          throw new IOException(s"could not copy $s to $d")
        copied += 1
      }
      bytes += len
    }
    CloneStats(linked, copied, bytes, serverCopied)
  }

  private def under(root: String, relDir: String): Path =
    if (relDir.isEmpty) new Path(root) else new Path(root.stripSuffix("/") + "/" + relDir)

  /** Makes an immutable file available at `d` without copying its bytes through this JVM, if the filesystems
    * allow; false means "copy it".
    */
  private def shareImmutable(srcFs: FileSystem, s: Path, dstFs: FileSystem, d: Path): Boolean =
    (scheme(srcFs), scheme(dstFs)) match {
      case ("file", "file") => hardLink(new File(s.toUri), new File(d.toUri))
      case _                => false
    }

  private def scheme(fs: FileSystem): String = Option(fs.getScheme).getOrElse("").toLowerCase

  private def hardLink(src: File, dst: File): Boolean = {
    val srcCrc = new File(src.getParentFile, s".${src.getName}.crc")
    val dstCrc = new File(dst.getParentFile, s".${dst.getName}.crc")
    try {
      Files.createLink(dst.toPath, src.toPath)
      if (srcCrc.isFile) Files.createLink(dstCrc.toPath, srcCrc.toPath)
      true
    } catch {
      case _: IOException | _: UnsupportedOperationException =>
        Files.deleteIfExists(dstCrc.toPath)
        Files.deleteIfExists(dst.toPath)
        false
    }
  }
}

package io.lineagestore.tools

import java.io.{File, IOException}
import java.nio.file.{FileAlreadyExistsException, Files}

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileSystem, FileUtil, Path}

import io.lineagestore.lineage.CheckpointId
import io.lineagestore.snapshot.SnapshotPlanner
import io.lineagestore.store.CheckpointFiles

/** Files one clone step linked or copied. */
final case class CloneStats(linked: Int, copied: Int, bytes: Long)

/** Copies a checkpoint file by file into a new location that shares nothing mutable with it.
  *
  * lineagestore's state files (`<version>_<uniqueId>.delta|zip` and `shared/<blob>.sst`) are immutable:
  * nothing ever writes them again under the same name, and deleting one only removes a name. On a local
  * filesystem they are therefore shared by hard link (with their Hadoop `.crc` sidecars), which costs no
  * space and no time; everything else (Spark's commits, offsets, sources, metadata, schema files) is copied
  * byte for byte. Across filesystems, or when a link fails (another device, a filesystem without links),
  * files are copied.
  */
object CheckpointCloner {

  /** Whether `name` in directory `relDir` (relative to the checkpoint root) is immutable lineagestore state.
    */
  def isImmutableStateFile(relDir: String, name: String): Boolean = {
    val parts = relDir.split("/").filter(_.nonEmpty)
    parts.headOption.contains("state") && (
      CheckpointId.parseFileName(name).isDefined ||
        (parts.lastOption.contains(CheckpointFiles.SharedDir) && SnapshotPlanner.isShared(name))
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
    var linked, copied = 0
    var bytes = 0L
    names.foreach { n =>
      val s = new Path(srcDir, n)
      val d = new Path(dstDir, n)
      if (dstFs.exists(d)) throw new FileAlreadyExistsException(s"$d already exists: clone never overwrites")
      val len = srcFs.getFileStatus(s).getLen
      if (isImmutableStateFile(relDir, n) && shareImmutable(srcFs, s, dstFs, d)) linked += 1
      else {
        if (!FileUtil.copy(srcFs, s, dstFs, d, false, false, conf))
          throw new IOException(s"could not copy $s to $d")
        copied += 1
      }
      bytes += len
    }
    CloneStats(linked, copied, bytes)
  }

  private def under(root: String, relDir: String): Path =
    if (relDir.isEmpty) new Path(root) else new Path(root.stripSuffix("/") + "/" + relDir)

  /** Makes an immutable file available at `d` without copying its bytes through this JVM, if the filesystems
    * allow; false means "copy it".
    */
  private def shareImmutable(srcFs: FileSystem, s: Path, dstFs: FileSystem, d: Path): Boolean =
    (scheme(srcFs), scheme(dstFs)) match {
      case ("file", "file") => hardLink(new File(s.toUri), new File(d.toUri))
      // TODO(s3): for s3a -> s3a (same endpoint) use a server-side copy (S3 CopyObject / UploadPartCopy for
      // large blobs) so the bytes never leave the object store. It needs an S3 server in the integration
      // tests to be proven; until then objects are streamed through this JVM by FileUtil.copy.
      case _ => false
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

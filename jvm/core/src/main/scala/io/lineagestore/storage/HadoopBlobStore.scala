package io.lineagestore.storage

import java.io.{FileNotFoundException, InputStream, OutputStream}
import java.util.UUID

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileSystem, Path}

/** [[BlobStore]] over any Hadoop FileSystem (file://, hdfs://, s3a://, abfs://, gs://).
  *
  * Atomic writes: object stores (s3a, gs) make an object visible only when its stream closes, so blobs are
  * written in place. On filesystems with visible partial files (file, hdfs, abfs) a blob is written under a
  * temporary name `.<name>.<uuid>.tmp` and renamed, which those filesystems do atomically.
  */
class HadoopBlobStore(val root: Path, hadoopConf: Configuration) extends BlobStore {
  private val fs: FileSystem = root.getFileSystem(hadoopConf)
  private val writesInPlace = Set("s3a", "s3", "gs").contains(Option(fs.getScheme).getOrElse("").toLowerCase)

  private def path(name: String): Path = if (name.isEmpty) root else new Path(root, name)

  override def locate(name: String): String = path(name).toString

  override def write(name: String)(body: OutputStream => Unit): Unit = {
    val target = path(name)
    val dest =
      if (writesInPlace) target
      else new Path(target.getParent, s".${target.getName}.${UUID.randomUUID()}.tmp")
    val out = fs.create(dest, false)
    try body(out)
    catch {
      case t: Throwable =>
        try out.close()
        catch { case s: Throwable => t.addSuppressed(s) }
        if (!writesInPlace) fs.delete(dest, false)
        throw t
    }
    out.close()
    if (!writesInPlace && !fs.rename(dest, target)) {
      fs.delete(dest, false)
      if (!fs.exists(target)) throw new java.io.IOException(s"could not rename $dest to $target")
      // an identical blob already exists (a retried write of an immutable name): keep the existing one
    }
  }

  override def open(name: String): InputStream =
    try fs.open(path(name))
    catch { case _: FileNotFoundException => throw new BlobNotFoundException(locate(name)) }

  override def exists(name: String): Boolean = fs.exists(path(name))

  override def size(name: String): Option[Long] =
    try Some(fs.getFileStatus(path(name)).getLen)
    catch { case _: FileNotFoundException => None }

  override def delete(name: String): Unit = fs.delete(path(name), false)

  override def list(dir: String): Seq[BlobInfo] = {
    val p = path(dir)
    val statuses =
      try fs.listStatus(p).toSeq
      catch { case _: FileNotFoundException => Nil }
    statuses.filter(_.isFile).map { s =>
      val n = s.getPath.getName
      BlobInfo(if (dir.isEmpty) n else s"$dir/$n", s.getLen, s.getModificationTime)
    }
  }
}

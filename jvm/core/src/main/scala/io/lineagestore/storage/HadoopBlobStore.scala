package io.lineagestore.storage

import java.io.{
  EOFException,
  FileNotFoundException,
  FilterInputStream,
  FilterOutputStream,
  IOException,
  InputStream,
  OutputStream
}
import java.nio.ByteBuffer
import java.nio.file.FileAlreadyExistsException
import java.util.concurrent.{CompletableFuture, CompletionException}

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{
  Abortable,
  ChecksumException,
  CommonPathCapabilities,
  FSDataOutputStream,
  FileRange,
  FileSystem,
  Path,
  StreamCapabilities
}
import org.apache.hadoop.util.functional.FutureIO

/** [[BlobStore]] over any Hadoop FileSystem (file://, hdfs://, s3a://, abfs://, gs://).
  *
  * Atomic writes: object stores (s3a, gs) make an object visible only when its stream closes, so blobs are
  * written in place. On filesystems with visible partial files (file, hdfs, abfs) a blob is written under a
  * temporary name (`.<name>.<uuid>.tmp`, [[TemporaryBlobs]]) and renamed, which those filesystems do
  * atomically.
  *
  * Requests: nothing but [[list]] lists, and only the orphan sweep and the tools call it. On s3a an existence
  * check is one HEAD, and a write is only its PUT (or multipart upload): names are never reused, so the
  * create probe that guards against overwriting (a HEAD and a LIST per write) is skipped
  * (`fs.s3a.create.performance`); with `fs.s3a.create.conditional.enabled` (the default) that PUT is
  * conditional (`If-None-Match: *`), so a server that honours it refuses to overwrite an existing name
  * (S3BlobStoreSuite). A streamed write ([[create]]) past one part of `streamedPartBytes` is a multipart
  * upload of our own parts ([[MultipartBlobWrite]]), whose completion is not conditional. Whoever builds the
  * store passes `streamedPartBytes` (the provider its `deltaUploadPartBytes` setting); storage decides no
  * setting.
  *
  * Failures of the filesystem itself (credentials refused, bucket missing, endpoint unreachable, errors that
  * outlasted the client's retries) surface as [[BlobStoreAccessException]], naming the operation, the full
  * location, the endpoint and what to do, also when they come out of the output stream a writer's `body`
  * writes to (s3a uploads blocks while the body writes). Exceptions of the body's own, missing blobs
  * ([[BlobNotFoundException]]) and end-of-file errors while reading keep their own types. Damage is decided
  * here: a read the filesystem's own checksum refuses (Hadoop's `ChecksumException`, from the local `.crc`
  * sidecar, HDFS or any checksummed filesystem) is a [[BlobDamagedException]] naming the blob, so nothing
  * above this class sees Hadoop's exception classes.
  */
class HadoopBlobStore(
    val root: Path,
    hadoopConf: Configuration,
    streamedPartBytes: Long
) extends BlobStore {
  private val fs: FileSystem =
    try root.getFileSystem(hadoopConf)
    catch { case e: IOException => throw access("open the filesystem of", root.toString, e) }
  private val writesInPlace = HadoopBlobStore.writesInPlace(fs)

  /** Streamed writes ([[create]]) go up in parts of `streamedPartBytes` where the filesystem has a multipart
    * uploader (s3a), see [[MultipartBlobWrite]].
    */
  private val streamsInParts =
    writesInPlace && io("open the filesystem of", "")(
      fs.hasPathCapability(root, CommonPathCapabilities.FS_MULTIPART_UPLOADER)
    )

  /** Where requests go, for messages: the s3a endpoint setting in force for this bucket. */
  val endpoint: Option[String] = HadoopBlobStore.endpointOf(root.toUri, hadoopConf)

  private def access(operation: String, location: String, e: Throwable): BlobStoreAccessException =
    BlobStoreAccessException(operation, location, endpoint, e)

  /** The filesystem's own checksum of the bytes read does not match them (a local `.crc` sidecar, HDFS's
    * block checksums): the blob's content is damaged, whatever filesystem said so.
    */
  private def damaged(name: String, e: ChecksumException): BlobDamagedException =
    new BlobDamagedException(
      locate(name),
      s"the filesystem's checksum does not match its bytes at byte ${e.getPos} (they changed after they were written)",
      e
    )

  /** Runs a filesystem call, wrapping its I/O failures (but not the signals callers act on). */
  private def io[T](operation: String, name: String)(body: => T): T =
    try body
    catch {
      case e @ (_: FileNotFoundException | _: FileAlreadyExistsException | _: BlobStoreAccessException) =>
        throw e
      case e: IOException => throw access(operation, locate(name), e)
    }

  private def path(name: String): Path = if (name.isEmpty) root else new Path(root, name)

  override def locate(name: String): String = path(name).toString

  override def write(name: String)(body: OutputStream => Unit): Unit = {
    val blob = openWrite(name)
    try body(blob.out)
    catch { case t: Throwable => blob.abort(); throw t } // the writer's own failure, as it is
    blob.complete()
  }

  /** On s3a, parts of `streamedPartBytes` sent while the writer goes on ([[MultipartBlobWrite]]); elsewhere
    * the filesystem's own stream, as [[write]].
    */
  override def create(name: String): BlobWrite =
    if (!streamsInParts) openWrite(name)
    else {
      val target = path(name)
      new MultipartBlobWrite(
        name,
        target,
        streamedPartBytes.toInt,
        () => io("write", name)(fs.createMultipartUploader(root).build()),
        (bytes, length) => write(name)(_.write(bytes, 0, length)),
        e => access("write", locate(name), e)
      )
    }

  /** Object stores write in place (s3a's multipart upload sends each full block of `fs.s3a.multipart.size`
    * while the writer goes on, and only completing it publishes the object); other filesystems write a
    * temporary and rename it.
    */
  private def openWrite(name: String): HadoopBlobWrite = io("write", name) {
    val target = path(name)
    val dest =
      if (writesInPlace) target else new Path(target.getParent, TemporaryBlobs.nameFor(target.getName))
    val stream =
      if (writesInPlace) fs.createFile(dest).overwrite(false).opt("fs.s3a.create.performance", true).build()
      else fs.create(dest, false)
    new HadoopBlobWrite(name, target, dest, stream)
  }

  private final class HadoopBlobWrite(name: String, target: Path, dest: Path, stream: FSDataOutputStream)
      extends BlobWrite {
    private var done = false
    override val out: OutputStream = new StoreOutputStream(stream, name)

    override def complete(): Unit = {
      if (done) throw new IllegalStateException(s"${locate(name)} is no longer being written")
      done = true
      try
        io("write", name) {
          stream.close()
          if (!writesInPlace && !fs.rename(dest, target)) {
            fs.delete(dest, false)
            if (!fs.exists(target)) throw new IOException(s"could not rename $dest to $target")
            // an identical blob already exists (a retried write of an immutable name): keep the existing one
          }
        }
      catch { case t: Throwable => if (!writesInPlace) deleteQuietly(dest, t); throw t }
    }

    override def abort(): Unit = if (!done) {
      done = true
      val failure = new IOException(s"write of ${locate(name)} aborted")
      try
        stream match {
          // in place (s3a), close() would publish the partial object under its final name: abort instead
          case a: Abortable if writesInPlace && stream.hasCapability(StreamCapabilities.ABORTABLE_STREAM) =>
            a.abort()
          case _ => stream.close()
        }
      catch { case scala.util.control.NonFatal(_) => () } // the temporary is left to the sweeper
      if (!writesInPlace) deleteQuietly(dest, failure)
    }
  }

  private def deleteQuietly(p: Path, onBehalfOf: Throwable): Unit =
    try fs.delete(p, false)
    catch { case scala.util.control.NonFatal(e) => onBehalfOf.addSuppressed(e) }

  /** The stream a writer's body sees: the filesystem's own I/O failures become [[BlobStoreAccessException]],
    * so they are not mistaken for the body's. Closing is left to its [[BlobWrite]].
    */
  private final class StoreOutputStream(out: OutputStream, name: String) extends FilterOutputStream(out) {
    private def wrap(body: => Unit): Unit =
      try body
      catch { case e: IOException => throw access("write", locate(name), e) }
    override def write(b: Int): Unit = wrap(out.write(b))
    override def write(b: Array[Byte], off: Int, len: Int): Unit = wrap(out.write(b, off, len))
    override def flush(): Unit = wrap(out.flush())
    override def close(): Unit = ()
  }

  override def open(name: String): InputStream = {
    val in =
      try io("read", name)(fs.open(path(name)))
      catch { case _: FileNotFoundException => throw new BlobNotFoundException(locate(name)) }
    new FilterInputStream(in) {
      override def read(): Int = reading(name)(super.read())
      override def read(b: Array[Byte], off: Int, len: Int): Int = reading(name)(super.read(b, off, len))
      override def skip(n: Long): Long = reading(name)(super.skip(n))
    }
  }

  /** Runs a read of `name`'s bytes: damage the filesystem found is a [[BlobDamagedException]]; a read past
    * the end stays an `EOFException` (the callers know how long the blob should be, and report it truncated);
    * any other failure is the store's ([[BlobStoreAccessException]]).
    */
  private def reading[T](name: String)(body: => T): T =
    try body
    catch {
      case e: ChecksumException        => throw damaged(name, e)
      case e: EOFException             => throw e
      case e: BlobStoreAccessException => throw e
      case _: FileNotFoundException    => throw new BlobNotFoundException(locate(name))
      case e: IOException              => throw access("read", locate(name), e)
    }

  /** Vectored reads: s3a issues one ranged GET per range, concurrently (its own thread pool); other
    * filesystems read the ranges their own way. The length is given, so s3a sends no HEAD first.
    */
  override def openRanges(name: String, size: Long): RangeReader = {
    val in =
      try
        io("read", name)(
          FutureIO.awaitFuture(
            fs.openFile(path(name))
              .opt("fs.option.openfile.length", size.toString)
              .opt("fs.option.openfile.read.policy", "vector, random")
              .build()
          )
        )
      catch { case _: FileNotFoundException => throw new BlobNotFoundException(locate(name)) }
    new RangeReader {
      override def read(offset: Long, length: Int): CompletableFuture[ByteBuffer] = {
        val range = FileRange.createFileRange(offset, length)
        reading(name)(in.readVectored(java.util.List.of(range), (n: Int) => ByteBuffer.allocate(n)))
        range.getData.handle[ByteBuffer] { (data, failure) =>
          failure match {
            case null => data
            case f    =>
              val cause = f match {
                case c: CompletionException if c.getCause != null => c.getCause; case x => x
              }
              throw (cause match {
                case e @ (_: EOFException | _: BlobStoreAccessException) => new CompletionException(e)
                case e: ChecksumException     => new CompletionException(damaged(name, e))
                case _: FileNotFoundException =>
                  new CompletionException(new BlobNotFoundException(locate(name)))
                case e: IOException => new CompletionException(access("read", locate(name), e))
                case e              => new CompletionException(e)
              })
          }
        }
      }
      override def close(): Unit = in.close()
    }
  }

  // Blobs are files: a file probe is one HEAD on s3a, where exists() adds a LIST for every absent key.
  @annotation.nowarn("cat=deprecation")
  override def exists(name: String): Boolean = io("check", name)(fs.isFile(path(name)))

  override def size(name: String): Option[Long] =
    try Some(io("check", name)(fs.getFileStatus(path(name)).getLen))
    catch { case _: FileNotFoundException => None }

  override def delete(name: String): Unit = io("delete", name)(fs.delete(path(name), false))

  override def list(dir: String): Seq[BlobInfo] = {
    val p = path(dir)
    val statuses =
      try io("list", dir)(fs.listStatus(p).toSeq)
      catch { case _: FileNotFoundException => Nil }
    statuses.filter(_.isFile).map { s =>
      val n = s.getPath.getName
      BlobInfo(if (dir.isEmpty) n else s"$dir/$n", s.getLen, s.getModificationTime)
    }
  }
}

object HadoopBlobStore {

  /** Whether `fs` publishes a file only when its stream closes (object stores), so that a file written in
    * place is never seen partial; elsewhere a file is written under a temporary name and renamed.
    */
  def writesInPlace(fs: FileSystem): Boolean =
    Set("s3a", "s3", "gs").contains(Option(fs.getUri.getScheme).getOrElse("").toLowerCase)

  /** Writes the small file `path` (a log entry of Spark's, a metadata file) so that a reader sees all of
    * `bytes` or no file: a writer killed half-way through must not leave an empty or short entry that Spark
    * would then fail to parse. In place on object stores, otherwise a temporary ([[TemporaryBlobs]], which
    * the orphan sweep and Spark's listings skip) renamed over it. Refuses an existing `path` unless
    * `overwrite`.
    */
  def writeWhole(fs: FileSystem, path: Path, bytes: Array[Byte], overwrite: Boolean): Unit =
    if (writesInPlace(fs)) {
      val out = fs.create(path, overwrite)
      try out.write(bytes)
      finally out.close()
    } else {
      if (!overwrite && fs.exists(path))
        throw new org.apache.hadoop.fs.FileAlreadyExistsException(s"$path already exists")
      val tmp = new Path(path.getParent, TemporaryBlobs.nameFor(path.getName))
      val out = fs.create(tmp, false)
      try out.write(bytes)
      catch { case t: Throwable => out.close(); fs.delete(tmp, false); throw t }
      out.close()
      // a rename onto an existing file fails on HDFS: an overwrite replaces it (the old entry is whole until
      // the delete, the new one from the rename on)
      if (!fs.rename(tmp, path)) {
        if (overwrite && fs.exists(path) && fs.delete(path, false) && fs.rename(tmp, path)) ()
        else {
          fs.delete(tmp, false)
          throw new IOException(s"could not rename $tmp to $path")
        }
      }
    }

  /** The endpoint requests to `uri` go to and the setting that chose it, for messages (s3a only). */
  def endpointOf(uri: java.net.URI, conf: Configuration): Option[String] =
    Option(uri.getScheme).map(_.toLowerCase) match {
      case Some("s3a") =>
        val perBucket = s"fs.s3a.bucket.${uri.getHost}.endpoint"
        Option(conf.getTrimmed(perBucket))
          .filter(_.nonEmpty)
          .map(e => s"$e ($perBucket)")
          .orElse(
            Option(conf.getTrimmed("fs.s3a.endpoint")).filter(_.nonEmpty).map(e => s"$e (fs.s3a.endpoint)")
          )
          .orElse(Some("the AWS endpoint of the bucket's region (fs.s3a.endpoint is not set)"))
      case _ => None
    }

  /** Runs `body` on `uri`, turning filesystem failures other than a missing file into
    * [[BlobStoreAccessException]] (for the tools, which use the filesystem directly).
    */
  def wrapAccess[T](operation: String, uri: String, conf: Configuration)(body: => T): T =
    try body
    catch {
      case e @ (_: FileNotFoundException | _: FileAlreadyExistsException | _: BlobStoreAccessException) =>
        throw e
      case e: IOException =>
        throw BlobStoreAccessException(operation, uri, endpointOf(new Path(uri).toUri, conf), e)
    }
}

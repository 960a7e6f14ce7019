package io.lineagestore.storage

import java.io.{ByteArrayInputStream, IOException, OutputStream}
import java.util.concurrent.CompletableFuture

import scala.collection.mutable

import org.apache.hadoop.fs.{MultipartUploader, PartHandle, Path, UploadHandle}
import org.apache.hadoop.util.functional.FutureIO

/** A blob written while something else runs ([[BlobStore.create]]) on a store with a multipart uploader
  * (s3a), sent in parts of `partBytes` as the writer goes on, so that [[complete]] sends at most the last
  * part and completes the upload.
  *
  * Why not the filesystem's own output stream: s3a sends a block only once `fs.s3a.multipart.size` is full
  * (64 MiB by default, and one setting for every write of the filesystem instance), so a delta of tens of MiB
  * went up whole at the commit (docs/benchmarks.md, the S3 grid). Parts of our own size apply to these writes
  * only.
  *
  * Requests: a blob of at most one part is one PUT at [[complete]] (`putWhole`, the filesystem's own
  * conditional PUT); the upload is started only when the part after the first begins. At most
  * [[MultipartBlobWrite.PartsInFlight]] parts are in flight: a writer that outruns the store waits for the
  * oldest, so a write holds at most one part more than that in memory. Parts go out on the uploader's own
  * threads (s3a's bounded pool), retried there as any s3a request.
  *
  * Atomicity: S3 publishes an upload only when it is completed, so nothing is visible under the name before
  * [[complete]] returns; [[abort]] aborts the upload (its parts are dropped); a writer that dies leaves an
  * unfinished upload that no listing shows (a bucket lifecycle rule removes it: docs/operations.md). Unlike
  * the single PUT, completing an upload is not conditional (Hadoop's uploader sends no `If-None-Match`);
  * names are never reused (unique IDs), so nothing relies on the server refusing a second write.
  *
  * Thread use: one writer thread, as [[BlobWrite]] says; the futures complete on the uploader's threads and
  * are only joined on the writer's.
  *
  * @param failure
  *   turns a filesystem failure into the error callers see (naming the blob and the endpoint)
  */
private[storage] final class MultipartBlobWrite(
    name: String,
    target: Path,
    partBytes: Int,
    newUploader: () => MultipartUploader,
    putWhole: (Array[Byte], Int) => Unit,
    failure: IOException => Throwable
) extends BlobWrite {
  import MultipartBlobWrite._

  private var upload: Option[Upload] = None
  private val inFlight = mutable.Queue.empty[PartInFlight]
  private val sent = new java.util.HashMap[Integer, PartHandle]()
  private var spare: List[Array[Byte]] = Nil // buffers of parts the store has acknowledged, for reuse
  private var buffer = new Array[Byte](math.min(partBytes, FirstBufferBytes))
  private var filled = 0
  private var nextPart = 1
  private var done = false

  private def checkOpen(): Unit =
    if (done) throw new IllegalStateException(s"$name is no longer being written")

  private def wrapped[T](body: => T): T =
    try body
    catch { case e: IOException => throw failure(e) }

  override val out: OutputStream = new OutputStream {
    override def write(b: Int): Unit = write(Array(b.toByte), 0, 1)
    override def write(b: Array[Byte], off: Int, len: Int): Unit = {
      checkOpen()
      var at = off
      val end = off + len
      while (at < end) {
        // a full part goes out only once a byte follows it: the last part is never empty, and a blob of
        // exactly one part stays one PUT
        if (filled == partBytes) wrapped(sendPart(isLast = false))
        if (filled == buffer.length)
          buffer = java.util.Arrays.copyOf(buffer, math.min(partBytes, buffer.length * 2))
        val n = math.min(end - at, buffer.length - filled)
        System.arraycopy(b, at, buffer, filled, n)
        filled += n
        at += n
      }
    }
    override def close(): Unit = ()
  }

  private def sendPart(isLast: Boolean): Unit = {
    val up = upload.getOrElse {
      val uploader = newUploader()
      val started = Upload(uploader, FutureIO.awaitFuture(uploader.startUpload(target)))
      upload = Some(started)
      started
    }
    while (inFlight.size >= PartsInFlight) awaitOldest()
    val part = PartInFlight(
      nextPart,
      up.uploader
        .putPart(up.handle, nextPart, isLast, target, new ByteArrayInputStream(buffer, 0, filled), filled),
      buffer
    )
    inFlight.enqueue(part)
    nextPart += 1
    buffer =
      if (isLast) null
      else
        spare match {
          case b :: rest => spare = rest; b
          case Nil       => new Array[Byte](partBytes)
        }
    filled = 0
  }

  private def awaitOldest(): Unit = {
    val part = inFlight.dequeue()
    sent.put(part.number, FutureIO.awaitFuture(part.result))
    spare = part.buffer :: spare
  }

  override def complete(): Unit = {
    checkOpen()
    done = true
    try
      wrapped(upload match {
        case None     => putWhole(buffer, filled)
        case Some(up) =>
          sendPart(isLast = true)
          while (inFlight.nonEmpty) awaitOldest()
          FutureIO.awaitFuture(up.uploader.complete(up.handle, target, sent))
          upload = None // published: nothing left to abort
          scala.util.Try(up.uploader.close())
      })
    catch { case t: Throwable => giveUp(); throw t }
    finally release()
  }

  override def abort(): Unit = if (!done) {
    done = true
    try giveUp()
    finally release()
  }

  /** Aborts the upload, if one was started, once its parts have settled (S3 may keep a part that finishes
    * after the abort, so the abort waits for them); never throws.
    */
  private def giveUp(): Unit = upload.foreach { up =>
    upload = None
    inFlight.foreach(p => scala.util.Try(FutureIO.awaitFuture(p.result)))
    inFlight.clear()
    scala.util.Try(FutureIO.awaitFuture(up.uploader.abort(up.handle, target)))
    scala.util.Try(up.uploader.close())
  }

  private def release(): Unit = { buffer = null; spare = Nil }
}

object MultipartBlobWrite {

  /** Parts sent and not yet acknowledged, per write: two keep the connection busy while the writer fills the
    * next part; more would only hold memory while the store is the limit.
    */
  val PartsInFlight = 2

  private final case class Upload(uploader: MultipartUploader, handle: UploadHandle)
  private final case class PartInFlight(
      number: Int,
      result: CompletableFuture[PartHandle],
      buffer: Array[Byte]
  )

  /** A write starts with a small buffer that grows to a part: most deltas are far smaller than a part. */
  private val FirstBufferBytes = 64 << 10
}

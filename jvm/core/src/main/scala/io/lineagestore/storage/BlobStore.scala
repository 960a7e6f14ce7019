package io.lineagestore.storage

import java.io.{Closeable, FileNotFoundException, InputStream, OutputStream}
import java.nio.ByteBuffer
import java.util.concurrent.CompletableFuture

/** A blob as a listing shows it. */
final case class BlobInfo(name: String, size: Long, modificationTimeMs: Long)

/** Thrown when a blob that must exist does not. */
class BlobNotFoundException(val location: String) extends FileNotFoundException(s"$location does not exist")

/** The remote side of one store: a flat namespace of named blobs under one root (names may contain `/`, e.g.
  * `shared/<id>.sst`). Everything lineagestore keeps remotely goes through this interface, so tests can
  * inject faults by wrapping it.
  *
  * Contract every implementation keeps:
  *   - `write` is atomic: a reader sees either no blob or the complete blob, never a prefix. If `body`
  *     throws, no blob appears under `name` (a temporary may be left for the sweeper, named as
  *     [[TemporaryBlobs]] says, never under a checkpoint name).
  *   - [[create]] is the same write held open: bytes go out as they are written, the blob appears only at
  *     [[BlobWrite.complete]], and an abort or the writer's death leaves no blob under the name.
  *   - read-after-write: once `write` returns, `open`, `exists` and `list` from any client see the blob.
  *   - blobs are immutable: lineagestore never writes the same name twice with different content, so
  *     implementations need no overwrite semantics; writing an existing name fails or is a no-op.
  *   - `delete` is idempotent: deleting a missing blob succeeds.
  *   - `list` is never on the commit path; only maintenance's orphan sweep and the tools call it.
  *   - [[openRanges]] reads what [[open]] reads, by byte ranges; stores that can serve ranges in parallel
  *     (s3a: one ranged GET per range) start each read when it is asked for.
  */
trait BlobStore {

  /** Full location of a blob, for messages. */
  def locate(name: String): String

  /** Atomically creates `name` with what `body` writes. */
  def write(name: String)(body: OutputStream => Unit): Unit

  /** Starts writing `name`, to be completed (or aborted) later by the same thread: a blob written while
    * something else runs, such as a batch's delta while the batch runs. The default holds the bytes in memory
    * and writes them with [[write]] at completion; stores that can send bytes ahead override it.
    */
  def create(name: String): BlobWrite = new BufferedBlobWrite(this, name)

  /** Opens a blob for reading; throws [[BlobNotFoundException]] if it does not exist. */
  def open(name: String): InputStream

  def exists(name: String): Boolean

  /** Size in bytes, or None if the blob does not exist. */
  def size(name: String): Option[Long]

  def delete(name: String): Unit

  /** Blobs directly under `dir` ("" for the root); an absent directory lists as empty. */
  def list(dir: String): Seq[BlobInfo]

  /** Opens a blob of known `size` for reads by byte range; throws [[BlobNotFoundException]] if it does not
    * exist (or, where existence is only learnt on the first read, fails that read with it). The default reads
    * one stream, in order.
    */
  def openRanges(name: String, size: Long): RangeReader = new SequentialRangeReader(open(name))
}

/** A blob in the making ([[BlobStore.create]]). Bytes written to [[out]] may reach the store at once, but
  * nothing is visible under the name until [[complete]] returns; [[abort]] (or the writer's death) leaves no
  * blob under the name (a store may leave a temporary, see [[TemporaryBlobs]]). Closing [[out]] neither
  * completes nor aborts. Used by one thread; after `complete` or `abort` it is done, and `abort` after
  * `complete` does nothing.
  */
trait BlobWrite {
  def out: OutputStream

  /** Publishes the blob: once this returns, the contract of [[BlobStore.write]] holds for it. */
  def complete(): Unit

  /** Gives the blob up; never throws (a failure to clean up leaves a temporary for the sweeper). */
  def abort(): Unit
}

/** [[BlobStore.create]] for stores that can only write a blob whole: the bytes wait in memory. */
private final class BufferedBlobWrite(store: BlobStore, name: String) extends BlobWrite {
  private val buffer = new java.io.ByteArrayOutputStream()
  private var done = false
  override val out: OutputStream = new java.io.FilterOutputStream(buffer) {
    override def write(b: Array[Byte], off: Int, len: Int): Unit = {
      if (done) throw new IllegalStateException(s"$name is no longer being written")
      buffer.write(b, off, len)
    }
    override def close(): Unit = ()
  }
  override def complete(): Unit = {
    if (done) throw new IllegalStateException(s"$name is no longer being written")
    done = true
    store.write(name)(o => buffer.writeTo(o))
  }
  override def abort(): Unit = done = true
}

/** Reads of one blob by byte range. Ranges are asked for in increasing, non-overlapping order; each future
  * completes with a buffer of exactly `length` bytes (position 0), or fails: `EOFException` if the blob is
  * shorter, otherwise with the store's error. Closing abandons reads still in flight.
  */
trait RangeReader extends Closeable {
  def read(offset: Long, length: Int): CompletableFuture[ByteBuffer]
}

/** A [[RangeReader]] over one sequential stream: each range is read when asked for, in the caller's thread.
  */
final class SequentialRangeReader(in: InputStream) extends RangeReader {
  private var position = 0L

  override def read(offset: Long, length: Int): CompletableFuture[ByteBuffer] = {
    require(offset >= position, s"ranges must be asked for in increasing order ($offset < $position)")
    in.skipNBytes(offset - position)
    val bytes = in.readNBytes(length)
    position = offset + bytes.length
    if (bytes.length < length)
      CompletableFuture.failedFuture(
        new java.io.EOFException(s"blob ends at $position, before ${offset + length}")
      )
    else CompletableFuture.completedFuture(ByteBuffer.wrap(bytes))
  }

  override def close(): Unit = in.close()
}

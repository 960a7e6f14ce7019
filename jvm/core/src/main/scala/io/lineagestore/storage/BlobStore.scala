package io.lineagestore.storage

import java.io.{FileNotFoundException, InputStream, OutputStream}

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
  *     throws, no blob appears under `name` (a temporary may be left for the sweeper, never under a
  *     checkpoint name).
  *   - read-after-write: once `write` returns, `open`, `exists` and `list` from any client see the blob.
  *   - blobs are immutable: lineagestore never writes the same name twice with different content, so
  *     implementations need no overwrite semantics; writing an existing name fails or is a no-op.
  *   - `delete` is idempotent: deleting a missing blob succeeds.
  *   - `list` is never on the commit path; only maintenance's orphan sweep and the tools call it.
  */
trait BlobStore {

  /** Full location of a blob, for messages. */
  def locate(name: String): String

  /** Atomically creates `name` with what `body` writes. */
  def write(name: String)(body: OutputStream => Unit): Unit

  /** Opens a blob for reading; throws [[BlobNotFoundException]] if it does not exist. */
  def open(name: String): InputStream

  def exists(name: String): Boolean

  /** Size in bytes, or None if the blob does not exist. */
  def size(name: String): Option[Long]

  def delete(name: String): Unit

  /** Blobs directly under `dir` ("" for the root); an absent directory lists as empty. */
  def list(dir: String): Seq[BlobInfo]
}

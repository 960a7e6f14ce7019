package io.lineagestore.store

import scala.collection.mutable

/** The shared blobs of one store that no snapshot references, as far as this store knows: blobs its uploads
  * wrote whose zip is not written yet (an upload in flight, or one that failed: crash leftovers), and those
  * the last orphan sweep listed that are still inside the grace period (including uploads of other
  * processes). A gauge for operators: it should stay near the number of files of one upload, and a steady
  * rise means uploads keep failing. Thread-safe.
  */
final class PendingBlobs {
  private val blobs = mutable.Set.empty[String]

  def written(blob: String): Unit = synchronized(blobs += blob)
  def referenced(by: Iterable[String]): Unit = synchronized(blobs --= by)
  def deleted(blob: String): Unit = synchronized(blobs -= blob)

  /** A sweep listed every blob: what it found unreferenced and young is the whole pending set. */
  def swept(unreferenced: Set[String]): Unit = synchronized { blobs.clear(); blobs ++= unreferenced }

  def count: Int = synchronized(blobs.size)
}

package io.lineagestore.storage

import java.util.UUID

/** How a store that cannot write a blob in place names the file it writes first and renames once complete:
  * `.<name>.<uuid>.tmp`, beside the blob. A writer that dies leaves it behind; the orphan sweep recognises it
  * by this name and deletes it once it is old enough (io.lineagestore.lineage.CleanupPlanner). Hidden (a
  * leading dot), so Hadoop's and Spark's listings skip it.
  */
object TemporaryBlobs {
  private val Pattern = """^\.(.+)\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.tmp$""".r

  /** A fresh temporary file name (last path element) for the blob file named `fileName`. */
  def nameFor(fileName: String): String = s".$fileName.${UUID.randomUUID()}.tmp"

  /** The blob file name a temporary was written for, if `fileName` is one. */
  def target(fileName: String): Option[String] = fileName match {
    case Pattern(target) => Some(target)
    case _               => None
  }
}

package io.lineagestore.lineage

import java.util.UUID

/** One checkpoint of one store: the state after committing `version`, written by the attempt that drew
  * `uniqueId`. Two attempts of the same batch have the same version and different unique IDs, and both stay
  * loadable by their own ID.
  *
  * Invariants: version >= 0; version 0 is the empty state and is the only checkpoint without a unique ID (it
  * has no files); a unique ID is non-empty and made of [A-Za-z0-9-] only, so it can never smuggle a path
  * separator or a `_` into a file name.
  */
final case class CheckpointId(version: Long, uniqueId: String) {
  require(version >= 0, s"checkpoint version must be >= 0, got $version")
  require(
    (version == 0 && uniqueId.isEmpty) || CheckpointId.isValidUniqueId(uniqueId),
    s"invalid unique ID '$uniqueId' for version $version: expected [A-Za-z0-9-]{1,64}"
  )

  def isEmptyState: Boolean = version == 0

  /** Name of the changelog file this checkpoint's commit wrote. */
  def deltaFileName: String = s"${version}_$uniqueId.delta"

  /** Name of the snapshot file maintenance writes for this checkpoint. */
  def snapshotFileName: String = s"${version}_$uniqueId.zip"

  override def toString: String = if (isEmptyState) "0 (empty)" else s"${version}_$uniqueId"
}

object CheckpointId {
  val Empty: CheckpointId = CheckpointId(0L, "")

  private val UniqueIdPattern = "[A-Za-z0-9-]{1,64}".r
  private val FileNamePattern = """(\d{1,19})_([A-Za-z0-9-]{1,64})\.(delta|zip)""".r

  def isValidUniqueId(id: String): Boolean = UniqueIdPattern.matches(id)

  def newUniqueId(): String = UUID.randomUUID().toString

  /** Kind of a checkpoint file, as told by its name. */
  sealed trait FileKind
  case object Delta extends FileKind
  case object Snapshot extends FileKind

  /** Parses `<version>_<uniqueId>.delta|zip`; None for any other name. */
  def parseFileName(name: String): Option[(CheckpointId, FileKind)] = name match {
    case FileNamePattern(v, id, ext) =>
      scala.util.Try(v.toLong).toOption.filter(_ > 0).map { version =>
        (CheckpointId(version, id), if (ext == "delta") Delta else Snapshot)
      }
    case _ => None
  }
}

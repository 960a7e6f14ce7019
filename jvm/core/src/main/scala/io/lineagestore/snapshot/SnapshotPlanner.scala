package io.lineagestore.snapshot

import io.lineagestore.format.{FileIdentity, SnapshotFile, SnapshotIndex}

/** A file of a local RocksDB checkpoint; `identity` ([[io.lineagestore.format.FileIdentity]]) when already
  * known for this exact file.
  */
final case class LocalFile(name: String, size: Long, identity: Option[String])

/** What to do with one file when taking a snapshot. */
sealed trait UploadDecision { def file: LocalFile }
object UploadDecision {

  /** Small mutable file (CURRENT, MANIFEST, OPTIONS): travels inside the zip. */
  final case class Inline(file: LocalFile) extends UploadDecision

  /** Same content already stored in a blob a committed snapshot references: reference it, move no bytes. */
  final case class Reuse(file: LocalFile, existing: SnapshotFile) extends UploadDecision

  /** New content: upload to a new shared blob (its identity read first, or hashed while it streams). */
  final case class Upload(file: LocalFile) extends UploadDecision

  /** Name and size match `like`, a file of the base, but its identity is unknown, or known in the other kind
    * than `like`'s (content hash or SST ID): compute it locally in `like`'s kind, then decide.
    */
  final case class IdentifyFirst(file: LocalFile, like: SnapshotFile) extends UploadDecision
}

/** What to do with one file when restoring a snapshot into a local directory. */
final case class DownloadPlan(
    keep: Seq[SnapshotFile], // already present locally with the same content
    download: Seq[SnapshotFile], // shared blobs to fetch
    inline: Seq[SnapshotFile], // small files to extract from the zip
    removeLocal: Seq[String] // local files the snapshot does not have (or has with other content)
)

/** Pure planning of snapshot uploads and restores: functions of data, no I/O. A file is known by its identity
  * (its content's SHA-256 or RocksDB's unique ID of an SST), never by name + size: RocksDB reuses file
  * numbers across instances, and trusting name + size is what produced Spark's "Mismatch in unique ID on
  * table file" corruptions.
  */
object SnapshotPlanner {

  /** SST files are immutable and shared between snapshots; everything else is small and travels inline. */
  def isShared(name: String): Boolean = name.endsWith(".sst")

  /** Decides each file of a frozen checkpoint against `base`, the last snapshot whose upload completed (never
    * one in flight).
    */
  def planUpload(files: Seq[LocalFile], base: Option[SnapshotIndex]): Seq[UploadDecision] = {
    val baseByHash =
      base.toSeq.flatMap(_.files).filter(_.blob.isDefined).map(f => (f.identity, f.size) -> f).toMap
    val baseByNameSize =
      base.toSeq.flatMap(_.files).filter(_.blob.isDefined).map(f => (f.name, f.size) -> f).toMap
    files.map { f =>
      if (!isShared(f.name)) UploadDecision.Inline(f)
      else
        f.identity.flatMap(h => baseByHash.get((h, f.size))) match {
          case Some(existing) => UploadDecision.Reuse(f, existing)
          case None           =>
            // an identity of the other kind says nothing about this entry: identify the file as it is
            baseByNameSize
              .get((f.name, f.size))
              .filter(like =>
                f.identity.forall(h => FileIdentity.isSst(h) != FileIdentity.isSst(like.identity))
              )
              .map(UploadDecision.IdentifyFirst(f, _))
              .getOrElse(UploadDecision.Upload(f))
        }
    }
  }

  /** Plans a restore of `index` into a directory holding `local` files (identity known where it is). */
  def planDownload(index: SnapshotIndex, local: Seq[LocalFile]): DownloadPlan = {
    val localByName = local.map(f => f.name -> f).toMap
    val (shared, inline) = index.files.partition(_.blob.isDefined)
    val (keep, download) = shared.partition { f =>
      localByName.get(f.name).exists(l => l.size == f.size && l.identity.contains(f.identity))
    }
    val keepNames = keep.map(_.name).toSet
    DownloadPlan(keep, download, inline, local.map(_.name).filterNot(keepNames))
  }

  /** Local files worth identifying before a restore, each with the file of `index` it may be: same name and
    * size as a shared file of `index`, identity not yet known (a directory left by an earlier provider).
    * Reading the local disk is far cheaper than a download.
    */
  def toIdentifyBeforeDownload(
      index: SnapshotIndex,
      local: Seq[LocalFile]
  ): Seq[(LocalFile, SnapshotFile)] = {
    val wanted = index.files.filter(_.blob.isDefined).map(f => (f.name, f.size) -> f).toMap
    local.filter(_.identity.isEmpty).flatMap(l => wanted.get((l.name, l.size)).map(l -> _))
  }
}

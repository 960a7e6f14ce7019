package io.lineagestore.snapshot

import io.lineagestore.format.{SnapshotFile, SnapshotIndex}

/** A file of a local RocksDB checkpoint; `sha256` when already known for this exact file. */
final case class LocalFile(name: String, size: Long, sha256: Option[String])

/** What to do with one file when taking a snapshot. */
sealed trait UploadDecision { def file: LocalFile }
object UploadDecision {

  /** Small mutable file (CURRENT, MANIFEST, OPTIONS): travels inside the zip. */
  final case class Inline(file: LocalFile) extends UploadDecision

  /** Same content already stored in a blob a committed snapshot references: reference it, move no bytes. */
  final case class Reuse(file: LocalFile, existing: SnapshotFile) extends UploadDecision

  /** New content: upload to a new shared blob, hashing while it streams. */
  final case class Upload(file: LocalFile) extends UploadDecision

  /** Name and size match a file of the base but the content hash is unknown: hash locally, then decide. */
  final case class HashFirst(file: LocalFile) extends UploadDecision
}

/** What to do with one file when restoring a snapshot into a local directory. */
final case class DownloadPlan(
    keep: Seq[SnapshotFile], // already present locally with the same content
    download: Seq[SnapshotFile], // shared blobs to fetch
    inline: Seq[SnapshotFile], // small files to extract from the zip
    removeLocal: Seq[String] // local files the snapshot does not have (or has with other content)
)

/** Pure planning of snapshot uploads and restores: functions of data, no I/O. File identity is content
  * (SHA-256), never name + size: RocksDB reuses file numbers across instances, and trusting name + size is
  * what produced Spark's "Mismatch in unique ID on table file" corruptions.
  */
object SnapshotPlanner {

  /** SST files are immutable and shared between snapshots; everything else is small and travels inline. */
  def isShared(name: String): Boolean = name.endsWith(".sst")

  /** Decides each file of a frozen checkpoint against `base`, the last snapshot whose upload completed (never
    * one in flight).
    */
  def planUpload(files: Seq[LocalFile], base: Option[SnapshotIndex]): Seq[UploadDecision] = {
    val baseByHash =
      base.toSeq.flatMap(_.files).filter(_.blob.isDefined).map(f => (f.sha256, f.size) -> f).toMap
    val baseByNameSize = base.toSeq.flatMap(_.files).map(f => (f.name, f.size)).toSet
    files.map { f =>
      if (!isShared(f.name)) UploadDecision.Inline(f)
      else
        f.sha256 match {
          case Some(h) =>
            baseByHash.get((h, f.size)).map(UploadDecision.Reuse(f, _)).getOrElse(UploadDecision.Upload(f))
          case None if baseByNameSize.contains((f.name, f.size)) => UploadDecision.HashFirst(f)
          case None                                              => UploadDecision.Upload(f)
        }
    }
  }

  /** Plans a restore of `index` into a directory holding `local` files (hash known where it is). */
  def planDownload(index: SnapshotIndex, local: Seq[LocalFile]): DownloadPlan = {
    val localByName = local.map(f => f.name -> f).toMap
    val (shared, inline) = index.files.partition(_.blob.isDefined)
    val (keep, download) = shared.partition { f =>
      localByName.get(f.name).exists(l => l.size == f.size && l.sha256.contains(f.sha256))
    }
    val keepNames = keep.map(_.name).toSet
    DownloadPlan(keep, download, inline, local.map(_.name).filterNot(keepNames))
  }

  /** Local files worth hashing before a restore: same name and size as a shared file of `index`, content not
    * yet known (a directory left by an earlier provider). Reading the local disk is far cheaper than a
    * download.
    */
  def toHashBeforeDownload(index: SnapshotIndex, local: Seq[LocalFile]): Seq[LocalFile] = {
    val wanted = index.files.filter(_.blob.isDefined).map(f => (f.name, f.size)).toSet
    local.filter(l => l.sha256.isEmpty && wanted((l.name, l.size)))
  }
}

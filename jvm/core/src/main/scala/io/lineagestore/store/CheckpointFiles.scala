package io.lineagestore.store

import java.io._
import java.nio.ByteBuffer
import java.nio.channels.FileChannel
import java.nio.file.{Files, StandardCopyOption, StandardOpenOption}
import java.util.UUID
import java.util.concurrent.{CompletableFuture, ExecutionException, ExecutorService}

import scala.collection.mutable

import io.lineagestore.format._
import io.lineagestore.lineage.{CheckpointFile, CheckpointId, Lineage, LineageSource, TemporaryFile}
import io.lineagestore.snapshot.{LocalFile, RangedDownload, SnapshotPlanner, UploadDecision}
import io.lineagestore.storage.{BlobNotFoundException, BlobStore, RangeReader, TemporaryBlobs}

/** Byte and file counts of one transfer, for metrics. */
final case class TransferStats(
    filesMoved: Int = 0,
    bytesMoved: Long = 0,
    filesReused: Int = 0,
    bytesReused: Long = 0
) {
  def +(o: TransferStats): TransferStats =
    TransferStats(
      filesMoved + o.filesMoved,
      bytesMoved + o.bytesMoved,
      filesReused + o.filesReused,
      bytesReused + o.bytesReused
    )
}

/** Executes the remote side of one store's checkpoints: writes and reads delta files, uploads and restores
  * snapshots, deletes files, in the on-storage format of [[io.lineagestore.format]] (docs/format.md). It
  * decides nothing: what to upload, download or delete comes from the pure planners ([[SnapshotPlanner]],
  * [[io.lineagestore.lineage.CleanupPlanner]], [[io.lineagestore.lineage.LineageResolver]]).
  *
  * Thread-safe: it holds no state of its own beyond what it is given; transfers run on `transferPool`.
  */
final class CheckpointFiles(
    val blobs: BlobStore,
    val store: StoreIdentity,
    transferPool: ExecutorService,
    ranged: RangedDownload = RangedDownload.Default,
    checkIdentityOnDownload: Boolean = false,
    localDeltas: Option[LocalDeltaCopies] = None
) extends LineageSource {
  import SnapshotZip.{sharedPath, SharedDir}

  // ---- deltas ---------------------------------------------------------------------------------------------

  /** Writes `<id>.delta` atomically: header with lineage, then the records. With `fromEmpty` the records must
    * be the checkpoint's complete state and `ancestors` empty (see [[DeltaHeader.fromEmpty]]).
    */
  def writeDelta(
      id: CheckpointId,
      ancestors: Seq[CheckpointId],
      codec: DeltaCodec = DeltaCodec.Default,
      fromEmpty: Boolean = false,
      merges: Boolean = false
  )(
      records: DeltaFile.Writer => Unit
  ): Long = {
    var count = 0L
    blobs.write(id.deltaFileName) { out =>
      val w = new DeltaFile.Writer(out, DeltaHeader(store, id, ancestors, fromEmpty), codec, merges)
      records(w)
      count = w.recordCount
      w.close()
    }
    count
  }

  /** Starts `<id>.delta` for records made while its batch runs: the header goes to the blob store now and the
    * records as the codec fills its blocks, so the commit only ends the file. Nothing appears under the name
    * before [[DeltaInProgress.finish]]; [[DeltaInProgress.abort]] (or the writer's death) leaves no delta, at
    * most a temporary the orphan sweep deletes. Plain puts and deletes only (format version 2 or 3): merge
    * records need key order, which only the commit knows.
    */
  def startDelta(
      id: CheckpointId,
      ancestors: Seq[CheckpointId],
      fromEmpty: Boolean,
      codec: DeltaCodec
  ): DeltaInProgress = {
    val header = DeltaHeader(store, id, ancestors, fromEmpty)
    val blob = blobs.create(id.deltaFileName)
    try new DeltaInProgress(header, blob, new DeltaFile.Writer(blob.out, header, codec))
    catch { case t: Throwable => blob.abort(); throw t }
  }

  override def ancestorsOf(id: CheckpointId): Option[Seq[CheckpointId]] = lineageOf(id).map(_.ancestors)

  override def lineageOf(id: CheckpointId): Option[Lineage] = {
    val in =
      try blobs.open(id.deltaFileName)
      catch { case _: BlobNotFoundException => return None }
    try {
      val h = DeltaFile.readHeader(in, blobs.locate(id.deltaFileName), store, id)
      Some(Lineage(h.ancestors, h.fromEmpty))
    } finally in.close()
  }

  override def hasSnapshot(id: CheckpointId): Boolean = blobs.exists(id.snapshotFileName)

  override def locate(name: String): String = blobs.locate(name)

  /** Streams a verified delta into `onRecord`; see [[DeltaFile.read]] for the staging contract. From its
    * local copy where `localDeltas` holds one that verifies (a standby's, [[LocalDeltaCopies]]), else from
    * storage.
    */
  def readDelta(
      id: CheckpointId
  )(onRecord: (DeltaRecordKind, Array[Byte], Array[Byte]) => Unit): DeltaHeader =
    localDeltas.flatMap(_.read(id, store)(onRecord)).getOrElse(readStoredDelta(id)(onRecord))

  private def readStoredDelta(
      id: CheckpointId
  )(onRecord: (DeltaRecordKind, Array[Byte], Array[Byte]) => Unit): DeltaHeader = {
    val name = id.deltaFileName
    val in =
      try blobs.open(name)
      catch {
        case e: BlobNotFoundException =>
          throw new CorruptCheckpointFileException(blobs.locate(name), "it is missing", e)
      }
    try DeltaFile.read(in, blobs.locate(name), store, id)(onRecord)
    finally in.close()
  }

  // ---- snapshots ------------------------------------------------------------------------------------------

  /** Uploads the frozen RocksDB checkpoint in `dir` as snapshot `id`, reusing every shared blob of `base`
    * that holds identical content, uploading the rest in parallel, and writing the zip last. `knownHashes`
    * gives the identities ([[FileIdentity]]) of files already known (name -> (size, identity)) and receives
    * those found here: a new SST's RocksDB ID where it has one, else its content's SHA-256. `blobWritten`
    * hears of each new shared blob once it is written (pending until the zip is).
    */
  def uploadSnapshot(
      id: CheckpointId,
      ancestors: Seq[CheckpointId],
      dir: File,
      base: Option[SnapshotIndex],
      knownHashes: HashCache,
      blobWritten: String => Unit = _ => (),
      afterBlobs: () => Unit = () => ()
  ): (SnapshotIndex, TransferStats) = {
    val localFiles = Option(dir.listFiles()).getOrElse(Array.empty[File]).filter(_.isFile).sortBy(_.getName)
    def local(f: File): LocalFile = {
      LocalFile(f.getName, f.length(), knownHashes.get(f.getName, f.length()))
    }
    val byName = localFiles.map(f => f.getName -> f).toMap
    val first = SnapshotPlanner.planUpload(localFiles.toSeq.map(local), base)
    // files matching the base by name and size get identified locally (as the base's file is), then decided
    // again
    val decisions = first.map {
      case UploadDecision.IdentifyFirst(f, like) =>
        FileIdentity.ofFileAs(like.identity, byName(f.name)) match {
          case Some(h) =>
            knownHashes.put(f.name, f.size, h)
            SnapshotPlanner.planUpload(Seq(f.copy(identity = Some(h))), base).head
          case None => UploadDecision.Upload(f)
        }
      case d => d
    }
    val uploads = decisions.collect { case UploadDecision.Upload(f) =>
      () => {
        val blob = SnapshotZip.newBlobName()
        val sstId = FileIdentity.ofNewSst(byName(f.name))
        val hashes = new ContentHashes(withSha256 = sstId.isEmpty)
        blobs.write(sharedPath(blob)) { out =>
          val in = new FileInputStream(byName(f.name))
          try ContentHashes.pump(in) { (buf, n) => hashes.update(buf, 0, n); out.write(buf, 0, n) }
          finally in.close()
        }
        blobWritten(blob)
        val h = sstId.getOrElse(FileIdentity.ofContent(hashes.sha256))
        knownHashes.put(f.name, f.size, h)
        SnapshotFile(f.name, f.size, h, Some(blob), Some(hashes.crc32c))
      }
    }
    val uploaded = PoolTasks.runAll(transferPool, uploads)
    val inline = decisions.collect { case UploadDecision.Inline(f) =>
      val hashes = ContentHashes.of(byName(f.name))
      SnapshotFile(f.name, f.size, hashes.sha256, None, Some(hashes.crc32c))
    }
    val reused = decisions.collect { case UploadDecision.Reuse(f, existing) =>
      // a base written by schema 1 has no CRC32C; the local file holds the same bytes (same identity)
      val crc = existing.crc32c.getOrElse(ContentHashes.crc32cOf(byName(f.name)))
      SnapshotFile(f.name, f.size, existing.identity, existing.blob, Some(crc))
    }
    val index = SnapshotIndex(store, id, ancestors, (uploaded ++ inline ++ reused).sortBy(_.name))
    afterBlobs()
    blobs.write(id.snapshotFileName)(out => SnapshotZip.write(out, index, byName))
    val stats = TransferStats(
      filesMoved = uploaded.size + inline.size,
      bytesMoved = (uploaded ++ inline).map(_.size).sum,
      filesReused = reused.size,
      bytesReused = reused.map(_.size).sum
    )
    (index, stats)
  }

  /** Reads and verifies only the INDEX of snapshot `id`. */
  def readSnapshotIndex(id: CheckpointId): SnapshotIndex = {
    val zip = new SnapshotZip.Reader(openSnapshot(id), blobs.locate(id.snapshotFileName), store, id)
    try zip.index
    finally zip.close()
  }

  /** Restores snapshot `id` into `target` (a closed RocksDB directory): keeps local files whose content the
    * snapshot has, downloads the missing shared blobs in parallel verifying each checksum as it streams,
    * extracts the small files, removes everything else, and checks the directory it built against the index
    * ([[LocalCopyCheck]]). Every failure of a file read (damaged, truncated, foreign, missing) is a
    * [[CorruptCheckpointFileException]] naming that file; a directory that does not match is one naming the
    * zip. `knownHashes` describes the files now in `target` and is replaced by the snapshot's files on
    * success.
    */
  def restoreSnapshot(
      id: CheckpointId,
      target: File,
      knownHashes: HashCache
  ): (SnapshotIndex, TransferStats) = {
    val location = blobs.locate(id.snapshotFileName)
    val zip = new SnapshotZip.Reader(openSnapshot(id), location, store, id)
    try {
      val index = zip.index
      Files.createDirectories(target.toPath)
      val listed = Option(target.listFiles()).getOrElse(Array.empty[File]).filter(_.isFile).toSeq.map { f =>
        LocalFile(f.getName, f.length(), knownHashes.get(f.getName, f.length()))
      }
      val identified = SnapshotPlanner
        .toIdentifyBeforeDownload(index, listed)
        .map { case (f, like) => () => f.copy(identity = identifyLocal(new File(target, f.name), like)) }
      val identifiedByName = PoolTasks.runAll(transferPool, identified).map(f => f.name -> f).toMap
      val localFiles = listed.map(f => identifiedByName.getOrElse(f.name, f))
      val plan = SnapshotPlanner.planDownload(index, localFiles)
      plan.removeLocal.foreach(n => Files.deleteIfExists(new File(target, n).toPath))
      PoolTasks.runAll(transferPool, plan.download.map(f => () => download(f, new File(target, f.name))))
      zip.foreachInline((f, in) => writeVerified(in, new File(target, f.name), f, location))
      LocalCopyCheck.verify(index, target, location)
      knownHashes.replaceAll(index.files.map(f => f.name -> (f.size, f.identity)).toMap)
      val moved = plan.download ++ plan.inline
      (index, TransferStats(moved.size, moved.map(_.size).sum, plan.keep.size, plan.keep.map(_.size).sum))
    } finally zip.close()
  }

  /** The identity of `local`, a file of unknown content, of `like`'s kind, to keep it in `like`'s place. An
    * SST's ID vouches for bytes RocksDB wrote, not for the disk that kept them since: such a file is kept
    * only if its CRC32C matches `like`'s too, as a download would be checked (a content hash reads every byte
    * anyway).
    */
  private def identifyLocal(local: File, like: SnapshotFile): Option[String] =
    FileIdentity.ofFileAs(like.identity, local).filter { h =>
      !FileIdentity.isSst(h) || like.crc32c.contains(ContentHashes.crc32cOf(local))
    }

  private def openSnapshot(id: CheckpointId): InputStream =
    try blobs.open(id.snapshotFileName)
    catch {
      case e: BlobNotFoundException =>
        throw new CorruptCheckpointFileException(blobs.locate(id.snapshotFileName), "it is missing", e)
    }

  private def download(f: SnapshotFile, dest: File): Unit = {
    val blob = sharedPath(f.blob.get)
    def missing(e: BlobNotFoundException) =
      new CorruptCheckpointFileException(blobs.locate(blob), s"it is missing (needed for ${f.name})", e)
    val parts = ranged.parts(f.size)
    if (parts.nonEmpty) {
      val reader =
        try blobs.openRanges(blob, f.size)
        catch { case e: BlobNotFoundException => throw missing(e) }
      try Corrupt.guard(blobs.locate(blob))(downloadRanges(reader, parts, dest, f, blobs.locate(blob)))
      catch { case e: BlobNotFoundException => throw missing(e) }
      finally reader.close()
    } else {
      val in =
        try blobs.open(blob)
        catch { case e: BlobNotFoundException => throw missing(e) }
      try Corrupt.guard(blobs.locate(blob))(writeVerified(in, dest, f, blobs.locate(blob)))
      finally in.close()
    }
  }

  /** Reads `parts` with up to `ranged.window` in flight, and checksums and writes each in order as it
    * arrives: the same checks as [[writeVerified]], the file's bytes read once.
    */
  private def downloadRanges(
      reader: RangeReader,
      parts: Seq[(Long, Int)],
      dest: File,
      f: SnapshotFile,
      location: String
  ): Unit = {
    val tmp = new File(dest.getParentFile, s".${dest.getName}.${UUID.randomUUID()}.tmp")
    val check = new DownloadCheck(f, checkIdentityOnDownload)
    val inFlight = mutable.Queue.empty[(Long, Int, CompletableFuture[ByteBuffer])]
    var next = 0
    def askMore(): Unit = while (next < parts.size && inFlight.size < ranged.window) {
      val (offset, length) = parts(next)
      inFlight.enqueue((offset, length, reader.read(offset, length)))
      next += 1
    }
    try {
      val out = FileChannel.open(tmp.toPath, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)
      try {
        askMore()
        while (inFlight.nonEmpty) {
          val (offset, length, pending) = inFlight.dequeue()
          val data =
            try pending.get()
            catch { case e: ExecutionException => throw Option(e.getCause).getOrElse(e) }
          askMore()
          if (data.remaining != length) Corrupt(location, s"range at $offset came back short")
          check.update(data)
          var at = offset
          while (data.hasRemaining) at += out.write(data, at)
        }
      } finally out.close()
    } catch {
      case e: EOFException =>
        tmp.delete()
        Corrupt(location, s"it is shorter than the ${f.size} bytes its index gives for ${f.name}")
      case t: Throwable => tmp.delete(); throw t
    }
    if (!check.matches || !check.matchesWritten(tmp)) {
      tmp.delete()
      Corrupt(location, s"content of ${f.name} does not match its index (${check.checksumName})")
    }
    Files.move(tmp.toPath, dest.toPath, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE)
  }

  /** Copies `in` to `dest` through a temporary file, checking size and checksum on the fly
    * ([[DownloadCheck]]).
    */
  private def writeVerified(in: InputStream, dest: File, f: SnapshotFile, location: String): Unit = {
    val tmp = new File(dest.getParentFile, s".${dest.getName}.${UUID.randomUUID()}.tmp")
    val check = new DownloadCheck(f, checkIdentityOnDownload)
    try {
      val out = new FileOutputStream(tmp)
      try ContentHashes.pump(in) { (buf, n) => check.update(buf, 0, n); out.write(buf, 0, n) }
      finally out.close()
    } catch { case t: Throwable => tmp.delete(); throw t }
    if (!check.matches || !check.matchesWritten(tmp)) {
      tmp.delete()
      Corrupt(
        location,
        s"content of ${f.name} does not match its index (size ${check.bytesSeen} vs ${f.size}, ${check.checksumName})"
      )
    }
    Files.move(tmp.toPath, dest.toPath, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE)
  }

  // ---- listing and deletion (maintenance only) ------------------------------------------------------------

  /** Checkpoint files of this store, by listing: only the orphan sweep and tools call this. */
  def listCheckpointFiles(): Seq[CheckpointFile] = listRoot()._1

  /** The store directory's checkpoint files and temporaries of unfinished writes, from one listing. */
  def listRoot(): (Seq[CheckpointFile], Seq[TemporaryFile]) = {
    def checkpointFile(name: String) =
      CheckpointId.parseFileName(name).map { case (id, k) => CheckpointFile(id, k) }
    val listed = blobs.list("")
    val temporaries = listed.flatMap { b =>
      TemporaryBlobs
        .target(b.name)
        .map(t => TemporaryFile(b.name, b.size, b.modificationTimeMs, checkpointFile(t)))
    }
    (listed.flatMap(b => checkpointFile(b.name)), temporaries)
  }

  /** Blobs of the shared area, named as snapshot indexes name them (without the directory). */
  def listSharedBlobs(): Seq[io.lineagestore.storage.BlobInfo] =
    blobs.list(SharedDir).map(b => b.copy(name = b.name.stripPrefix(SharedDir + "/")))

  def deleteCheckpointFile(f: CheckpointFile): Unit = blobs.delete(f.name)

  def deleteSharedBlob(blob: String): Unit = blobs.delete(sharedPath(blob))
}

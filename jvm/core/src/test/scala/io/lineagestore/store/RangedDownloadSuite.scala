package io.lineagestore.store

import java.io.{File, RandomAccessFile}
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files
import java.util.concurrent.Executors
import java.util.zip.CRC32C

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.scalatest.BeforeAndAfterEach
import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.config.LineageConf
import io.lineagestore.format.{ContentHashes, SnapshotZip, Hex}
import io.lineagestore.format.{CorruptCheckpointFileException, SnapshotIndex, StoreIdentity}
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.snapshot.RangedDownload
import io.lineagestore.storage.HadoopBlobStore

/** Large snapshot files restored as parallel byte ranges (vectored reads), checked as they arrive: the
  * planning of the ranges, and restores through a real RocksDB and a real local Hadoop filesystem with parts
  * small enough that every SST is read in many ranges.
  */
class RangedDownloadSuite extends AnyFunSuite with BeforeAndAfterEach {
  private var tmp: File = _
  private val pool = Executors.newFixedThreadPool(4)
  private val D = ColumnFamilies.DefaultId
  private val small = RangedDownload(minBytes = 1, partBytes = 4096, window = 3)

  override def beforeEach(): Unit = tmp = Files.createTempDirectory("lineagestore-ranged").toFile
  override def afterEach(): Unit = LocalDirectories.deleteRecursively(tmp)

  private def files(ranged: RangedDownload) = new CheckpointFiles(
    new HadoopBlobStore(
      new Path(new File(tmp, "remote").toURI),
      new Configuration(),
      LineageConf.DeltaUploadPartBytes.default
    ),
    StoreIdentity(0, 0, "default"),
    pool,
    ranged
  )
  private def store(ranged: RangedDownload = small) =
    new LineageStore(
      files(ranged),
      Files.createTempDirectory(tmp.toPath, "local").toFile,
      StoreSettings.Default
    )
  private def contents(s: LineageStore): Map[String, String] = {
    val it = s.scan(D, Array.emptyByteArray, null)
    try it.map { case (k, v) => new String(k, UTF_8) -> new String(v, UTF_8) }.toMap
    finally it.close()
  }

  /** A store with a snapshot of ~200 KiB of random values; its head and contents. */
  private def snapshotted(): (CheckpointId, Map[String, String]) = {
    val s = store(RangedDownload.Off)
    try {
      s.load(CheckpointId.Empty)
      val rnd = new scala.util.Random(3)
      (1 to 2000).foreach(i =>
        s.put(D, s"k$i".getBytes(UTF_8), rnd.alphanumeric.take(100).mkString.getBytes(UTF_8))
      )
      val head = s.commit()
      s.freezeNow()
      s.uploadSnapshots()
      (head, contents(s))
    } finally s.close()
  }

  /** Deletes every delta, so that the snapshot is the only route to its checkpoint: a damaged snapshot then
    * fails the load by name instead of being routed around (a detour through the deltas).
    */
  private def onlyTheSnapshotRebuildsIt(): Unit =
    Option(new File(tmp, "remote").listFiles())
      .getOrElse(Array.empty[File])
      .filter { f =>
        f.getName.endsWith(".delta") || f.getName.endsWith(".delta.crc")
      }
      .foreach(f => Files.delete(f.toPath))

  private def largestBlob(head: CheckpointId): (File, Long) = {
    val f = files(small).readSnapshotIndex(head).files.filter(_.blob.isDefined).maxBy(_.size)
    (new File(new File(tmp, "remote"), SnapshotZip.sharedPath(f.blob.get)), f.size)
  }

  test("ranges: none below the threshold or within one part; otherwise contiguous parts covering the file") {
    val r = RangedDownload(minBytes = 100, partBytes = 40, window = 2)
    assert(r.parts(99).isEmpty)
    assert(RangedDownload(minBytes = 1, partBytes = 40).parts(40).isEmpty)
    assert(r.parts(100) == Seq(0L -> 40, 40L -> 40, 80L -> 20))
    assert(r.parts(120) == Seq(0L -> 40, 40L -> 40, 80L -> 40))
    val big = RangedDownload().parts(300L << 20)
    assert(big.size == 38 && big.map(_._2.toLong).sum == (300L << 20))
    assert(big.zip(big.tail).forall { case ((o, l), (n, _)) => o + l == n })
    assert(RangedDownload.Off.parts(Long.MaxValue / 2).isEmpty)
    assert(RangedDownload.withPartBytes(0) == RangedDownload.Off)
    assert(RangedDownload.withPartBytes(8L << 20) == RangedDownload.Default)
    intercept[IllegalArgumentException](RangedDownload(partBytes = 0))
  }

  test("a restore in ranges gives the same state as one in streams") {
    val (head, expected) = snapshotted()
    val (_, size) = largestBlob(head)
    assert(size > 4 * 4096, s"the largest SST ($size bytes) must span several ranges")
    val s = store()
    try {
      s.load(head)
      assert(s.counters.filesDownloaded.get > 0)
      assert(contents(s) == expected)
    } finally s.close()
  }

  test("a range whose bytes changed, a truncated blob and a missing one fail the restore by name") {
    val (head, _) = snapshotted()
    val (blob, size) = largestBlob(head)
    val good = Files.readAllBytes(blob.toPath)
    onlyTheSnapshotRebuildsIt()
    def failure(): CorruptCheckpointFileException = {
      val s = store()
      try intercept[CorruptCheckpointFileException](s.load(head))
      finally s.close()
    }
    val crcFile = new File(blob.getParentFile, s".${blob.getName}.crc")
    Files.deleteIfExists(crcFile.toPath) // the local filesystem's own checksum would catch it first

    val raf = new RandomAccessFile(blob, "rw")
    try { raf.seek(size - 10); raf.write(raf.read() ^ 0x01) }
    finally raf.close()
    val changed = failure()
    assert(changed.getMessage.contains(blob.getName) && changed.getMessage.contains("does not match"))

    Files.write(blob.toPath, good.take(good.length - 5000))
    val truncated = failure()
    assert(truncated.getMessage.contains(blob.getName) && truncated.getMessage.contains("shorter"))

    Files.delete(blob.toPath)
    val missing = failure()
    assert(missing.getMessage.contains(blob.getName) && missing.getMessage.contains("missing"))
  }

  /** Rewrites snapshot `id`'s INDEX as an older build wrote it: schema 1, no CRC32C. */
  /** Rewrites the index of `id` as schema 1 wrote it: no CRC32C, every file known by its content's SHA-256.
    */
  private def downgradeIndex(id: CheckpointId): Unit = {
    val remote = new File(tmp, "remote")
    SnapshotZips.rewriteIndex(new File(remote, id.snapshotFileName))(_.map { line =>
      line.split(" ").toSeq match {
        case Seq("lineagestore-snapshot-index", _)  => "lineagestore-snapshot-index 1"
        case Seq("file", n, size, identity, _, "-") => s"file $n $size $identity -"
        case Seq("file", n, size, _, _, blob)       =>
          s"file $n $size ${ContentHashes.sha256Of(new File(remote, SnapshotZip.sharedPath(blob)))} $blob"
        case _ => line
      }
    })
  }

  private def flipByte(blob: File, at: Long): Unit = {
    Files.deleteIfExists(new File(blob.getParentFile, s".${blob.getName}.crc").toPath)
    val raf = new RandomAccessFile(blob, "rw")
    try { raf.seek(at); val b = raf.read(); raf.seek(at); raf.write(b ^ 0x01) }
    finally raf.close()
  }

  test(
    "downloads are checked by CRC32C; an index from before it (schema 1) by SHA-256, and the next snapshot " +
      "records the CRC32C of the blobs it reuses"
  ) {
    val (head, expected) = snapshotted()
    assert(files(small).readSnapshotIndex(head).files.forall(_.crc32c.isDefined))
    downgradeIndex(head)
    assert(files(small).readSnapshotIndex(head).files.forall(_.crc32c.isEmpty))
    val (blob, size) = largestBlob(head)
    val good = Files.readAllBytes(blob.toPath)
    onlyTheSnapshotRebuildsIt()
    def failure(id: CheckpointId, ranged: RangedDownload): CorruptCheckpointFileException = {
      val s = store(ranged)
      try intercept[CorruptCheckpointFileException](s.load(id))
      finally s.close()
    }
    flipByte(blob, size / 2)
    for (ranged <- Seq(RangedDownload.Off, small)) {
      val e = failure(head, ranged)
      assert(e.getMessage.contains(blob.getName) && e.getMessage.contains("SHA-256"), e.getMessage)
    }
    Files.write(blob.toPath, good)

    val s = store(RangedDownload.Off)
    val next =
      try {
        s.load(head)
        assert(contents(s) == expected)
        s.put(D, "added".getBytes(UTF_8), "after the old index".getBytes(UTF_8))
        val next = s.commit()
        s.freezeNow()
        s.uploadSnapshots()
        next
      } finally s.close()
    val index = files(small).readSnapshotIndex(next)
    val reused =
      index.files.find(_.blob.exists(b => blob.getName == b)).getOrElse(fail(s"$blob is not reused"))
    assert(reused.crc32c.contains(Hex.crc32c({ val c = new CRC32C; c.update(good); c })))
    assert(index.files.forall(_.crc32c.isDefined))

    flipByte(blob, size / 3)
    for (ranged <- Seq(RangedDownload.Off, small)) {
      val e = failure(next, ranged)
      assert(e.getMessage.contains(blob.getName) && e.getMessage.contains("CRC32C"), e.getMessage)
    }
  }
}

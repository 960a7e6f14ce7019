package io.lineagestore.store

import java.io.{File, InputStream, OutputStream}
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files
import java.util.concurrent.Executors
import java.util.concurrent.atomic.AtomicInteger

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.scalatest.BeforeAndAfterEach
import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.config.LineageConf
import io.lineagestore.format.{FileIdentity, StoreIdentity}
import io.lineagestore.lineage.{CheckpointId, LoadBase}
import io.lineagestore.storage.{BlobInfo, BlobStore, HadoopBlobStore}

/** A store directory outliving its provider: clean-close resume, content-checked reuse, and the directory
  * leases. Real RocksDB, real local Hadoop filesystem.
  */
class LocalResumeSuite extends AnyFunSuite with BeforeAndAfterEach {
  private var tmp: File = _
  private val pool = Executors.newFixedThreadPool(4)
  private val D = ColumnFamilies.DefaultId
  private val identity = StoreIdentity(0, 0, "default")

  /** Counts the reads that reach the store. */
  private final class CountingBlobStore(inner: BlobStore) extends DelegatingBlobStore(inner) {
    val opens = new AtomicInteger
    val openedNames = new java.util.concurrent.ConcurrentLinkedQueue[String]
    override def open(name: String): InputStream = {
      opens.incrementAndGet(); openedNames.add(name); inner.open(name)
    }
  }

  override def beforeEach(): Unit = tmp = Files.createTempDirectory("lineagestore-resume").toFile
  override def afterEach(): Unit = LocalDirectories.deleteRecursively(tmp)

  private def blobs = new CountingBlobStore(
    new HadoopBlobStore(
      new Path(new File(tmp, "remote").toURI),
      new Configuration(),
      LineageConf.DeltaUploadPartBytes.default
    )
  )
  private def store(
      local: File,
      b: BlobStore = blobs,
      settings: StoreSettings = StoreSettings.Default.copy(minDeltasForSnapshot = 2)
  ) =
    new LineageStore(new CheckpointFiles(b, identity, pool), local, settings)
  private def bytes(s: String) = s.getBytes(UTF_8)
  private def contents(s: LineageStore): Map[String, String] = {
    val it = s.scan(D, Array.emptyByteArray, null)
    try it.map { case (k, v) => new String(k, UTF_8) -> new String(v, UTF_8) }.toMap
    finally it.close()
  }
  private def fill(s: LineageStore, batches: Range): CheckpointId = batches.map { i =>
    (1 to 300).foreach(j => s.put(D, bytes(s"k$i-$j"), bytes("v" * 64 + i)))
    if (i > 1) s.delete(D, bytes(s"k${i - 1}-1"))
    val id = s.commit()
    s.uploadSnapshots()
    id
  }.last

  /** Three commits on a store in `local`, a snapshot of the last one uploaded, then a clean close. Three
    * commits flush three L0 files (ahead of and at each freeze), below the compaction trigger (8 L0 files,
    * LocalRocksDb): the directory keeps exactly the snapshot's SSTs, which is what these tests reason about.
    */
  private def closedWithSnapshot(local: File): (CheckpointId, Map[String, String]) = {
    val first = store(local)
    first.load(CheckpointId.Empty)
    val head = fill(first, 1 to 3)
    first.freezeNow()
    first.uploadSnapshots()
    val expected = contents(first)
    first.close()
    (head, expected)
  }

  private def sstFiles(local: File): Seq[File] =
    Option(new File(local, "db").listFiles())
      .getOrElse(Array.empty[File])
      .toSeq
      .filter(_.getName.endsWith(".sst"))

  test("a store on the directory of a cleanly closed one resumes at its checkpoint and reads nothing") {
    val local = new File(tmp, "local")
    val first = store(local)
    first.load(CheckpointId.Empty)
    // two commits, then one after the resume: three L0 files (each freeze flushes, and so does the commit
    // before it) until the resumed store's snapshot, below the compaction trigger (8 L0 files, LocalRocksDb), so the presumed
    // snapshot's SSTs are still live when the next one is taken
    val head = fill(first, 1 to 2)
    val expected = contents(first)
    first.close()
    assert(new File(local, CleanCloseRecord.FileName).isFile)

    val counting = blobs
    val second = store(local, counting)
    try {
      assert(!new File(local, CleanCloseRecord.FileName).exists, "the record is consumed on open")
      assert(second.loadedCheckpoint.contains(head))
      val plan = second.load(head)
      assert(plan.base == LoadBase.Local(head) && plan.deltas.isEmpty)
      assert(counting.opens.get == 0, s"read ${counting.openedNames}")
      assert(contents(second) == expected)
      // it goes on from there: the next commit's lineage continues the old one, and a restart from the store
      // alone (fresh directory) sees the same state
      second.put(D, bytes("after"), bytes("resume"))
      val next = second.commit()
      second.freezeNow()
      second.uploadSnapshots()
      assert(
        second.counters.filesReused.get > 0,
        "the first snapshot after a resume diffs against the presumed one"
      )
      val cold = store(new File(tmp, "cold"))
      try {
        cold.load(next)
        assert(contents(cold) == expected + ("after" -> "resume"))
      } finally cold.close()
    } finally second.close()
  }

  test(
    "a directory without a clean-close record (a crash) restores from the store, keeping SSTs whose content matches"
  ) {
    val local = new File(tmp, "local")
    val (head, expected) = closedWithSnapshot(local)
    Files.delete(new File(local, CleanCloseRecord.FileName).toPath) // as if the process had died instead
    val ssts = sstFiles(local).map(f => f.getName -> Files.readAllBytes(f.toPath)).toMap

    val second = store(local)
    try {
      assert(second.loadedCheckpoint.isEmpty)
      assert(second.load(head).base == LoadBase.Snapshot(head))
      assert(second.counters.filesReused.get == ssts.size && ssts.nonEmpty)
      assert(
        second.counters.filesDownloaded.get == files(head).count(_.blob.isEmpty),
        "only inline files move"
      )
      assert(contents(second) == expected)
    } finally second.close()
  }

  test(
    "a record whose SSTs do not match the directory is ignored, and a damaged SST is replaced, not trusted"
  ) {
    val local = new File(tmp, "local")
    val (head, expected) = closedWithSnapshot(local)
    // same name and size, other content: only a content check can tell
    val victim = sstFiles(local).maxBy(_.length())
    val damaged = Files.readAllBytes(victim.toPath)
    damaged(damaged.length / 2) = (damaged(damaged.length / 2) ^ 0x55).toByte
    Files.write(victim.toPath, damaged)
    // and one SST fewer than the record lists
    sstFiles(local).filterNot(_ == victim).headOption.foreach(f => Files.delete(f.toPath))

    val second = store(local)
    try {
      assert(second.loadedCheckpoint.isEmpty, "the record lists an SST the directory no longer has")
      assert(second.load(head).base == LoadBase.Snapshot(head))
      assert(contents(second) == expected)
      assert(second.counters.filesDownloaded.get >= 2)
    } finally second.close()
  }

  test(
    "a snapshot knows each new SST by RocksDB's unique ID, read from the file's end, and small files by content"
  ) {
    val local = new File(tmp, "local")
    val (head, _) = closedWithSnapshot(local)
    val indexed = files(head)
    assert(indexed.exists(_.blob.isDefined))
    assert(indexed.filter(_.blob.isDefined).forall(f => FileIdentity.isSst(f.identity)), indexed)
    assert(indexed.filter(_.blob.isEmpty).forall(f => !FileIdentity.isSst(f.identity)), indexed)
    sstFiles(local).foreach { f =>
      assert(indexed.find(_.name == f.getName).map(_.identity) == FileIdentity.ofNewSst(f), f.getName)
    }
  }

  test("a record of another store is ignored") {
    val local = new File(tmp, "local")
    val first = store(local)
    first.load(CheckpointId.Empty)
    fill(first, 1 to 2)
    first.close()
    val other = new LineageStore(
      new CheckpointFiles(blobs, identity.copy(partitionId = 1), pool),
      local,
      StoreSettings.Default
    )
    try assert(other.loadedCheckpoint.isEmpty)
    finally other.close()
  }

  private def files(id: CheckpointId) = new CheckpointFiles(blobs, identity, pool).readSnapshotIndex(id).files

  test("directory leases: one user at a time, kept after release, private when busy, evicted when idle") {
    var now = 1000000L
    val dirs = new LocalDirectories(tmp, retentionMs = 60000, clock = () => now)
    val a = dirs.acquire("s3a://bucket/q1/state/0/0")
    assert(a.reused)
    Files.writeString(new File(a.dir, "x").toPath, "kept")
    val busy = dirs.acquire("s3a://bucket/q1/state/0/0")
    assert(!busy.reused && busy.dir != a.dir, "a directory in use is never shared")
    val other = dirs.acquire("s3a://bucket/q1/state/0/1")
    assert(other.reused && other.dir != a.dir)
    busy.release()
    assert(!busy.dir.exists, "a private directory is deleted on release")
    a.release()
    val again = dirs.acquire("s3a://bucket/q1/state/0/0")
    assert(again.dir == a.dir && new File(again.dir, "x").isFile, "the same store gets its directory back")
    again.release()
    now += 30000
    assert(dirs.evictIdle().isEmpty)
    now += 60000
    assert(dirs.evictIdle() == Seq(a.dir), "idle past retention; the one in use stays")
    assert(other.dir.exists)
    other.release()

    val deleteOnClose = new LocalDirectories(tmp, retentionMs = 0, clock = () => now)
    val d = deleteOnClose.acquire("s3a://bucket/q1/state/0/0")
    assert(!d.reused)
    d.release()
    assert(!d.dir.exists)
  }

  test("a private directory whose process died is swept; one in use is not") {
    val dirs = new LocalDirectories(tmp, retentionMs = 60000)
    val held = dirs.acquire("k")
    val live = dirs.acquire("k")
    val dead = new File(tmp, "lineagestore/private/0000-dead")
    Files.createDirectories(new File(dead, "db").toPath)
    assert(dirs.evictIdle() == Seq(dead))
    assert(live.dir.exists && held.dir.exists)
    live.release()
    held.release()
  }
}

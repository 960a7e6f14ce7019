package io.lineagestore.tools

import java.io.File
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, Path => JPath}
import java.util.concurrent.Executors

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.scalatest.BeforeAndAfterEach
import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.config.LineageConf
import io.lineagestore.format.SnapshotZip
import io.lineagestore.format.StoreIdentity
import io.lineagestore.lineage.{CommitLogEntry, CommittedLineage}
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.storage.HadoopBlobStore
import io.lineagestore.store.{CheckpointFiles, ColumnFamilies, LineageStore, SnapshotZips, StoreSettings}
import io.lineagestore.testing.DiskDamage

/** The command line's Scala side against stores written by the real store on a local Hadoop filesystem. */
class CheckpointToolsSuite extends AnyFunSuite with BeforeAndAfterEach {
  private var tmp: File = _
  private val pool = Executors.newFixedThreadPool(2)

  override def beforeEach(): Unit = tmp = Files.createTempDirectory("lineagestore-tools").toFile
  override def afterEach(): Unit = deleteRecursively(tmp)

  private def storeDir = new File(tmp, "cp/state/0/0")
  private def ref = StoreRef(0, 0, "default", storeDir.toURI.toString)
  private def c(v: Long) = CheckpointId(v, s"c$v")
  private val orphan = CheckpointId(4, "x4")

  /** A store writing into [[storeDir]] (snapshots every 2 versions, nothing cleaned up), on a new local dir.
    */
  private def storeWriter(): LineageStore = new LineageStore(
    new CheckpointFiles(
      new HadoopBlobStore(
        new Path(storeDir.toURI),
        new Configuration(),
        LineageConf.DeltaUploadPartBytes.default
      ),
      StoreIdentity(0, 0, "default"),
      pool
    ),
    Files.createTempDirectory(tmp.toPath, "local").toFile,
    StoreSettings.Default.copy(minDeltasForSnapshot = 2, minVersionsToRetain = 100)
  )

  /** Versions 1..6 committed (c1..c6), snapshots at 2, 4 and 6, and a losing attempt x4 with its own
    * snapshot. Returns the commit log (batch b committed version b + 1).
    */
  private def writeStore(): Seq[CommitLogEntry] = {
    val s = storeWriter()
    try {
      s.load(CheckpointId.Empty)
      for (v <- 1L to 6L) {
        if (v == 4) {
          put(s, 100, "lost")
          s.commit(orphan.uniqueId)
          s.uploadSnapshots()
          s.load(c(3))
        }
        put(s, 50, s"v$v")
        s.commit(c(v).uniqueId)
        s.uploadSnapshots()
        s.load(c(v))
      }
    } finally s.close()
    (0L to 5L).map(b => CommitLogEntry(b, c(b + 1)))
  }

  private def put(s: LineageStore, n: Int, prefix: String): Unit =
    (1 to n).foreach(i =>
      s.put(ColumnFamilies.DefaultId, s"$prefix-$i".getBytes(UTF_8), ("x" * 50).getBytes(UTF_8))
    )

  private def storeFiles: Set[String] =
    Option(storeDir.list())
      .map(_.toSet)
      .getOrElse(Set.empty)
      .filterNot(n => n.startsWith(".") || n == "shared")

  private def blobsOf(id: CheckpointId): Set[String] =
    ToolStore.using(ref)(_.files.readSnapshotIndex(id).sharedBlobs)

  private def sharedDir = new File(storeDir, SnapshotZip.SharedDir)

  test("JSON output escapes what needs escaping") {
    val j = Json.obj(
      "a\"b" -> "line\nnext\\ \u0001",
      "n" -> 3L,
      "t" -> true,
      "x" -> Json.Null,
      "l" -> Json.strs(Seq("p"))
    )
    val expected =
      "{\"a\\\"b\": \"line\\nnext\\\\ \\u0001\", \"n\": 3, \"t\": true, \"x\": null, \"l\": [\"p\"]}"
    assert(j.render == expected)
  }

  test("the committed lineage joins the commit log and the delta headers; attempts get a status") {
    val log = writeStore()
    ToolStore.using(ref) { s =>
      // the commit log's last two entries reach back to version 1 through the delta headers
      val l = CommittedLineage.resolve(s.files, log.takeRight(2))
      assert(l.head.contains(c(6)))
      assert(l.committed == (1L to 6L).map(v => v -> s"c$v").toMap)
      assert(l.status(orphan) == "orphan" && l.status(c(3)) == "committed")
      assert(l.status(CheckpointId(7, "p7")) == "pending")
      assert(l.conflicts.isEmpty && l.errors.isEmpty)
      val wrong = CommittedLineage.resolve(s.files, log.updated(3, CommitLogEntry(3, orphan)))
      assert(wrong.conflicts.exists(m => m.contains("x4") && m.contains("6_c6.delta")))
    }
  }

  test("inspect reports statuses, snapshots, shared, unique and orphan blobs") {
    val log = writeStore()
    Files.write(new File(sharedDir, "stray.sst").toPath, "leftover".getBytes(UTF_8))
    val json = CheckpointTools.inspectStore(
      ref.dir,
      0,
      0,
      "default",
      log.map(e => s"${e.batchId} ${e.id.version} ${e.id.uniqueId}").mkString("\n"),
      0
    )
    assert(json.contains(""""head": "6_c6""""))
    assert(json.contains(""""snapshotLag": 0"""), json.take(300)) // the head has its own snapshot
    assert(json.contains(""""version": 4, "uniqueId": "x4", "status": "orphan""""))
    assert(json.contains(""""version": 5, "uniqueId": "c5", "status": "committed", "batchId": 4"""))
    assert(json.contains(""""name": "stray.sst", "bytes": 8"""))
    assert(json.contains(""""orphanBlobs": 1, "orphanBlobBytes": 8"""))
    assert(json.contains(""""orphanAttempts": 1"""))
    // the snapshot at 4 references the blob uploaded for 2 (same SST content): shared
    assert((blobsOf(c(2)) intersect blobsOf(c(4))).nonEmpty)
    assert(!json.contains(""""sharedBlobs": 0,"""))
  }

  test("inspect shows the head's snapshot lag: deltas a cold restore replays past the newest snapshot") {
    val log = writeStore()
    Files.delete(new File(storeDir, c(6).snapshotFileName).toPath)
    val lines = log.map(e => s"${e.batchId} ${e.id.version} ${e.id.uniqueId}").mkString("\n")
    assert(CheckpointTools.inspectStore(ref.dir, 0, 0, "default", lines, 0).contains(""""snapshotLag": 2"""))
  }

  test("a repartitioned store: inspect marks the fresh start, verify passes, gc keeps what loads need") {
    val log = writeStore()
    val s = storeWriter()
    val fresh = CheckpointId(7, "f7")
    try {
      s.loadEmpty(6)
      put(s, 3, "new")
      s.commit(fresh.uniqueId)
      s.uploadSnapshots()
    } finally s.close()
    val all = log :+ CommitLogEntry(6, fresh)
    val json = CheckpointTools.inspectStore(
      ref.dir,
      0,
      0,
      "default",
      all.map(e => s"${e.batchId} ${e.id.version} ${e.id.uniqueId}").mkString("\n"),
      0
    )
    assert(json.contains(""""uniqueId": "f7", "status": "committed""""), json)
    assert(json.contains(""""ancestors": [], "freshStart": true"""), json)
    assert(json.contains(""""uniqueId": "c6", "status": "committed""""), json)
    val r = ToolStore.using(ref)(t => StoreVerifier.verify(t, all, tmp))
    assert(r.ok, r.problems)
  }

  test("gc after a repartition: once the window moved past the fresh start, the old lineage goes") {
    val log = writeStore() // versions 1..6, snapshots at 2, 4 and 6
    val s = storeWriter()
    val fresh = Seq(CheckpointId(7, "f7"), CheckpointId(8, "f8"), CheckpointId(9, "f9"))
    try {
      s.loadEmpty(6)
      fresh.foreach { id =>
        put(s, 3, id.uniqueId)
        s.commit(id.uniqueId) // no snapshot of the new lineage is uploaded
        s.load(id)
      }
    } finally s.close()
    val all = log ++ fresh.map(id => CommitLogEntry(id.version - 1, id))
    val oldLineage = storeFiles.filter(n => CheckpointId.parseFileName(n).exists(_._1.version < 7))
    ToolStore.using(ref) { t =>
      val early = StoreCleaner.plan(t, all, retain = 4, graceMs = 0, nowMs = System.currentTimeMillis())
      assert(early.deletions.isEmpty, "the window (6..9) still reaches the lineage before the repartition")
      val plan = StoreCleaner.plan(t, all, retain = 2, graceMs = 0, nowMs = System.currentTimeMillis())
      assert(plan.snapshotBase.contains(fresh.head), plan)
      assert((plan.zips ++ plan.deltas).map(_.name).toSet == oldLineage)
      assert(
        plan.blobs.nonEmpty && sharedDir.list().toSet.filterNot(_.startsWith(".")) == plan.blobs
          .map(_.name.stripPrefix("shared/"))
          .toSet
      )
      assert(
        plan.deltas.forall(_.reason match {
          case DeletionReason.BeforeFreshStart(base, _, _) => base == 7
          case _                                           => false
        }),
        plan.deltas
      )
      assert(StoreCleaner.apply(t, plan).isEmpty)
      val r = StoreVerifier.verify(t, all.filter(_.batchId >= 7), tmp)
      assert(r.ok, r.problems)
    }
  }

  test("verify reads back every file the committed checkpoints need") {
    val log = writeStore()
    val r = ToolStore.using(ref)(s => StoreVerifier.verify(s, log, tmp))
    assert(r.ok, r.problems)
    assert(r.checked.size == 6 && r.checked.forall(_._2.isDefined))
    assert(r.filesVerified >= 6 && r.bytesVerified > 0)
  }

  test("verify names a corrupt delta (our own checksum, without Hadoop's .crc) and the batches needing it") {
    val log = writeStore()
    val f = new File(storeDir, c(5).deltaFileName)
    val bytes = Files.readAllBytes(f.toPath)
    bytes(bytes.length / 2) = (bytes(bytes.length / 2) ^ 0x20).toByte
    Files.write(f.toPath, bytes)
    Files.delete(new File(storeDir, s".${f.getName}.crc").toPath)
    val r = ToolStore.using(ref)(s => StoreVerifier.verify(s, log, tmp))
    assert(!r.ok)
    assert(r.problems.map(_.file).exists(_.endsWith("5_c5.delta")), r.problems)
    assert(r.problems.head.batches == Seq(4L))
    assert(r.toJson.render.contains(""""ok": false"""))
  }

  test("verify shows the checkpoints that load only by a detour around a damaged snapshot, and names it") {
    val log = writeStore()
    val zip = new File(storeDir, c(6).snapshotFileName)
    Files.deleteIfExists(new File(storeDir, s".${zip.getName}.crc").toPath)
    Files.write(zip.toPath, Files.readAllBytes(zip.toPath).take(40))
    val r = ToolStore.using(ref)(s => StoreVerifier.verify(s, log, tmp))
    assert(r.detours == Map(5L -> Seq(c(6))))
    assert(r.checked.forall(_._2.isDefined)) // every checkpoint still loads
    assert(r.problems.map(_.file).exists(_.endsWith(c(6).snapshotFileName)))
    assert(r.toJson.render.contains(s""""detourAround": ["${c(6).snapshotFileName}"]"""))
  }

  test("verify names a deleted shared blob") {
    val log = writeStore()
    val blob = blobsOf(c(6)).toSeq.sorted.last
    Files.delete(new File(sharedDir, blob).toPath)
    val r = ToolStore.using(ref)(s => StoreVerifier.verify(s, log, tmp))
    assert(
      r.problems.exists(p =>
        p.file.endsWith(s"shared/$blob") && p.via.exists(_.endsWith(c(6).snapshotFileName)) &&
          p.batches.contains(5L)
      ),
      r.problems
    )
  }

  test("verify checks each shared blob's identity (an SST's RocksDB ID) where a load checks its CRC32C") {
    val log = writeStore()
    val blob = blobsOf(c(6)).toSeq.sorted.last
    // the index claims another identity for the blob; its size and CRC32C still match the bytes
    SnapshotZips.rewriteIndex(new File(storeDir, c(6).snapshotFileName))(_.map { line =>
      line.split(" ").toSeq match {
        case Seq("file", n, size, identity, crc, `blob`) =>
          assert(identity.startsWith("sst-"), line)
          s"file $n $size ${identity.init}${if (identity.last == 'a') 'b' else 'a'} $crc $blob"
        case _ => line
      }
    })
    val s = storeWriter()
    try s.load(c(6)) // a load trusts the CRC32C: it moves the bytes, identity was settled at upload
    finally s.close()
    val r = ToolStore.using(ref)(t => StoreVerifier.verify(t, log, tmp))
    assert(
      r.problems.exists(p =>
        p.file.endsWith(s"shared/$blob") && p.batches.contains(5L) &&
          Some(p.what).collect { case VerifyProblem.Failed(e) => e }.exists(_.contains("SST unique ID"))
      ),
      r.problems
    )
  }

  test("verify reports a committed checkpoint that has no file") {
    val log = writeStore() :+ CommitLogEntry(6, c(7))
    val r = ToolStore.using(ref)(s => StoreVerifier.verify(s, log, tmp))
    assert(r.problems.map(_.file).exists(_.endsWith("7_c7.delta")), r.problems)
    // as data: its zip is gone too, and batch 6 committed it
    assert(r.problems.exists(_.what == VerifyProblem.Missing(c(7).snapshotFileName, 6L)), r.problems)
    assert(
      r.toJson.render.contains(s""""kind": "missing", "snapshot": "${c(7).snapshotFileName}", "batch": 6"""),
      r.toJson.render
    )
  }

  test(
    "gc plans from the committed lineage, keeps young orphans, and applying it keeps the window loadable"
  ) {
    val log = writeStore()
    Files.write(new File(sharedDir, "stray.sst").toPath, "leftover".getBytes(UTF_8))
    val retainedBlobs = blobsOf(c(4)) ++ blobsOf(c(6))
    val droppedOnly = (blobsOf(c(2)) ++ blobsOf(orphan)) -- retainedBlobs
    ToolStore.using(ref) { s =>
      val now = System.currentTimeMillis()
      val plan = StoreCleaner.plan(s, log, retain = 2, graceMs = 3600 * 1000L, nowMs = now)
      assert(plan.oldestRetained.contains(5L) && plan.snapshotBase.contains(c(4)))
      assert(plan.zips.map(_.name).toSet == Set(c(2).snapshotFileName, orphan.snapshotFileName))
      assert(
        plan.deltas.map(_.name).toSet == Set(1L, 2L, 3L).map(v => c(v).deltaFileName) + orphan.deltaFileName
      )
      assert(plan.blobs.map(_.name).toSet == droppedOnly.map("shared/" + _))
      assert(plan.keptYoungOrphans.map(_.name) == Seq("shared/stray.sst"))
      assert(
        plan.deltas
          .find(_.name == orphan.deltaFileName)
          .exists(_.reason match {
            case DeletionReason.BelowSnapshotBase(committed, _, _, _) =>
              !committed // an attempt, not committed
            case DeletionReason.OutsideLineage(_, _, _) => true
            case _                                      => false
          })
      )
      val old = StoreCleaner.plan(s, log, retain = 2, graceMs = 0, nowMs = now + 1000)
      assert(
        old.blobs.exists(d =>
          d.name == "shared/stray.sst" && (d.reason match {
            case DeletionReason.Unreferenced(_, graceMs, young) =>
              graceMs == 0L && !young // past the grace period
            case _ => false
          })
        )
      )
      assert(plan.keptYoungOrphans.map(_.reason.kind) == Seq("unreferencedYoung"))
      val before = storeFiles
      assert(StoreCleaner.apply(s, plan).isEmpty)
      assert(storeFiles == before -- plan.zips.map(_.name) -- plan.deltas.map(_.name))
      assert(
        sharedDir.list().toSet.filterNot(_.startsWith(".")) ==
          retainedBlobs + "stray.sst"
      )
      val r = StoreVerifier.verify(s, log.filter(_.batchId >= 3), tmp)
      assert(r.ok, r.problems)
    }
  }

  test(
    "after gc --retain 2, verify by default checks what retention holds: OK; a retained file gone is damage"
  ) {
    val log = writeStore() // versions 1..6, snapshots at 2, 4 and 6
    def lines(l: Seq[CommitLogEntry]) =
      l.map(e => s"${e.batchId} ${e.id.version} ${e.id.uniqueId}").mkString("\n")
    ToolStore.using(ref) { t =>
      val plan = StoreCleaner.plan(t, log, retain = 2, graceMs = 0, nowMs = System.currentTimeMillis())
      assert(plan.snapshotBase.contains(c(4)), plan)
      // a gc stopped part-way: the zips went first, then only the oldest delta (versions 2 and 3 stay)
      val stopped =
        plan.copy(decision = plan.decision.map(d => d.copy(deltas = d.deltas.filter(_.id == c(1)))))
      assert(StoreCleaner.apply(t, stopped).isEmpty)
      assert(storeFiles.contains(c(2).deltaFileName) && !storeFiles.contains(c(2).snapshotFileName))
      // what the stopped clean-up removed is not damage: batches 1 and 2 (versions 2, 3) are beyond retention
      val (held, beyond) = StoreVerifier.retained(t, log)
      assert(held.map(_.batchId) == Seq(3L, 4L, 5L) && beyond.map(_.batchId) == Seq(0L, 1L, 2L))
      assert(StoreVerifier.verify(t, held, tmp).ok)
      // the whole clean-up: the same batches are held
      assert(StoreCleaner.apply(t, plan).isEmpty)
      assert(
        CheckpointTools.retainedBatches(ref.dir, 0, 0, "default", lines(log), 0) ==
          """{"retained": [3, 4, 5], "beyondRetention": [0, 1, 2]}"""
      )
      val r = StoreVerifier.verify(t, StoreVerifier.retained(t, log)._1, tmp)
      assert(r.ok, r.problems)
    }
    // a retained batch's delta gone (version 5: batch 4 needs it) is damage, not retention
    Files.delete(new File(storeDir, c(5).deltaFileName).toPath)
    ToolStore.using(ref) { t =>
      val (held, _) = StoreVerifier.retained(t, log)
      assert(held.map(_.batchId) == Seq(3L, 4L, 5L))
      val r = StoreVerifier.verify(t, held, tmp)
      assert(
        r.problems.exists(p => p.file.endsWith(c(5).deltaFileName) && p.batches.contains(4L)),
        r.problems
      )
    }
  }

  test(
    "a damaged orphan attempt is a note in inspect and nothing to verify; a damaged retained file, both's"
  ) {
    val log = writeStore()
    val text = log.map(e => s"${e.batchId} ${e.id.version} ${e.id.uniqueId}").mkString("\n")
    def inspect() = CheckpointTools.inspectStore(ref.dir, 0, 0, "default", text, 0)
    def verify() = ToolStore.using(ref)(t => StoreVerifier.verify(t, StoreVerifier.retained(t, log)._1, tmp))
    // the losing attempt x4's delta header, damaged as a disk does (its .crc sidecar kept)
    DiskDamage.flip(new File(storeDir, orphan.deltaFileName), 12)
    val json = inspect()
    assert(json.contains(""""errors": []"""), json)
    assert(
      json.contains(
        s""""damageNotNeeded": [{"file": "${orphan.deltaFileName}", "version": 4, "uniqueId": "x4", """ +
          """"status": "orphan""""
      ),
      json
    )
    assert(verify().ok, verify().problems)
    // the committed delta of version 5, which batches 4 and 5 (no snapshot at 5) need: a problem in both
    DiskDamage.flip(new File(storeDir, c(5).deltaFileName), 12)
    val damaged = inspect()
    assert(!damaged.contains(""""errors": []""") && damaged.contains(c(5).deltaFileName), damaged)
    assert(!damaged.contains(s""""file": "${c(5).deltaFileName}""""), "not among the damage nobody needs")
    val r = verify()
    assert(r.problems.exists(_.file.endsWith(c(5).deltaFileName)), r.problems)
  }

  test("gc deletes a dead writer's temporary past the grace period, never a delta's above the head") {
    val log = writeStore()
    val dead = io.lineagestore.storage.TemporaryBlobs.nameFor(CheckpointId(5, "dead").deltaFileName)
    val next = io.lineagestore.storage.TemporaryBlobs.nameFor(CheckpointId(7, "running").deltaFileName)
    Seq(dead, next).foreach(n => Files.write(new File(storeDir, n).toPath, new Array[Byte](100)))
    ToolStore.using(ref) { s =>
      val now = System.currentTimeMillis()
      val young = StoreCleaner.plan(s, log, retain = 2, graceMs = 3600 * 1000L, nowMs = now)
      assert(young.temporaries.isEmpty)
      val plan = StoreCleaner.plan(s, log, retain = 2, graceMs = 0, nowMs = now + 1000)
      assert(plan.temporaries.map(_.name) == Seq(dead))
      assert(plan.temporaries.head.reason match {
        case DeletionReason.UnfinishedWrite(target, _, 0L) => target.contains("5_dead.delta")
        case _                                             => false
      })
      assert(plan.toJson(applied = false, Nil).toString.contains(dead), "listed among the deletions")
      assert(StoreCleaner.apply(s, plan).isEmpty)
      assert(!new File(storeDir, dead).exists() && new File(storeDir, next).exists())
    }
  }

  test("gc refuses to delete anything when the commit log and the lineage disagree") {
    val log = writeStore().updated(3, CommitLogEntry(3, orphan))
    val json = CheckpointTools.gcStore(
      ref.dir,
      0,
      0,
      "default",
      log.map(e => s"${e.batchId} ${e.id.version} ${e.id.uniqueId}").mkString("\n"),
      1,
      0L,
      true,
      0,
      -1L
    )
    assert(json.contains(""""refused": {"kind": "inconsistent", "conflicts": ["""), json)
    assert(json.contains(""""delete": []""") && json.contains(""""applied": false"""))
    assert(storeFiles.contains(c(1).deltaFileName))
  }

  test("gc retires a store above a shrunk partition count once no retained batch names it, and only then") {
    // batches 0..5 name this store; it is addressed as partition 2 of an operator that has 2 partitions since
    // a repartition at batch 6
    val log = writeStore()
    val text = log.map(e => s"${e.batchId} ${e.id.version} ${e.id.uniqueId}").mkString("\n")
    def gc(latest: Long, retain: Int, apply: Boolean) =
      CheckpointTools.gcStore(ref.dir, 0, 2, "default", text, retain, 0L, apply, 2, latest)
    // batch 6 (the repartition) and 7 are retained with retain 3: batch 5 still is, nothing retires
    val kept = gc(latest = 7, retain = 3, apply = false)
    assert(!kept.contains(""""kind": "retiredStore""""), kept)
    assert(!kept.contains(s""""file": "${c(6).deltaFileName}""""), kept)
    // with retain 2 (batches 6, 7) no retained batch names the store: every file of it goes
    val retired = gc(latest = 7, retain = 2, apply = true)
    assert(
      retired.contains(
        """"kind": "retiredStore", "operatorId": 0, "partitionId": 2, "partitions": 2, "batch": 7"""
      ),
      retired
    )
    assert(retired.contains(""""applied": true"""))
    assert(storeFiles.filter(n => n.endsWith(".delta") || n.endsWith(".zip")).isEmpty, storeFiles)
    assert(sharedDir.list().toSet.filterNot(_.startsWith(".")).isEmpty)
    // a second run, with the head already gone, is not refused and finds nothing more
    val again = gc(latest = 8, retain = 2, apply = true)
    assert(again.contains(""""delete": []""") && again.contains(""""refused": null"""), again)
    // what gc retired is not damage: verify holds none of its batches, inspect needs none of its files
    assert(
      CheckpointTools.retainedBatches(ref.dir, 0, 2, "default", text, 2) ==
        """{"retained": [], "beyondRetention": [0, 1, 2, 3, 4, 5]}"""
    )
    val inspected = CheckpointTools.inspectStore(ref.dir, 0, 2, "default", text, 2)
    assert(inspected.contains(""""errors": []""") && inspected.contains(""""conflicts": []"""), inspected)
    // the same store, not known to be above the operator's partitions, is all missing: damage, as before
    assert(
      CheckpointTools.retainedBatches(ref.dir, 0, 2, "default", text, 0) ==
        """{"retained": [0, 1, 2, 3, 4, 5], "beyondRetention": []}"""
    )
  }

  test("clone hard-links immutable state files (with their .crc) and copies everything else") {
    writeStore()
    val src = new File(tmp, "cp")
    Files.createDirectories(new File(src, "commits").toPath)
    Files.write(new File(src, "commits/0").toPath, "v1\n{}".getBytes(UTF_8))
    val dst = new File(tmp, "clone")
    val names = storeFiles.toSeq.sorted
    val stats = CheckpointCloner.cloneFiles(src.toURI.toString, dst.toURI.toString, "state/0/0", names)
    assert(stats.linked == names.size && stats.copied == 0)
    val root = CheckpointCloner.cloneFiles(src.toURI.toString, dst.toURI.toString, "commits", Seq("0"))
    assert(root.copied == 1 && root.linked == 0)
    def inode(p: JPath) = Files.getAttribute(p, "unix:ino")
    val d = c(1).deltaFileName
    assert(inode(new File(storeDir, d).toPath) == inode(new File(dst, s"state/0/0/$d").toPath))
    assert(new File(dst, s"state/0/0/.$d.crc").isFile)
    assert(inode(new File(src, "commits/0").toPath) != inode(new File(dst, "commits/0").toPath))
    assert(new String(Files.readAllBytes(new File(dst, "commits/0").toPath), UTF_8) == "v1\n{}")
    assert(CheckpointCloner.isImmutableStateFile("state/0/0/shared", "a.sst"))
    assert(!CheckpointCloner.isImmutableStateFile("state/0/0/_metadata", "schema"))
    assert(!CheckpointCloner.isImmutableStateFile("offsets", "1_x.delta"))
    val e = intercept[java.nio.file.FileAlreadyExistsException](
      CheckpointCloner.cloneFiles(src.toURI.toString, dst.toURI.toString, "commits", Seq("0"))
    )
    assert(e.getMessage.contains("commits/0"))
  }

  test("list, listTree and readText see Spark's files through Hadoop") {
    val cp = new File(tmp, "cp")
    Files.createDirectories(new File(cp, "commits").toPath)
    Files.write(new File(cp, "commits/0").toPath, "v1\n{}".getBytes(UTF_8))
    val uri = cp.toURI.toString
    assert(CheckpointTools.list(uri) contains """"name": "commits", "dir": true""")
    assert(CheckpointTools.listTree(uri) contains """"path": "commits/0", "bytes": 5""")
    assert(CheckpointTools.readText(uri + "/commits/0") == "v1\n{}")
    assert(CheckpointTools.readText(uri + "/commits/9") == null)
    assert(CheckpointTools.list(uri + "/nothing") == "null")
  }

  private def deleteRecursively(f: File): Unit = {
    if (f.isDirectory) Option(f.listFiles()).getOrElse(Array.empty[File]).foreach(deleteRecursively)
    f.delete()
  }
}

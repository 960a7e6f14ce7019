package io.lineagestore.store

import java.io.File
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, StandardOpenOption}
import java.util.concurrent.{Executors, TimeUnit}

import scala.jdk.CollectionConverters._

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.config.LineageConf
import io.lineagestore.format.StoreIdentity
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.storage.HadoopBlobStore
import io.lineagestore.testing.{S3TestServer, TempDirs}

/** Stops a real process (Runtime.halt, no shutdown hooks, no finally blocks) at every named step of commit,
  * snapshot upload, clean-up and restore (the workload restores the store cold on a second local directory
  * every third batch), then checks: the local directories the crash left come back to the committed state,
  * and a restart on a fresh local directory finds the state equal to the oracle at the last version the
  * "driver" recorded, every retained version still loads, work continues, and after the orphan sweep no
  * shared blob is left that no snapshot references and no temporary of an unfinished write. The steps come
  * from [[CrashPoints.All]], so a new step is covered without touching the suites. The checkpoint lives under
  * [[remoteUri]]: a local directory here, the real S3 server in [[S3CrashPointSuite]].
  */
abstract class CrashPointBehaviour(hits: Seq[Int]) extends AnyFunSuite {
  import CrashWorkload._

  /** Where a test's checkpoint lives, given its local working directory. */
  protected def remoteUri(root: File): String

  for (step <- CrashPoints.All; hit <- hits) {
    test(s"crash at ${step.name} (hit $hit): restart restores the oracle, loses nothing, leaks nothing") {
      val root = TempDirs.create("lineagestore-crash")
      val remote = remoteUri(root)
      val exit = runChild(root, remote, step.name, hit, batches = 12)
      // the child must have crashed there: a step the workload never reaches (hit times) tests nothing
      assert(exit == HaltCode, s"child exited with $exit; see ${new File(root, "child.log")}")
      val committed = readCommitLog(root)
      val head = committed.lastOption.getOrElse(CheckpointId.Empty)

      // a restart on the same host reuses the local directories the crash left (no clean-close record in
      // them, RocksDB's memtable lost): each must come back to the committed state
      for (left <- Seq("child-local", "child-restore").map(new File(root, _)) if left.exists()) {
        val reused = newStore(remote, left, CrashPoints.None)
        try { reused.load(head); assert(contents(reused) == oracle(head.version), s"reusing $left at $head") }
        finally reused.close()
      }

      // restart: a new process with an empty local directory, driven by what the commit log recorded
      val store = newStore(remote, new File(root, "restart"), CrashPoints.None)
      try {
        // a crash inside the first commit leaves nothing committed: restart from the empty state
        store.load(head)
        assert(contents(store) == oracle(head.version), s"state after restart at $head")
        // every version clean-up retained is still loadable
        for (id <- committed.filter(_.version > head.version - Retain)) {
          val probe =
            newStore(remote, Files.createTempDirectory(root.toPath, "probe").toFile, CrashPoints.None)
          try { probe.load(id); assert(contents(probe) == oracle(id.version), s"retained $id") }
          finally probe.close()
        }
        // work continues after the crash, then clean-up (with an orphan sweep) leaves no unreferenced blob
        store.load(head)
        var last = head
        for (v <- head.version + 1 to head.version + 3) {
          batch(store, v)
          last = store.commit()
          store.load(last)
          store.uploadSnapshots()
        }
        store.cleanup()
        assert(contents(store) == oracle(last.version))
        val referenced = store.checkpointFiles
          .listCheckpointFiles()
          .filter(_.kind == CheckpointId.Snapshot)
          .flatMap(f => store.checkpointFiles.readSnapshotIndex(f.id).sharedBlobs)
          .toSet
        val shared = store.checkpointFiles.listSharedBlobs().map(_.name).toSet
        assert(shared.subsetOf(referenced), s"leaked blobs: ${shared -- referenced}")
        // a delta the crash left half written (streamed while its batch ran) is swept too
        val unfinished = store.checkpointFiles.listRoot()._2
        assert(unfinished.isEmpty, s"temporaries of unfinished writes left: $unfinished")
        assert(store.pendingBlobs.count == 0)
      } finally store.close()
    }
  }

  private def runChild(root: File, remote: String, step: String, hit: Int, batches: Int): Int = {
    val java = new File(System.getProperty("java.home"), "bin/java").getPath
    val cmd = Seq(
      java,
      "-Xmx512m",
      "-cp",
      System.getProperty("java.class.path"),
      CrashWorkload.getClass.getName.stripSuffix("$"),
      root.getPath,
      remote,
      step,
      hit.toString,
      batches.toString
    )
    val p = new ProcessBuilder(cmd.asJava)
      .redirectErrorStream(true)
      .redirectOutput(new File(root, "child.log"))
      .start()
    assert(p.waitFor(120, TimeUnit.SECONDS), "child did not finish")
    p.exitValue()
  }
}

/** Every crash point at its first pass (the third runs on S3, [[S3CrashPointSuite]]), with the checkpoint on
  * the local filesystem.
  */
class CrashPointSuite extends CrashPointBehaviour(hits = Seq(1)) {
  override protected def remoteUri(root: File): String = new File(root, "remote").toURI.toString
}

/** Every crash point with the checkpoint on the real S3 server (s3a, MinIO): uploads, deletes and the orphan
  * sweep's listing go through S3's semantics. The third pass, where clean-up has files to delete.
  */
class S3CrashPointSuite extends CrashPointBehaviour(hits = Seq(3)) {
  override protected def remoteUri(root: File): String = S3TestServer.require(this).freshUri("crash")
}

/** The crashing side: a deterministic workload that records commits like a driver's commit log. */
object CrashWorkload {
  val HaltCode = 42
  val Retain = 3
  private val pool = Executors.newFixedThreadPool(2)

  // snapshots, clean-ups and sweeps every few commits, so that every step is reached in a short workload;
  // the writer never runs maintenance's upload, so its lineage lags and every fourth commit catches up
  def settings: StoreSettings =
    StoreSettings.Default.copy(
      minDeltasForSnapshot = 2,
      maxSnapshotLagDeltas = 3,
      minVersionsToRetain = Retain,
      orphanGracePeriodMs = 0,
      orphanSweepEveryCleanups = 1
    )

  /** The store of checkpoint `remote` (s3a:// URIs on [[S3TestServer]]'s bucket). */
  def newStore(remote: String, local: File, crash: CrashPoints): LineageStore = {
    val conf =
      if (remote.startsWith("s3a:"))
        S3TestServer.server.fold(e => throw new IllegalStateException(e), _.configuration)
      else new Configuration()
    val blobs = new HadoopBlobStore(new Path(remote), conf, LineageConf.DeltaUploadPartBytes.default)
    new LineageStore(new CheckpointFiles(blobs, StoreIdentity(0, 0, "default"), pool), local, settings, crash)
  }

  /** Batch v puts k<v> and removes k<v-3>: the state after version v is k<max(1, v-2)> .. k<v>. */
  def batch(store: LineageStore, v: Long): Unit = {
    store.put(ColumnFamilies.DefaultId, s"k$v".getBytes(UTF_8), s"value-$v".getBytes(UTF_8))
    if (v > 3) store.delete(ColumnFamilies.DefaultId, s"k${v - 3}".getBytes(UTF_8))
  }

  def oracle(v: Long): Map[String, String] = (math.max(1L, v - 2) to v).map(i => s"k$i" -> s"value-$i").toMap

  def contents(store: LineageStore): Map[String, String] = {
    val it = store.scan(ColumnFamilies.DefaultId, Array.emptyByteArray, null)
    try it.map { case (k, v) => new String(k, UTF_8) -> new String(v, UTF_8) }.toMap
    finally it.close()
  }

  private def deleteRecursively(f: File): Unit = {
    Option(f.listFiles()).foreach(_.foreach(deleteRecursively))
    f.delete()
  }

  def readCommitLog(root: File): Seq[CheckpointId] = {
    val f = new File(root, "commits")
    if (!f.exists()) Nil
    else
      Files
        .readAllLines(f.toPath)
        .asScala
        .filter(_.nonEmpty)
        .map { l =>
          val Array(v, id) = l.split(" "); CheckpointId(v.toLong, id)
        }
        .toSeq
  }

  def main(args: Array[String]): Unit = {
    val Array(rootPath, remote, stepName, hitText, batchesText) = args
    val root = new File(rootPath)
    var hits = 0
    val crash: CrashPoints = (s: CrashPoints.Step) =>
      if (s.name == stepName) { hits += 1; if (hits == hitText.toInt) Runtime.getRuntime.halt(HaltCode) }
    val store = newStore(remote, new File(root, "child-local"), crash)
    var head = CheckpointId.Empty
    store.load(head)
    for (v <- 1L to batchesText.toLong) {
      batch(store, v)
      head = store.commit()
      Files.write(
        new File(root, "commits").toPath,
        s"${head.version} ${head.uniqueId}\n".getBytes(UTF_8),
        StandardOpenOption.CREATE,
        StandardOpenOption.APPEND
      )
      if (v % 3 == 0) { // another executor restores the store cold: a snapshot's files, then deltas replayed
        deleteRecursively(new File(root, "child-restore"))
        val restorer = newStore(remote, new File(root, "child-restore"), crash)
        try {
          restorer.load(head)
          restorer.freezeNow() // a store that closes with a frozen snapshot uploads it first
          restorer.uploadBeforeClose(60000)
        } finally restorer.close()
      }
      store.load(head) // the next batch starts from what the driver committed
      store.cleanup()
    }
    Runtime.getRuntime.halt(0)
  }
}

package io.lineagestore.store

import java.io.File
import java.nio.file.Files
import java.util.concurrent.{CompletableFuture, Executor, LinkedBlockingQueue, TimeUnit}

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.lineage.{CheckpointId, LoadBase}

/** Issue 21: a commit that freezes a snapshot leaves the checkpoint (flush + hard links) to an apply thread.
  * The commit returns before the checkpoint exists; the checkpoint still holds exactly the committed version
  * (the next batch's writes wait behind it), an upload waits for it, and a freeze that fails costs a
  * snapshot, never a commit.
  */
class BackgroundFreezeSuite extends AnyFunSuite with StoreFixture {
  override protected def defaultSettings: StoreSettings =
    StoreSettings.Default.copy(minDeltasForSnapshot = 2, maxSnapshotLagDeltas = 4)

  /** Runs applies on threads of their own, or, while held, keeps them until [[release]]. */
  private final class Gate extends Executor {
    private val held = new LinkedBlockingQueue[Runnable]()
    @volatile private var holding = false
    def hold(): Unit = holding = true
    def release(): Unit = {
      holding = false; Iterator.continually(held.poll()).takeWhile(_ != null).foreach(run)
    }
    override def execute(r: Runnable): Unit = if (holding) held.add(r) else run(r)
    private def run(r: Runnable): Unit = new Thread(r, "test-apply").start()
    def heldCount: Int = held.size
  }

  private def str(a: Array[Byte]): String = if (a == null) null else new String(a, "UTF-8")

  test("a freezing commit returns before its checkpoint exists; the snapshot holds exactly its version") {
    val gate = new Gate
    val local = Files.createTempDirectory(tmp.toPath, "local").toFile
    val s = newStore(local = local, applyPool = gate)
    s.load(CheckpointId.Empty)
    commitBatch(s, Map("a" -> "1", "b" -> "2"))
    gate.hold()
    val v2 = commitBatch(s, Map("a" -> "10", "c" -> "3")) // the second delta since the empty state: freezes
    assert(gate.heldCount == 1, "the write and the checkpoint wait on the apply pool")
    assert(s.frozenIds == Seq(v2))
    assert(!new File(local, s"frozen/$v2/CURRENT").exists(), "no checkpoint before the apply thread ran")

    val upload = CompletableFuture.supplyAsync(() => s.uploadSnapshots())
    Thread.sleep(300)
    assert(!upload.isDone, "an upload waits for the checkpoint")

    // the next batch, written while the checkpoint waits, reads through the in-flight batch
    s.put(D, b("a"), b("100"))
    s.put(D, b("d"), b("4"))
    assert(str(s.get(D, b("c"))) == "3" && str(s.get(D, b("b"))) == "2")
    gate.release()
    assert(upload.get(60, TimeUnit.SECONDS) == 1)
    assert(files.hasSnapshot(v2))
    val v3 = s.commit()

    val restored = newStore()
    val plan = restored.load(v2)
    assert(plan.base == LoadBase.Snapshot(v2) && plan.deltas.isEmpty, s"restored from $plan")
    assert(contents(restored) == Map("a" -> "10", "b" -> "2", "c" -> "3"))
    assert(contents(s) == Map("a" -> "100", "b" -> "2", "c" -> "3", "d" -> "4"))
    val atHead = newStore()
    atHead.load(v3)
    assert(contents(atHead) == contents(s))
  }

  test(
    "a freeze that fails costs its snapshot, not the commit; it is reported once and a later one catches up"
  ) {
    val gate = new Gate
    val local = Files.createTempDirectory(tmp.toPath, "local").toFile
    val s = newStore(local = local, applyPool = gate)
    s.load(CheckpointId.Empty)
    commitBatch(s, Map("a" -> "1"))
    gate.hold()
    val v2 = commitBatch(s, Map("b" -> "2"))
    // a local disk fault: the checkpoint's target directory exists, so RocksDB refuses to create it
    assert(new File(local, s"frozen/$v2/leftover").mkdirs())
    gate.release()
    assert(s.uploadSnapshots() == 0)
    assert(!files.hasSnapshot(v2))
    assert(s.counters.freezeFailures.get == 1 && s.frozenCount == 0)
    assert(s.takeFreezeFailure().exists(_.getMessage.toLowerCase.contains("exist")))
    assert(s.takeFreezeFailure().isEmpty, "reported once")

    // the commits go on; the lineage presumed v2's snapshot, so its lag grows until a commit catches up
    var head = v2
    for (i <- 3 to 7) head = commitBatch(s, Map(s"k$i" -> "v"))
    assert(s.snapshotLag <= defaultSettings.maxSnapshotLagDeltas, s"lag ${s.snapshotLag}")
    val snapshots = files.listCheckpointFiles().filter(_.kind == CheckpointId.Snapshot).map(_.id)
    assert(snapshots.nonEmpty && !snapshots.contains(v2), s"snapshots $snapshots")
    val restored = newStore()
    restored.load(head)
    assert(contents(restored) == contents(s))
    assert(contents(restored).keySet == Set("a", "b") ++ (3 to 7).map(i => s"k$i"))
    val atV2 = newStore()
    atV2.load(v2)
    assert(contents(atV2) == Map("a" -> "1", "b" -> "2"))
  }
}

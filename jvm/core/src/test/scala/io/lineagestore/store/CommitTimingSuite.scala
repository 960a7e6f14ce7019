package io.lineagestore.store

import java.io.OutputStream
import java.util.concurrent.Executor

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.storage.BlobStore

/** A commit reports how long it spent on the two things it can wait for (lineagestoreCommitDeltaMs and
  * lineagestoreCommitApplyWaitMs): ending its delta in the blob store, and handing its batch to an apply
  * thread still writing the previous one. A slow delta write and a slow apply thread each show in their own
  * counter.
  */
class CommitTimingSuite extends AnyFunSuite with StoreFixture {
  override protected def defaultSettings: StoreSettings =
    StoreSettings.Default.copy(minDeltasForSnapshot = 1000)

  private val DeltaWriteMs = 300L
  private val ApplyDelayMs = 1500L

  /** Delta writes take [[DeltaWriteMs]] longer. */
  private def slowDeltas(underlying: BlobStore): BlobStore = new DelegatingBlobStore(underlying) {
    override def write(name: String)(body: OutputStream => Unit): Unit = {
      if (name.endsWith(".delta")) Thread.sleep(DeltaWriteMs)
      super.write(name)(body)
    }
  }

  /** Runs each apply on a thread of its own, [[ApplyDelayMs]] late. */
  private val lateApplies: Executor = { r =>
    val t = new Thread(() => { Thread.sleep(ApplyDelayMs); r.run() })
    t.setDaemon(true)
    t.start()
  }

  test("a commit's time splits into ending its delta and waiting for the previous batch's apply") {
    val s = newStore(checkpointFiles = filesOn(slowDeltas(remoteBlobs)), applyPool = lateApplies)
    s.load(io.lineagestore.lineage.CheckpointId.Empty)
    commitBatch(s, Map("a" -> "1"))
    val c = s.counters
    assert(c.lastCommitDeltaMs.get >= DeltaWriteMs, "the slow delta write is the delta's part")
    assert(c.lastCommitApplyWaitMs.get < ApplyDelayMs / 2, "nothing was in flight on the apply thread")
    assert(c.lastCommitMs.get >= c.lastCommitDeltaMs.get + c.lastCommitApplyWaitMs.get)

    // the next commit comes at once: its hand-off waits for the first batch's late apply
    commitBatch(s, Map("b" -> "2"))
    assert(c.lastCommitDeltaMs.get >= DeltaWriteMs)
    assert(
      c.lastCommitApplyWaitMs.get >= ApplyDelayMs - 2 * DeltaWriteMs - 200,
      s"waited ${c.lastCommitApplyWaitMs.get} ms for an apply started ${ApplyDelayMs} ms late"
    )
    assert(c.lastCommitMs.get >= c.lastCommitDeltaMs.get + c.lastCommitApplyWaitMs.get)
    assert(contents(s) == Map("a" -> "1", "b" -> "2"))
  }
}

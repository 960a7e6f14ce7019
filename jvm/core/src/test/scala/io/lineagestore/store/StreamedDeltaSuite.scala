package io.lineagestore.store

import java.io.OutputStream

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.format.FamilyKeys
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.storage.BlobStore

/** Issue 21: a batch whose every change is its key's first has its delta encoded while it runs; a batch that
  * changes a key again (or appends to a list) falls back to the net changes written at commit, and the next
  * few batches are not streamed. Either way the delta holds exactly the batch's net changes.
  */
class StreamedDeltaSuite extends AnyFunSuite with StoreFixture {
  override protected def defaultSettings: StoreSettings =
    StoreSettings.Default.copy(minDeltasForSnapshot = 1000)

  private def str(a: Array[Byte]): String = if (a == null) null else new String(a, "UTF-8")

  /** The delta's records of the default family, as (key, value or null for a delete), in file order. */
  private def records(id: CheckpointId): Seq[(String, String)] = {
    val got = Seq.newBuilder[(String, String)]
    files.readDelta(id) { (_, k, v) =>
      if (FamilyKeys.isIn(D, k)) got += ((str(FamilyKeys.userKey(k)), str(v)))
    }
    got.result()
  }

  private def reloaded(at: CheckpointId): Map[String, String] = {
    val fresh = newStore()
    fresh.load(at)
    contents(fresh)
  }

  test("a batch of first changes is streamed: its delta holds the batch's records and restores its state") {
    val s = newStore()
    s.load(CheckpointId.Empty)
    val v1 = commitBatch(s, Map("a" -> "1", "b" -> "2", "c" -> "3"))
    val v2 = commitBatch(s, Map("a" -> "10", "d" -> "4"), deletes = Seq("b"))
    assert(s.counters.deltasStreamed.get == 2)
    assert(records(v1).sorted == Seq("a" -> "1", "b" -> "2", "c" -> "3"))
    assert(records(v2).sorted == Seq("a" -> "10", "b" -> null, "d" -> "4"))
    assert(reloaded(v2) == Map("a" -> "10", "c" -> "3", "d" -> "4"))
    assert(reloaded(v1) == Map("a" -> "1", "b" -> "2", "c" -> "3"))
  }

  test("a key changed twice ends streaming for the batch (net change written) and the next 8 batches") {
    val s = newStore()
    s.load(CheckpointId.Empty)
    commitBatch(s, Map("a" -> "1"))
    s.put(D, b("a"), b("2"))
    s.put(D, b("b"), b("1"))
    s.put(D, b("a"), b("3")) // the second change of "a": the log so far no longer is the net change
    s.delete(D, b("b"))
    val twice = s.commit(CheckpointId.newUniqueId())
    assert(s.counters.deltasStreamed.get == 1)
    assert(records(twice).sorted == Seq("a" -> "3", "b" -> null), "one record per key: the net change")
    val paused = (1 to BatchDeltas.UnstreamedAfterRefusal).map(i => commitBatch(s, Map(s"k$i" -> "v")))
    assert(s.counters.deltasStreamed.get == 1, "batches after a refused one are written at commit")
    val again = commitBatch(s, Map("z" -> "26"))
    assert(s.counters.deltasStreamed.get == 2, "then streaming is tried again")
    assert(records(paused.last) == Seq(s"k${paused.size}" -> "v") && records(again) == Seq("z" -> "26"))
    assert(reloaded(again) == contents(s))
    assert(contents(s)("a") == "3" && !contents(s).contains("b"))
  }

  test("an aborted batch's streamed records never reach a delta") {
    val s = newStore()
    s.load(CheckpointId.Empty)
    val v1 = commitBatch(s, Map("a" -> "1"))
    s.put(D, b("lost"), b("x"))
    s.put(D, b("a"), b("lost"))
    s.abort()
    s.load(v1)
    val v2 = commitBatch(s, Map("b" -> "2"))
    assert(s.counters.deltasStreamed.get == 2)
    assert(records(v2) == Seq("b" -> "2"))
    assert(reloaded(v2) == Map("a" -> "1", "b" -> "2"))
  }

  test(
    "appends to a list are never streamed: the delta is version 4, in key order, and replays to the lists"
  ) {
    val s = newStore()
    s.load(CheckpointId.Empty)
    s.put(D, b("z"), b("0"))
    s.merge(D, b("m"), b("x"))
    val v1 = s.commit(CheckpointId.newUniqueId())
    assert(s.counters.deltasStreamed.get == 0)
    assert(records(v1).map(_._1) == Seq("m", "z"))
    assert(reloaded(v1) == Map("m" -> "x", "z" -> "0"))
  }

  test(
    "a streamed delta that fails to write fails the commit, leaves nothing committed, and the retry works"
  ) {
    @volatile var failing = true
    val flaky = new DelegatingBlobStore(remoteBlobs) {
      override def write(name: String)(body: OutputStream => Unit): Unit =
        if (failing && name.endsWith(".delta"))
          underlying.write(name) { out => body(out); throw new java.io.IOException(s"injected: $name") }
        else underlying.write(name)(body)
    }
    val s = newStore(checkpointFiles = filesOn(flaky: BlobStore))
    s.load(CheckpointId.Empty)
    val v1 = { failing = false; val v = commitBatch(s, Map("a" -> "1")); failing = true; v }
    s.put(D, b("b"), b("2"))
    intercept[java.io.IOException](s.commit(CheckpointId.newUniqueId()))
    s.abort()
    assert(remoteNames.count(_.endsWith(".delta")) == 1, s"only ${v1.deltaFileName}: $remoteNames")
    failing = false
    s.load(v1)
    val v2 = commitBatch(s, Map("b" -> "2"))
    assert(reloaded(v2) == Map("a" -> "1", "b" -> "2"))
  }
}

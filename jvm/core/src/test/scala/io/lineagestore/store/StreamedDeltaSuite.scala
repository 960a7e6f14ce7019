package io.lineagestore.store

import java.io.OutputStream

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.format.FamilyKeys
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.storage.BlobStore

/** Issue 21: a batch whose every change is its key's first has its delta written to the blob store while it
  * runs (a temporary on a filesystem, renamed at commit); a batch that changes a key again (or appends to a
  * list) falls back to the net changes written at commit, and the next few batches are not streamed. Either
  * way the delta holds exactly the batch's net changes, and a delta given up leaves nothing behind.
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
    val twice = s.commit()
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
    val v1 = s.commit()
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
    intercept[java.io.IOException](s.commit())
    s.abort()
    assert(remoteNames.count(_.endsWith(".delta")) == 1, s"only ${v1.deltaFileName}: $remoteNames")
    failing = false
    s.load(v1)
    val v2 = commitBatch(s, Map("b" -> "2"))
    assert(reloaded(v2) == Map("a" -> "1", "b" -> "2"))
  }

  private def temporaries: Set[String] = remoteNames.filter(_.endsWith(".tmp"))

  /** `n` puts of incompressible 1 KiB values (keys `prefix0..`), more than the codec and writer buffer. */
  private def bulk(s: LineageStore, prefix: String, n: Int): Unit = {
    val rnd = new scala.util.Random(n)
    (0 until n).foreach(i =>
      s.put(D, b(s"$prefix$i"), rnd.alphanumeric.take(1024).mkString.getBytes("UTF-8"))
    )
  }

  test("the delta goes out while the batch runs: records reach the store before the commit, the name after") {
    val s = newStore()
    s.load(CheckpointId.Empty)
    bulk(s, "k", 2000)
    val written = temporaries
    assert(
      written.size == 1 && written.head.startsWith(".1_") && written.head.contains(".delta."),
      remoteNames
    )
    val soFar = new java.io.File(remote, written.head).length
    assert(soFar > 512 * 1024, s"only $soFar bytes of about 1.5 MB written before the commit")
    assert(!remoteNames.exists(_.endsWith(".delta")), "no delta is visible before its commit")
    val v1 = s.commit()
    assert(written.head.startsWith(s".${v1.deltaFileName}."), "the commit publishes the delta it wrote")
    assert(temporaries.isEmpty && remoteNames.contains(v1.deltaFileName))
    assert(s.counters.deltasStreamed.get == 1)
    assert(records(v1).size == 2000 && reloaded(v1) == contents(s))
  }

  test("a streamed delta given up (abort, a key changed twice, a commit under another ID) leaves no file") {
    val s = newStore()
    s.load(CheckpointId.Empty)
    bulk(s, "k", 500)
    assert(temporaries.size == 1)
    s.abort()
    assert(temporaries.isEmpty, "abort")
    s.load(CheckpointId.Empty)
    bulk(s, "k", 500)
    s.put(D, b("k1"), b("again"))
    assert(temporaries.isEmpty, "refused at the second change of a key")
    val v1 = s.commit()
    s.load(v1)
    (1 to BatchDeltas.UnstreamedAfterRefusal).foreach(i => s.load(commitBatch(s, Map(s"p$i" -> "v"))))
    bulk(s, "m", 300)
    assert(temporaries.size == 1)
    val chosen = s.commit("chosen-id")
    assert(chosen.uniqueId == "chosen-id" && temporaries.isEmpty)
    assert(remoteNames.count(_.endsWith(".delta")) == BatchDeltas.UnstreamedAfterRefusal + 2)
    assert(reloaded(chosen) == contents(s) && contents(s)("k1") == "again")
  }

  test("a blob store failing mid-batch does not fail the batch: the commit writes the delta again") {
    @volatile var failAfter = Long.MaxValue
    val flaky = new DelegatingBlobStore(remoteBlobs) {
      override def create(name: String): io.lineagestore.storage.BlobWrite = {
        val inner = underlying.create(name)
        new io.lineagestore.storage.BlobWrite {
          private var sent = 0L
          override val out: OutputStream = new OutputStream {
            override def write(b: Int): Unit = write(Array(b.toByte), 0, 1)
            override def write(b: Array[Byte], off: Int, len: Int): Unit = {
              sent += len
              if (sent > failAfter) throw new java.io.IOException(s"injected: $name after $failAfter bytes")
              inner.out.write(b, off, len)
            }
          }
          override def complete(): Unit = inner.complete()
          override def abort(): Unit = inner.abort()
        }
      }
    }
    val s = newStore(checkpointFiles = filesOn(flaky: BlobStore))
    s.load(CheckpointId.Empty)
    failAfter = 200 * 1024
    bulk(s, "k", 1000)
    assert(temporaries.isEmpty, "the failed delta is given up at once")
    failAfter = Long.MaxValue
    val v1 = s.commit()
    assert(s.counters.deltasStreamed.get == 0 && s.counters.streamedDeltasGivenUp.get == 1)
    assert(records(v1).size == 1000 && reloaded(v1) == contents(s))
  }

  test("the orphan sweep deletes a dead writer's temporary once older than the grace period, not a batch's") {
    val s = newStore(settings = defaultSettings.copy(orphanGracePeriodMs = 0, orphanSweepEveryCleanups = 1))
    s.load(CheckpointId.Empty)
    val v1 = commitBatch(s, Map("a" -> "1"))
    // a writer that died with version 1's delta half written (a losing attempt), and one of version 2
    val dead = remoteBlobs.create(CheckpointId(1, "dead").deltaFileName)
    dead.out.write(new Array[Byte](1000))
    s.load(v1)
    bulk(s, "k", 500) // this batch's own delta (version 2) is being written
    val theirs = remoteBlobs.create(CheckpointId(2, "other").deltaFileName)
    theirs.out.write(new Array[Byte](1000))
    assert(temporaries.size == 3)
    Thread.sleep(5) // older than the grace period of 0 ms
    val deleted = s.cleanup()
    assert(deleted.size == 1 && deleted.head.startsWith(".1_dead.delta."), deleted)
    assert(temporaries.size == 2, "version 2's temporaries may belong to a batch still running")
    val v2 = s.commit()
    assert(reloaded(v2) == contents(s))
  }
}

package io.lineagestore.store

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.format.{SnapshotFile, SnapshotIndex, StoreIdentity}
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.snapshot.LocalFile

class StandbyPlanSuite extends AnyFunSuite {
  private val executors = (1 to 5).map(i => s"exec-$i").toSet
  private val stores = (0 until 200).map(p => LocalDirectories.keyOf(s"file:/ckpt/state/0/$p"))

  test("holders: n executors other than the owner, the same answer for the same inputs") {
    stores.foreach { key =>
      val h = StandbyPlan.holders(executors, Some("exec-1"), 2, key)
      assert(h.size == 2 && h.distinct == h)
      assert(!h.contains("exec-1"))
      assert(h.forall(executors))
      assert(StandbyPlan.holders(executors, Some("exec-1"), 2, key) == h)
    }
  }

  test(
    "holders: -1 is every executor but the owner; 0 is none; fewer executors than replicas is all of them"
  ) {
    val key = stores.head
    assert(StandbyPlan.holders(executors, Some("exec-3"), -1, key).toSet == executors - "exec-3")
    assert(StandbyPlan.holders(executors, Some("exec-3"), 0, key).isEmpty)
    assert(StandbyPlan.holders(Set("a", "b"), Some("a"), 3, key) == Seq("b"))
    assert(StandbyPlan.holders(executors, None, 1, key).size == 1)
    intercept[IllegalArgumentException](StandbyPlan.holders(executors, None, -2, key))
  }

  test("holders spread the stores over the executors") {
    val counts = stores.flatMap(StandbyPlan.holders(executors, None, 1, _)).groupBy(identity).map(_._2.size)
    assert(counts.size == 5)
    // 200 stores over 5 executors: 40 each on average; rendezvous hashing keeps each well within 2x of it
    assert(counts.forall(c => c >= 20 && c <= 80), counts)
  }

  test("an executor leaving moves only the standbys it held; one joining takes only those it wins") {
    val before = stores.map(k => k -> StandbyPlan.holders(executors, None, 1, k).head).toMap
    val after = stores.map(k => k -> StandbyPlan.holders(executors - "exec-2", None, 1, k).head).toMap
    stores.foreach { k =>
      if (before(k) != "exec-2") assert(after(k) == before(k), k)
      else assert(after(k) != "exec-2")
    }
    val joined = stores.map(k => k -> StandbyPlan.holders(executors + "exec-6", None, 1, k).head).toMap
    stores.foreach(k => assert(joined(k) == before(k) || joined(k) == "exec-6", k))
    assert(joined.values.exists(_ == "exec-6"))
  }

  test("the owner moving to a standby's executor hands that standby to the next executor only") {
    stores.foreach { k =>
      val Seq(first, second) = StandbyPlan.holders(executors, Some("exec-5"), 2, k)
      // the store is re-homed to its first standby: the second stays, one new executor joins it
      val afterMove = StandbyPlan.holders(executors, Some(first), 2, k)
      assert(afterMove.contains(second) && !afterMove.contains(first), k)
    }
  }

  test("holds: an executor asks about itself, whether or not it is in the known set") {
    val key = stores.head
    val h = StandbyPlan.holders(executors, Some("exec-1"), 1, key).head
    assert(StandbyPlan.holds(h, executors - h, Some("exec-1"), 1, key))
    assert(!StandbyPlan.holds("exec-1", executors, Some("exec-1"), -1, key))
    assert(!StandbyPlan.holds(h, executors, Some("exec-1"), 0, key))
  }

  test(
    "follows, the owner unknown: replicas + 1 heaviest follow but the owner, so never fewer than replicas"
  ) {
    stores.foreach { key =>
      val ranked = StandbyPlan.holders(executors, None, -1, key)
      (1 to 3).foreach { n =>
        val followers = executors.filter(e => StandbyPlan.follows(e, executors, ownedHere = false, n, key))
        assert(followers == ranked.take(n + 1).toSet)
        // whichever executor owns the store, the others among them keep at least n standbys
        executors.foreach { owner =>
          val standbys = executors.filter(e => e != owner && StandbyPlan.follows(e, executors, false, n, key))
          assert(standbys.size >= n, (key, owner, n))
        }
      }
      assert(executors.forall(e => StandbyPlan.follows(e, executors, false, -1, key)))
      assert(!executors.exists(e => StandbyPlan.follows(e, executors, true, -1, key)))
      assert(!executors.exists(e => StandbyPlan.follows(e, executors, false, 0, key)))
    }
  }

  private val store = StoreIdentity(0, 3, "default")
  // identities as an index holds them: an SST's RocksDB ID (`sst-` and 64 hex digits), a content SHA-256
  private def idOf(tag: String) = "sst-" + (tag * 64).take(64)
  private def sst(name: String, tag: String, size: Long = 1000) =
    SnapshotFile(name, size, idOf(tag), Some(s"blob-$tag"), Some("00000000"))
  private def inline(name: String) =
    SnapshotFile(name, 10, java.util.HexFormat.of().formatHex(name.getBytes.padTo(32, 0.toByte)), None)
  private val index = SnapshotIndex(
    store,
    CheckpointId(7, "u7"),
    Nil,
    Seq(sst("000010.sst", "a"), sst("000011.sst", "b", 2000), inline("CURRENT"), inline("MANIFEST-000012"))
  )

  test("fetch: an empty standby fetches every shared file and extracts the inline ones") {
    val f = StandbyPlan.fetch(index, Nil)
    assert(f.snapshot == CheckpointId(7, "u7"))
    assert(f.fetch.map(_.name) == Seq("000010.sst", "000011.sst"))
    assert(f.bytesToFetch == 3000 && f.bytesHeld == 3020)
    assert(f.inline.map(_.name).toSet == Set("CURRENT", "MANIFEST-000012"))
    assert(!f.isComplete)
  }

  test("fetch: a lagging standby keeps what matches by identity, fetches the rest, deletes the stale") {
    val local = Seq(
      LocalFile("000010.sst", 1000, Some(idOf("a"))), // same content: kept
      LocalFile("000011.sst", 2000, Some(idOf("c"))), // same name and size, other content: fetched again
      LocalFile("000009.sst", 500, Some(idOf("d"))), // an older snapshot's: deleted
      LocalFile("CURRENT", 10, None),
      LocalFile("MANIFEST-000012", 10, None)
    )
    val f = StandbyPlan.fetch(index, local)
    assert(f.keep.map(_.name) == Seq("000010.sst"))
    assert(f.fetch.map(_.name) == Seq("000011.sst"))
    assert(f.delete.toSet == Set("000011.sst", "000009.sst"))
    assert(f.bytesToFetch == 2000)
  }

  test("fetch: an SST of unknown identity is never kept (the copy fetches it, or identifies it first)") {
    val f = StandbyPlan.fetch(index, Seq(LocalFile("000010.sst", 1000, None)))
    assert(f.keep.isEmpty && f.fetch.map(_.name).contains("000010.sst"))
  }

  test("fetch: a complete copy has nothing to fetch or delete") {
    val local = index.files.map(f => LocalFile(f.name, f.size, Some(f.identity)))
    val f = StandbyPlan.fetch(index, local)
    assert(f.isComplete && f.bytesToFetch == 0 && f.bytesHeld == 3020)
  }

  test("fits: the executor-wide bound counts the other standbys") {
    assert(StandbyPlan.fits(100, 0, 100))
    assert(!StandbyPlan.fits(101, 0, 100))
    assert(StandbyPlan.fits(40, 60, 100))
    assert(!StandbyPlan.fits(41, 60, 100))
    assert(!StandbyPlan.fits(1, 0, 0))
    assert(!StandbyPlan.fits(0, 200, 100)) // over the bound already: nothing more
  }

  test("behind: anything but the wanted snapshot, nothing complete included") {
    val s = CheckpointId(10, "x")
    assert(StandbyPlan.behind(None, s))
    assert(StandbyPlan.behind(Some(CheckpointId(10, "y")), s)) // another attempt of the same version
    assert(StandbyPlan.behind(Some(CheckpointId(5, "x")), s))
    assert(!StandbyPlan.behind(Some(s), s))
  }

  test("nextPollMs: the interval after a success, doubling per failure up to the bound") {
    assert(StandbyPlan.nextPollMs(0, 1000, 60000) == 1000)
    assert(StandbyPlan.nextPollMs(1, 1000, 60000) == 2000)
    assert(StandbyPlan.nextPollMs(3, 1000, 60000) == 8000)
    assert(StandbyPlan.nextPollMs(10, 1000, 60000) == 60000)
    assert(StandbyPlan.nextPollMs(Int.MaxValue, Long.MaxValue / 2, Long.MaxValue) == Long.MaxValue)
    intercept[IllegalArgumentException](StandbyPlan.nextPollMs(0, 0, 10))
  }
}

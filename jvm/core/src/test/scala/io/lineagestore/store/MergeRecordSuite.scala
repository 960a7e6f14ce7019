package io.lineagestore.store

import java.io.File
import java.nio.charset.StandardCharsets.UTF_8

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.format.{DeltaCodec, DeltaRecordKind}
import io.lineagestore.lineage.{CheckpointId, LoadBase}

/** Merge records (list appends, issue 15): what a batch appends is written as only the appended elements,
  * every change of a multi-valued key is kept in order, and a load replaying the deltas rebuilds the lists.
  */
class MergeRecordSuite extends AnyFunSuite with StoreFixture {
  override protected def defaultSettings: StoreSettings =
    StoreSettings.Default.copy(minDeltasForSnapshot = 1000, deltaCodec = DeltaCodec.Uncompressed)

  private def commit(s: LineageStore)(changes: LineageStore => Unit): CheckpointId = {
    changes(s)
    s.commit()
  }
  private def value(s: LineageStore, k: String): String =
    Option(s.get(D, b(k))).map(new String(_, UTF_8)).orNull
  private def changesOf(s: LineageStore, target: CheckpointId) =
    s.changes(target, 1, D)
      .map { case (id, kind, k, v) =>
        (id.version, kind, new String(k, UTF_8), Option(v).map(new String(_, UTF_8)).orNull)
      }
      .toSeq

  test("merges are recorded as appended elements, every change of a list in order, and replay rebuilds it") {
    val s = newStore()
    s.load(CheckpointId.Empty)
    val v1 = commit(s) { s =>
      s.merge(D, b("k"), b("1"))
      s.merge(D, b("k"), b("2"))
      assert(value(s, "k") == "1,2", "a pending merge reads back through the batch in progress")
      s.put(D, b("j"), b("x"))
    }
    val v2 = commit(s)(_.merge(D, b("k"), b("3")))
    assert(value(s, "k") == "1,2,3")
    val v3 = commit(s) { s =>
      s.delete(D, b("k"), everyChange = true)
      s.merge(D, b("k"), b("9"))
      s.delete(D, b("gone"), everyChange = true) // a list cleared that never had a value: still a change
    }
    val v4 = commit(s) { s =>
      s.put(D, b("k"), b("p"), everyChange = true)
      s.merge(D, b("k"), b("q"))
      s.merge(D, b("j"), b("y"))
    }
    assert(contents(s) == Map("k" -> "p,q", "j" -> "x,y"))
    assert(s.columnFamilies.counts("default") == 2)

    assert(
      changesOf(s, v4) == Seq(
        (1L, DeltaRecordKind.Put, "j", "x"),
        (1L, DeltaRecordKind.Merge, "k", "1,2"), // two appends of one batch fold into one record
        (2L, DeltaRecordKind.Merge, "k", "3"), // only the appended element, not the list
        (3L, DeltaRecordKind.Delete, "gone", null),
        (3L, DeltaRecordKind.Delete, "k", null), // a clear then an append stay two changes
        (3L, DeltaRecordKind.Merge, "k", "9"),
        (4L, DeltaRecordKind.Merge, "j", "y"),
        (4L, DeltaRecordKind.Put, "k", "p,q") // an append after a put joins it
      )
    )
    // only the deltas holding merge records are format version 4
    def version(id: CheckpointId) =
      java.nio.file.Files.readAllBytes(new File(remote, id.deltaFileName).toPath)(7)
    assert(Seq(v1, v2, v3, v4).map(version) == Seq(4, 4, 4, 4))

    // replayed on a fresh directory, from the empty state, at every version
    for (
      (id, expected) <- Seq(
        v1 -> Map("k" -> "1,2", "j" -> "x"),
        v2 -> Map("k" -> "1,2,3", "j" -> "x"),
        v3 -> Map("k" -> "9", "j" -> "x"),
        v4 -> Map("k" -> "p,q", "j" -> "x,y")
      )
    ) {
      val fresh = newStore()
      val plan = fresh.load(id)
      assert(plan.base == LoadBase.Empty && plan.deltas.size == id.version)
      assert(contents(fresh) == expected, s"replay of $id")
      assert(fresh.columnFamilies.counts("default") == expected.size)
    }
    // replay on top of a local state that holds an ancestor (a merge appends to the value RocksDB holds)
    val behind = newStore()
    behind.load(v2)
    assert(behind.load(v4).deltas == Seq(v3, v4) && contents(behind) == Map("k" -> "p,q", "j" -> "x,y"))
  }

  test(
    "a delta without merges stays at format version 2, and the size of an append does not grow with the list"
  ) {
    // a snapshot every version keeps each header's lineage at one entry: the sizes compare the records
    val s = newStore(defaultSettings.copy(minDeltasForSnapshot = 1))
    s.load(CheckpointId.Empty)
    val plain = commitBatch(s, Map("a" -> "1"))
    def size(id: CheckpointId) = new File(remote, id.deltaFileName).length()
    assert(java.nio.file.Files.readAllBytes(new File(remote, plain.deltaFileName).toPath)(7) == 2)
    val element = "e" * 100
    val ids = (1 to 30).map(_ => commit(s)(_.merge(D, b("list"), b(element))))
    assert(value(s, "list").length == 30 * 100 + 29)
    val sizes = ids.drop(1).map(size) // the first append also records the family's key count
    assert(sizes.distinct.size == 1, s"delta sizes of single appends: $sizes")
    // header (about 150 bytes) and one record of the element, while the list grows to 3029 bytes
    assert(
      sizes.head < 3 * element.length,
      s"an append's delta holds the element, not the list: ${sizes.head}"
    )
  }

  test(
    "many appends per key across batches: values and key counts match a model, restored from a snapshot too"
  ) {
    val s = newStore()
    s.load(CheckpointId.Empty)
    val model = scala.collection.mutable.Map.empty[String, Vector[String]]
    val rng = new scala.util.Random(50)
    val ids = (1 to 8).map { batch =>
      (1 to 400).foreach { n =>
        val key = s"k${rng.nextInt(40)}"
        if (n % 97 == 0) {
          s.delete(D, b(key), everyChange = true) // a list cleared, maybe appended to again in this batch
          model -= key
        } else {
          val element = s"$batch.$n"
          s.merge(D, b(key), b(element))
          model(key) = model.getOrElse(key, Vector.empty) :+ element
        }
        assert(s.columnFamilies.counts("default") == model.size, s"batch $batch, change $n")
      }
      val id = s.commit()
      if (batch == 5) { s.freezeNow(); assert(s.uploadSnapshots() == 1) }
      assert(contents(s) == model.map { case (k, v) => k -> v.mkString(",") }.toMap, s"batch $batch")
      id
    }
    val expected = model.map { case (k, v) => k -> v.mkString(",") }.toMap
    val restored = newStore()
    val plan = restored.load(ids.last)
    assert(plan.base == LoadBase.Snapshot(ids(4)) && plan.deltas == ids.drop(5), s"restored from $plan")
    assert(contents(restored) == expected)
    assert(restored.columnFamilies.counts("default") == expected.size)
    // and the restored store goes on appending with the right counts
    restored.merge(D, b("new"), b("x"))
    restored.merge(D, b("k0"), b("y"))
    restored.commit()
    assert(restored.columnFamilies.counts("default") == (expected.keySet + "new" + "k0").size)
  }
}

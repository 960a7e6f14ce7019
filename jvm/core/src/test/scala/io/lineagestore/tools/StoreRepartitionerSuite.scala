package io.lineagestore.tools

import java.io.File
import java.nio.file.Files

import org.scalatest.BeforeAndAfterEach
import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.lineage.CheckpointId
import io.lineagestore.store.{LineageStore, LocalDirectories, StoreSettings}

/** [[StoreRepartitioner]] on stores written by the real store on a local filesystem, with a placement by the
  * key's last byte (Spark's placement is the Spark glue's, tested end to end against Spark's shuffle).
  */
class StoreRepartitionerSuite extends AnyFunSuite with BeforeAndAfterEach {
  private var tmp: File = _
  override def beforeEach(): Unit = tmp = Files.createTempDirectory("lineagestore-repartition").toFile
  override def afterEach(): Unit = LocalDirectories.deleteRecursively(tmp)

  private def dir(p: Int) = new File(tmp, s"cp/state/0/$p").toURI.toString
  private def key(i: Int) = Array[Byte](0, i.toByte)
  private def byLastByte(n: Int): KeyPlacement = new KeyPlacement {
    override val partitions: Int = n
    override def partitionOf(key: Array[Byte]): Int = (key.last & 0xff) % n
  }

  /** Old partition p holds keys i with i % oldN == p, committed at versions 1..2 (batch 1 = version 2). */
  private def writeOld(oldN: Int, keys: Int): Seq[RepartitionSource] = (0 until oldN).map { p =>
    ToolStore.using(StoreRef(0, p, "default", dir(p))) { t =>
      val s = new LineageStore(t.files, new File(tmp, s"w$p"), StoreSettings.Default)
      try {
        s.load(CheckpointId.Empty)
        s.put(1, key(1000 + p), "gone".getBytes) // deleted in version 2: must not come back
        s.commit(s"a$p")
        s.delete(1, key(1000 + p))
        (0 until keys).filter(_ % oldN == p).foreach(i => s.put(1, key(i), s"v$i".getBytes))
        RepartitionSource(p, dir(p), s.commit(s"b$p"))
      } finally s.close()
    }
  }

  private def readNew(p: Int, id: CheckpointId): Map[Int, String] =
    ToolStore.using(StoreRef(0, p, "default", dir(p))) { t =>
      val s = new LineageStore(t.files, new File(tmp, s"r$p-${id.uniqueId}"), StoreSettings.Default)
      try {
        s.load(id)
        val it = s.scan(1, Array.emptyByteArray, null)
        try it.map { case (k, v) => (k.last & 0xff) -> new String(v) }.toMap
        finally it.close()
      } finally s.close()
    }

  for ((oldN, newN) <- Seq(3 -> 5, 4 -> 2, 2 -> 4, 2 -> 6, 6 -> 3))
    test(s"$oldN -> $newN: every key once, where placed") {
      val keys = 60
      val sources = writeOld(oldN, keys)
      val r = StoreRepartitioner.run(0, "default", sources, dir, 2, byLastByte(newN), scratchRoot = tmp)
      assert(r.rowsRead == keys)
      assert(r.uniqueIds.size == newN && r.uniqueIds.distinct.size == newN)
      val all = (0 until newN).map(p => p -> readNew(p, CheckpointId(3, r.uniqueIds(p))))
      all.foreach { case (p, rows) =>
        assert(rows.keySet.forall(_ % newN == p), s"partition $p: ${rows.keySet}")
      }
      assert(all.flatMap(_._2).toMap == (0 until keys).map(i => i -> s"v$i").toMap)
      assert(r.rowsPerPartition == all.map(_._2.size.toLong))
      // the old lineage is untouched: each old partition still loads its committed checkpoint
      sources
        .foreach(s => assert(readNew(s.partitionId, s.committed).keySet.forall(_ % oldN == s.partitionId)))
    }

  test("a placement outside 0 until n is refused, naming the store") {
    val sources = writeOld(2, 4)
    val bad = new KeyPlacement {
      override val partitions = 3
      override def partitionOf(key: Array[Byte]): Int = 7
    }
    val e = intercept[IllegalStateException](
      StoreRepartitioner.run(0, "default", sources, dir, 2, bad, scratchRoot = tmp)
    )
    assert(e.getMessage.contains("partition 7 of 3"))
  }

  test("groups: a multiple grows each old partition alone, a divisor folds without placing, others mix") {
    assert(
      RepartitionGroups.plan(2, 6) == Seq(
        RepartitionGroup(Seq(0), Seq(0, 2, 4), direct = false),
        RepartitionGroup(Seq(1), Seq(1, 3, 5), direct = false)
      )
    )
    assert(
      RepartitionGroups.plan(6, 3) == Seq(
        RepartitionGroup(Seq(0, 3), Seq(0), direct = true),
        RepartitionGroup(Seq(1, 4), Seq(1), direct = true),
        RepartitionGroup(Seq(2, 5), Seq(2), direct = true)
      )
    )
    assert(RepartitionGroups.plan(8, 12) == Seq(RepartitionGroup(0 until 8, 0 until 12, direct = false)))
    assert(
      RepartitionGroups.plan(8, 4).map(_.oldPartitions) == Seq(Seq(0, 4), Seq(1, 5), Seq(2, 6), Seq(3, 7))
    )
  }

  test("growing by a multiple refuses an old state that is not where the placement puts its keys") {
    val sources = writeOld(2, 8) // old partition p holds keys i % 2 == p
    val shifted = new KeyPlacement { // ... but this placement sends key 0 to partition 1, fed by old 1 only
      override val partitions = 4
      override def partitionOf(key: Array[Byte]): Int = ((key.last & 0xff) + 1) % 4
    }
    val e = intercept[IllegalStateException](
      StoreRepartitioner.run(0, "default", sources, dir, 2, shifted, scratchRoot = tmp)
    )
    assert(e.getMessage.contains("old partition 0 belongs in new partition 1"), e.getMessage)
    assert(e.getMessage.contains("not where Spark's shuffle puts its keys"))
  }

  /** Old partitions holding, besides nothing in the default family, a family "byKey" keyed (g, ...) and a
    * family "byExpiry" keyed (expiry, g), with g = the key's group, as a timer's two indexes are; and an
    * empty family "unused". Each family's placement reads g where that family keeps it.
    */
  private def writeFamilies(oldN: Int, groups: Int): Seq[RepartitionSource] = (0 until oldN).map { p =>
    ToolStore.using(StoreRef(0, p, "default", dir(p))) { t =>
      val s = new LineageStore(t.files, new File(tmp, s"f$p"), StoreSettings.Default)
      try {
        s.load(CheckpointId.Empty)
        Seq("byKey", "byExpiry", "unused").foreach(s.columnFamilies.create)
        val byKey = s.columnFamilies.idOf("byKey").get
        val byExpiry = s.columnFamilies.idOf("byExpiry").get
        (0 until groups).filter(_ % oldN == p).foreach { g =>
          s.put(byKey, Array[Byte](g.toByte, 7), s"k$g".getBytes)
          s.put(byExpiry, Array[Byte](9, g.toByte), s"e$g".getBytes)
        }
        RepartitionSource(p, dir(p), s.commit(s"f$p"))
      } finally s.close()
    }
  }

  private def byFamily(n: Int, known: Set[String] = Set("byKey", "byExpiry", "unused")): KeyPlacement =
    new KeyPlacement {
      override val partitions: Int = n
      override def partitionOf(key: Array[Byte]): Int = throw new AssertionError("no default-family rows")
      override def ofFamily(family: String): Option[KeyPlacement] =
        if (family == "default") Some(this)
        else if (!known(family)) None
        else
          Some(new KeyPlacement {
            override val partitions: Int = n
            override def partitionOf(key: Array[Byte]): Int =
              (if (family == "byExpiry") key(1) else key(0)) % n
          })
    }

  for ((oldN, newN) <- Seq(2 -> 3, 2 -> 4, 4 -> 2))
    test(s"column families, $oldN -> $newN: each row placed by its family's rule, every family created") {
      val sources = writeFamilies(oldN, 12)
      val r = StoreRepartitioner.run(0, "default", sources, dir, 1, byFamily(newN), scratchRoot = tmp)
      assert(r.rowsRead == 24)
      (0 until newN).foreach { p =>
        ToolStore.using(StoreRef(0, p, "default", dir(p))) { t =>
          val s = new LineageStore(t.files, new File(tmp, s"rf$p"), StoreSettings.Default)
          try {
            s.load(CheckpointId(2, r.uniqueIds(p)))
            assert(s.columnFamilies.names == Set("default", "byKey", "byExpiry", "unused"))
            def rows(family: String) = {
              val it = s.scan(s.columnFamilies.idOf(family).get, Array.emptyByteArray, null)
              try it.map { case (k, v) => k.toSeq -> new String(v) }.toMap
              finally it.close()
            }
            val mine = (0 until 12).filter(_ % newN == p)
            assert(rows("byKey") == mine.map(g => Seq[Byte](g.toByte, 7) -> s"k$g").toMap)
            assert(rows("byExpiry") == mine.map(g => Seq[Byte](9, g.toByte) -> s"e$g").toMap)
            assert(rows("unused").isEmpty)
          } finally s.close()
        }
      }
    }

  test("a column family without a placement is refused by name") {
    val sources = writeFamilies(2, 4)
    val e = intercept[UnsupportedOperationException](
      StoreRepartitioner.run(0, "default", sources, dir, 1, byFamily(3, Set("byKey")), scratchRoot = tmp)
    )
    assert(e.getMessage.contains("column family 'byExpiry' has no known placement"), e.getMessage)
  }
}

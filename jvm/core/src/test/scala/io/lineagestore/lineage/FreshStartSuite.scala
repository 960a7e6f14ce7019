package io.lineagestore.lineage

import java.io.{ByteArrayInputStream, ByteArrayOutputStream}

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.format.{
  CorruptCheckpointFileException,
  DeltaCodec,
  DeltaFile,
  DeltaHeader,
  StoreIdentity
}
import io.lineagestore.lineage.CheckpointId.{Delta, Snapshot}

/** A lineage that starts afresh from the empty state above version 1 (Spark's `loadEmpty`, offline
  * repartitioning): its delta format, how loads resolve it, and what clean-up may delete around it.
  */
class FreshStartSuite extends AnyFunSuite {
  private def c(v: Long) = CheckpointId(v, s"w$v")
  private def old(v: Long) = CheckpointId(v, s"o$v")
  private val store = StoreIdentity(1, 2, "default")

  // ---- format ---------------------------------------------------------------------------------------------

  private def delta(h: DeltaHeader): Array[Byte] = {
    val out = new ByteArrayOutputStream()
    val w = new DeltaFile.Writer(out, h, DeltaCodec.Default)
    w.put(Array[Byte](1), Array[Byte](2))
    w.close()
    out.toByteArray
  }
  private def read(bytes: Array[Byte], id: CheckpointId): DeltaHeader =
    DeltaFile.read(new ByteArrayInputStream(bytes), "x.delta", store, id)((_, _, _) => ())

  test("a fresh-start delta is written at format version 3 and reads back as starting from empty") {
    val h = DeltaHeader(store, c(8), Nil, fromEmpty = true)
    val bytes = delta(h)
    assert(bytes(7) == 3)
    assert(read(bytes, c(8)) == h)
    assert(DeltaFile.readHeader(new ByteArrayInputStream(bytes), "x.delta", store, c(8)).fromEmpty)
  }

  test("an ordinary delta stays at format version 2, readable by builds that predate fresh starts") {
    val h = DeltaHeader(store, c(9), Seq(c(8)))
    val bytes = delta(h)
    assert(bytes(7) == 2)
    assert(read(bytes, c(9)) == h)
    val first = DeltaHeader(store, c(1), Nil)
    assert(delta(first)(7) == 2 && !read(delta(first), c(1)).fromEmpty)
  }

  test("a version 3 delta with an unknown lineage base, or a fresh start with ancestors, is rejected") {
    val bytes = delta(DeltaHeader(store, c(8), Nil, fromEmpty = true))
    // the base byte follows the (empty) lineage: magic, store, checkpoint, count
    val at = 8 + 8 + 4 + 2 + store.storeName.length + 8 + 2 + c(8).uniqueId.length + 4
    assert(bytes(at) == 1)
    val e = intercept[CorruptCheckpointFileException](read(bytes.updated(at, 7.toByte), c(8)))
    assert(e.getMessage.contains("x.delta"))
    intercept[IllegalArgumentException](DeltaHeader(store, c(8), Seq(c(7)), fromEmpty = true))
  }

  // ---- resolution -----------------------------------------------------------------------------------------

  /** Old lineage o1..o7 (snapshot at o5), fresh start at w8, then w9..w11; records every delta read. */
  private class Dir(snapshots: Set[CheckpointId]) extends LineageSource {
    val read = scala.collection.mutable.Buffer.empty[CheckpointId]
    private val lineages: Map[CheckpointId, Lineage] =
      (1L to 7L).map(v => old(v) -> Lineage((v - 1 to 1 by -1).map(old))).toMap ++
        Map(c(8) -> Lineage(Nil, fromEmpty = true)) ++
        (9L to 11L).map(v => c(v) -> Lineage((v - 1 to 8 by -1).map(c))).toMap
    override def hasSnapshot(id: CheckpointId): Boolean = snapshots(id)
    override def ancestorsOf(id: CheckpointId): Option[Seq[CheckpointId]] = lineageOf(id).map(_.ancestors)
    override def lineageOf(id: CheckpointId): Option[Lineage] = { read += id; lineages.get(id) }
  }

  test("a load stops at the fresh start: the empty state plus its delta, nothing of the older lineage") {
    val dir = new Dir(Set(old(5)))
    val plan = LineageResolver.plan(c(11), None, dir)
    assert(plan.base == LoadBase.Empty)
    assert(plan.deltas == Seq(c(8), c(9), c(10), c(11)))
    assert(plan.lineage == Seq(c(10), c(9), c(8)))
    assert(plan.freshStart.contains(c(8)))
    assert(dir.read.forall(_.version >= 8), dir.read)
  }

  test("the fresh start itself loads from its delta alone, or from its snapshot once there is one") {
    val plan = LineageResolver.plan(c(8), None, new Dir(Set(old(5))))
    assert(plan.base == LoadBase.Empty && plan.deltas == Seq(c(8)) && plan.lineage.isEmpty)
    assert(LineageResolver.plan(c(8), None, new Dir(Set(c(8)))).base == LoadBase.Snapshot(c(8)))
    assert(
      LineageResolver.plan(c(10), None, new Dir(Set(c(8)))) == LoadPlan(
        c(10),
        LoadBase.Snapshot(c(8)),
        Seq(c(9), c(10)),
        Seq(c(9), c(8))
      )
    )
  }

  test("a local store on the old lineage is never a base for the new one") {
    val plan = LineageResolver.plan(c(9), Some(old(7)), new Dir(Set.empty))
    assert(plan.base == LoadBase.Empty && plan.deltas == Seq(c(8), c(9)))
  }

  test("a change feed does not reach below the fresh start") {
    val dir = new Dir(Set.empty)
    assert(LineageResolver.chain(c(11), 8, dir) == Seq(c(8), c(9), c(10), c(11)))
    val e = intercept[LineageException](LineageResolver.chain(c(11), 5, dir))
    assert(e.getMessage.contains("version 8") && e.getMessage.contains(c(8).deltaFileName))
  }

  test("an empty lineage above version 1 that does not say it starts from empty is still rejected") {
    val dir = new LineageSource {
      def hasSnapshot(id: CheckpointId) = false
      def ancestorsOf(id: CheckpointId) = Some(Nil)
    }
    intercept[LineageException](LineageResolver.plan(c(8), None, dir))
  }

  // ---- clean-up -------------------------------------------------------------------------------------------

  private def d(id: CheckpointId) = CheckpointFile(id, Delta)
  private def z(id: CheckpointId) = CheckpointFile(id, Snapshot)
  private val oldFiles = (1L to 7L).map(v => d(old(v))) ++ Seq(z(old(5)))

  test("while the window reaches below the fresh start, nothing is deleted") {
    val existing = oldFiles ++ (8L to 11L).map(v => d(c(v)))
    val committed = (8L to 11L).map(v => v -> s"w$v").toMap
    val plan = RetentionPlanner.plan(c(11), committed, existing, 5, freshStart = Some(c(8)))
    assert(plan.delete.isEmpty)
  }

  test("once the window is past the fresh start, the older lineage goes and the fresh start is a base") {
    val existing = oldFiles ++ (8L to 14L).map(v => d(c(v)))
    val committed = (8L to 14L).map(v => v -> s"w$v").toMap
    val plan = RetentionPlanner.plan(c(14), committed, existing, 5, freshStart = Some(c(8)))
    assert(plan.snapshotBase == c(8))
    assert(plan.delete.toSet == oldFiles.toSet)
    // with a snapshot above the fresh start, that snapshot is the base and the fresh start goes too
    val withSnap = existing :+ z(c(9))
    val plan2 = RetentionPlanner.plan(c(14), committed, withSnap, 5, freshStart = Some(c(8)))
    assert(plan2.snapshotBase == c(9) && plan2.delete.toSet == (oldFiles :+ d(c(8))).toSet)
  }
}

package io.lineagestore.lineage

import org.scalatest.funsuite.AnyFunSuite

/** The load examples of the checkpoint-structure-V2 design, plus the cases it leaves implicit. */
class LineageResolverSuite extends AnyFunSuite {

  private def c(v: Long, id: String) = CheckpointId(v, id)

  /** An in-memory checkpoint directory: delta lineages and which snapshots exist; counts lookups. */
  private class Dir(deltas: Map[CheckpointId, Seq[CheckpointId]], snapshots: Set[CheckpointId])
      extends LineageSource {
    var deltaReads = 0
    override def hasSnapshot(id: CheckpointId): Boolean = snapshots(id)
    override def ancestorsOf(id: CheckpointId): Option[Seq[CheckpointId]] = {
      deltaReads += 1; deltas.get(id)
    }
  }

  // 20_d8e2ca47 .. 23_689aa6bd from the design document (IDs shortened to their letters)
  private val v20 = c(20, "d8e2ca47")
  private val v21a = c(21, "ef6618c2")
  private val v21 = c(21, "f4d05ac9")
  private val v22 = c(22, "4489578d")
  private val v23 = c(23, "689aa6bd")
  private val v23b = c(23, "8205c96f")
  private val v24 = c(24, "32e3cc2a")
  private val baseDeltas = Map(
    v20 -> Seq(c(19, "x19")),
    v21a -> Seq(v20),
    v21 -> Seq(v20),
    v22 -> Seq(v21, v20),
    v23 -> Seq(v22, v21, v20),
    v23b -> Seq(v22, v21, v20),
    v24 -> Seq(v23)
  )

  test("example 1: the unique ID has a snapshot, load it and nothing else") {
    val dir = new Dir(baseDeltas, Set(v20, v23))
    val plan = LineageResolver.plan(v23, None, dir)
    assert(plan.base == LoadBase.Snapshot(v23))
    assert(plan.deltas.isEmpty)
  }

  test("example 2: only a delta; replay from the presumed snapshot, ignoring the other attempt's snapshot") {
    val dir = new Dir(baseDeltas, Set(v20, v23b))
    val plan = LineageResolver.plan(v23, None, dir)
    assert(plan.base == LoadBase.Snapshot(v20))
    assert(plan.deltas == Seq(v21, v22, v23))
    assert(plan.lineage == Seq(v22, v21, v20))
    assert(!plan.deltas.contains(v21a))
  }

  test("an unusable snapshot counts as absent: the plan detours to an older one, or to the empty state") {
    val dir = new Dir(baseDeltas, Set(v20, v23))
    assert(LineageResolver.plan(v23, None, dir).base == LoadBase.Snapshot(v23))
    val older = LineageResolver.plan(v23, None, dir, unusable = Set(v23))
    assert(older.base == LoadBase.Snapshot(v20) && older.deltas == Seq(v21, v22, v23))
    val (c1, c2, c3) = (c(1, "a"), c(2, "b"), c(3, "c"))
    val young = new Dir(Map(c1 -> Nil, c2 -> Seq(c1), c3 -> Seq(c2, c1)), Set(c2))
    val empty = LineageResolver.plan(c3, None, young, unusable = Set(c2))
    assert(empty.base == LoadBase.Empty && empty.deltas == Seq(c1, c2, c3))
  }

  test("example 3: presumed snapshot missing, keep tracing lineage through the older delta") {
    val dir = new Dir(baseDeltas, Set(v20, v23b))
    val plan = LineageResolver.plan(v24, None, dir)
    assert(plan.base == LoadBase.Snapshot(v20))
    assert(plan.deltas == Seq(v21, v22, v23, v24))
    assert(dir.deltaReads == 2) // 24's lineage, then 23's
  }

  test("no snapshot survives at all: trace down to the empty state at version 0") {
    val deltas = Map(c(1, "a") -> Nil, c(2, "b") -> Seq(c(1, "a")), c(3, "c") -> Seq(c(2, "b")))
    val plan = LineageResolver.plan(c(3, "c"), None, new Dir(deltas, Set.empty))
    assert(plan.base == LoadBase.Empty)
    assert(plan.deltas == Seq(c(1, "a"), c(2, "b"), c(3, "c")))
  }

  test("a store already at the right ID loads nothing and reads nothing") {
    val dir = new Dir(baseDeltas, Set(v20))
    val plan = LineageResolver.plan(v23, Some(v23), dir)
    assert(plan.isNoOp && plan.deltas.isEmpty && dir.deltaReads == 0)
  }

  test("a store at another attempt of the same version reloads instead of using it") {
    val dir = new Dir(baseDeltas, Set(v20))
    val plan = LineageResolver.plan(v23, Some(v23b), dir)
    assert(plan.base == LoadBase.Snapshot(v20))
    assert(plan.deltas == Seq(v21, v22, v23))
  }

  test("a store at an ancestor replays only the deltas after it, even when a snapshot exists") {
    val dir = new Dir(baseDeltas, Set(v20, v22))
    val plan = LineageResolver.plan(v23, Some(v21), dir)
    assert(plan.base == LoadBase.Local(v21))
    assert(plan.deltas == Seq(v22, v23))
  }

  test("a store at a losing attempt of an older version is not an ancestor") {
    val dir = new Dir(baseDeltas, Set(v20))
    val plan = LineageResolver.plan(v23, Some(v21a), dir)
    assert(plan.base == LoadBase.Snapshot(v20))
  }

  test("version 0 is the empty state") {
    assert(
      LineageResolver.plan(CheckpointId.Empty, None, new Dir(Map.empty, Set.empty)).base == LoadBase.Empty
    )
  }

  test("a missing delta in the middle of the lineage names the file") {
    val dir = new Dir(baseDeltas - v23, Set.empty)
    val e = intercept[LineageException](LineageResolver.plan(v24, None, dir))
    assert(e.getMessage.contains("23_689aa6bd.delta"))
  }

  test("a lineage record with a gap is rejected") {
    val dir = new Dir(Map(c(5, "e") -> Seq(c(3, "c"))), Set(c(3, "c")))
    val e = intercept[LineageException](LineageResolver.plan(c(5, "e"), None, dir))
    assert(e.getMessage.contains("5_e.delta"))
  }

  test("the target's delta was cleaned but its snapshot exists") {
    val dir = new Dir(Map.empty, Set(v23))
    assert(LineageResolver.plan(v23, None, dir).base == LoadBase.Snapshot(v23))
  }

  test("the change-feed chain follows lineage records only, across presumed snapshots") {
    val dir = new Dir(baseDeltas, Set(v20))
    assert(LineageResolver.chain(v24, 21, dir) == Seq(v21, v22, v23, v24))
    assert(LineageResolver.chain(v23, 23, dir) == Seq(v23))
    val e = intercept[LineageException](LineageResolver.chain(v24, 19, new Dir(baseDeltas - v20, Set.empty)))
    assert(e.getMessage.contains("20_d8e2ca47.delta"))
  }
}

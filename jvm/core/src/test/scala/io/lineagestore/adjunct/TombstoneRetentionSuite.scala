package io.lineagestore.adjunct

import org.scalatest.funsuite.AnyFunSuite

/** The tombstone bound's decisions (docs/adjunct-tables.md "Tombstone retention"). */
class TombstoneRetentionSuite extends AnyFunSuite {
  private def at(highest: Option[Long]) =
    Some(AdjunctCommit(3, "u", "src", 2, tombstones = Some(TombstoneStats(highest, 0, 0))))

  test(
    "the floor is the record's highest ordering minus the bound, none without either, never underflowing"
  ) {
    assert(TombstoneRetention.floor(Some(100), at(Some(300))) == Some(200))
    assert(TombstoneRetention.floor(Some(0), at(Some(300))) == Some(300))
    assert(TombstoneRetention.floor(None, at(Some(300))).isEmpty)
    assert(TombstoneRetention.floor(Some(100), at(None)).isEmpty)
    assert(TombstoneRetention.floor(Some(100), None).isEmpty)
    assert(TombstoneRetention.floor(Some(10), at(Some(Long.MinValue + 3))) == Some(Long.MinValue))
  }

  test("the next record's highest ordering is the greatest of the record's and the tasks'") {
    assert(TombstoneRetention.stats(at(Some(5)), Seq(Some(3), None), 2, 1) == TombstoneStats(Some(5), 2, 1))
    assert(TombstoneRetention.stats(at(Some(5)), Seq(Some(9)), 0, 0).highestOrdering == Some(9))
    assert(TombstoneRetention.stats(None, Seq(None), 0, 0).highestOrdering.isEmpty)
  }

  test("a bound is settled when the table is created and refused by name when it changes or is negative") {
    assert(TombstoneRetention.settle("t", Some(5), None, created = true) == Some(5))
    assert(TombstoneRetention.settle("t", None, None, created = true).isEmpty)
    assert(TombstoneRetention.settle("t", None, Some(5), created = false) == Some(5))
    assert(TombstoneRetention.settle("t", Some(5), Some(5), created = false) == Some(5))
    val changed = intercept[IllegalArgumentException](TombstoneRetention.settle("t", Some(6), Some(5), false))
    assert(changed.getMessage.contains("tombstone_retention=5") && changed.getMessage.contains("=6"))
    val added = intercept[IllegalArgumentException](TombstoneRetention.settle("t", Some(6), None, false))
    assert(added.getMessage.contains("created without tombstone retention"))
    val negative = intercept[IllegalArgumentException](TombstoneRetention.settle("t", Some(-1), None, true))
    assert(negative.getMessage.contains("tombstone_retention=-1 is negative"))
    val damaged =
      intercept[IllegalStateException](TombstoneRetention.of(Map("tombstoneRetention" -> "x"), "t"))
    assert(damaged.getMessage.contains("tombstoneRetention='x'"))
  }

  test("index keys sort by ordering (negative ones first), then key; the end bounds those at or below") {
    val orderings = Seq(Long.MinValue, -5L, -1L, 0L, 1L, 7L, Long.MaxValue)
    val keys = orderings.map(o => TombstoneRetention.indexKey(o, Array[Byte](1, 2)))
    val cmp = java.util.Arrays.compareUnsigned(_: Array[Byte], _: Array[Byte])
    assert(keys.sliding(2).forall { case Seq(a, b) => cmp(a, b) < 0 })
    assert(TombstoneRetention.keyOfIndex(keys(3)).toSeq == Seq[Byte](1, 2))
    val end = TombstoneRetention.indexEnd(0L).get
    assert(keys.map(k => cmp(k, end) < 0) == Seq(true, true, true, true, false, false, false))
    assert(TombstoneRetention.indexEnd(Long.MaxValue).isEmpty)
  }
}

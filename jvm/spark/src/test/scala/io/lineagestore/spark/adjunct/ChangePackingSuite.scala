package io.lineagestore.spark.adjunct

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.spark.adjunct.AdjunctMaintain.Change

class ChangePackingSuite extends AnyFunSuite {
  private def change(key: Array[Byte], ordering: Long, value: Array[Byte], badOp: String = null) =
    Change(key, ordering, value, badOp)

  test("a task's changes come back from their packed bytes as they were, unknown ops included") {
    val changes = Array(
      change(Array[Byte](1, 2), 7L, Array[Byte](9, 9, 9)),
      change(Array.emptyByteArray, Long.MinValue, Array.emptyByteArray),
      change(Array[Byte](-1), 3L, Array[Byte](0), badOp = "truncate-é")
    )
    val back = ChangePacking.unpack(ChangePacking.pack(changes)).toArray
    assert(back.length == 3)
    back.zip(changes).foreach { case (b, c) =>
      assert(b.key.sameElements(c.key) && b.value.sameElements(c.value))
      assert(b.ordering == c.ordering && b.badOp == c.badOp)
    }
    assert(ChangePacking.unpack(ChangePacking.pack(Array.empty)).isEmpty)
  }

  test("keys sort in the store's bytewise order: unsigned, a prefix first") {
    val keys =
      Seq(Array[Byte](-1), Array[Byte](1, 0), Array[Byte](1), Array[Byte](0x7f), Array.emptyByteArray)
    val sorted = keys.map(change(_, 0, Array.emptyByteArray)).toArray
    java.util.Arrays.sort(sorted, ChangePacking.ByKey)
    assert(sorted.map(_.key.toSeq).toSeq == Seq(Seq(), Seq(1), Seq(1, 0), Seq(0x7f), Seq(-1)))
  }
}

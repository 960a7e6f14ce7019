package io.lineagestore.adjunct

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.lineage.CheckpointId

/** The record a maintain batch writes over the checkpoints its executor tasks returned
  * (docs/adjunct-tables.md "How attempts, re-runs and lost executors resolve").
  */
class MaintainRecordSuite extends AnyFunSuite {
  private def id(v: Long, u: String) = CheckpointId(v, u)
  private val fresh = () => "table-2"
  private val v1 =
    AdjunctCommit(1, "table-1", "src", 0, partitions = 3, stores = Map(0 -> id(1, "a"), 2 -> id(1, "c")))

  test("which partitions commit: a table of one store always, a partition when changed or emptied") {
    assert(MaintainRecord.commits(1, hasChanges = false, replace = false, CheckpointId.Empty))
    assert(!MaintainRecord.commits(3, hasChanges = false, replace = false, id(4, "x")))
    assert(MaintainRecord.commits(3, hasChanges = true, replace = false, CheckpointId.Empty))
    assert(MaintainRecord.commits(3, hasChanges = false, replace = true, id(4, "x")))
    assert(!MaintainRecord.commits(3, hasChanges = false, replace = true, CheckpointId.Empty))
  }

  test("a partitioned record names each committed child and keeps the others' checkpoints") {
    val r = MaintainRecord.record("t", Some(v1), 3, Seq(1 -> id(1, "b"), 2 -> id(2, "c2")), "src", 1, fresh)
    assert(
      r == AdjunctCommit(2, "table-2", "src", 1, 3, Map(0 -> id(1, "a"), 1 -> id(1, "b"), 2 -> id(2, "c2")))
    )
  }

  test("a table of one store is its store's checkpoint") {
    val r = MaintainRecord.record("t", None, 1, Seq(0 -> id(1, "s")), "src", 0, fresh)
    assert(r == AdjunctCommit(1, "s", "src", 0))
    val next = MaintainRecord.record("t", Some(r), 1, Seq(0 -> id(2, "s2")), "src", 1, fresh)
    assert(next == AdjunctCommit(2, "s2", "src", 1))
  }

  test("a checkpoint that is not a child of the recorded parent is refused, naming partition and parent") {
    val e = intercept[IllegalStateException](
      MaintainRecord.record("t", Some(v1), 3, Seq(0 -> id(3, "z")), "src", 1, fresh)
    )
    assert(e.getMessage.contains("partition 0") && e.getMessage.contains("1_a"), e.getMessage)
    intercept[IllegalStateException](
      MaintainRecord.record("t", Some(v1), 3, Seq(5 -> id(1, "q")), "src", 1, fresh)
    )
  }

  test("two results for one partition are refused: a version names one checkpoint per partition") {
    val e = intercept[IllegalStateException](
      MaintainRecord.record("t", Some(v1), 3, Seq(1 -> id(1, "b"), 1 -> id(1, "b2")), "src", 1, fresh)
    )
    assert(e.getMessage.contains("partition 1"), e.getMessage)
  }

  test("a table of one store needs its store's checkpoint") {
    intercept[IllegalStateException](MaintainRecord.record("t", None, 1, Nil, "src", 0, fresh))
  }
}

/** Where a batch's maintain tasks are asked to run. */
class MaintainPlacementSuite extends AnyFunSuite {
  private val hosts = Seq("h1", "h2", "h3")

  test("a first batch spreads its partitions over the executors' hosts") {
    val placed = MaintainPlacement.place(6, Map.empty, hosts)
    assert(placed.keySet == (0 until 6).toSet)
    assert(hosts.forall(h => placed.values.count(_ == h) == 2), placed)
  }

  test("a partition stays where it last committed while that host runs an executor; a lost host's move") {
    val last = Map(0 -> "executor_h1_1", 1 -> "executor_h2_2", 2 -> "executor_gone_3")
    val placed = MaintainPlacement.place(3, last, hosts)
    assert(placed(0) == "executor_h1_1" && placed(1) == "executor_h2_2")
    assert(placed(2) == "h3", placed) // the least loaded host
    assert(MaintainPlacement.hostOf("executor_h1_1") == "h1" && MaintainPlacement.hostOf("h2") == "h2")
  }

  test("with no executor known the hints stay as they are") {
    assert(MaintainPlacement.place(2, Map(0 -> "executor_h1_1"), Nil) == Map(0 -> "executor_h1_1"))
  }
}

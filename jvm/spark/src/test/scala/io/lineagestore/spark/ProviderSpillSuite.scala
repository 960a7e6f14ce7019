package io.lineagestore.spark

import org.apache.spark.sql.execution.streaming.state._

/** A batch larger than `maxPendingBytes` through Spark's provider API: it spills to local disk and commits
  * whole (the engine's own cases: `SpillSuite`).
  */
class ProviderSpillSuite extends ProviderTestSupport {

  // the smallest bound: a few thousand rows spill
  private def bound = storeConf("spark.sql.streaming.stateStore.lineagestore.maxPendingBytes" -> "1m")

  private def spilledBytes(s: StateStore): Long =
    s.metrics.customMetrics
      .collectFirst { case (m, v) if m.name == "lineagestoreSpilledBytes" => v }
      .getOrElse(0L)

  test("a batch over maxPendingBytes spills to local disk, commits whole and reports what it spilled") {
    val p = newProvider(conf = bound)
    val s = p.getStore(0, None)
    (1 to 30000).foreach(i => put(s, s"key-$i-" + ("x" * 50), i))
    (1 to 30000 by 3).foreach(i => remove(s, s"key-$i-" + ("x" * 50)))
    val expected = (1 to 30000).filter(_ % 3 != 1).map(i => (s"key-$i-" + ("x" * 50), 0) -> i).toMap
    assert(data(s) === expected) // a scan over the spilled runs and what stayed in memory
    s.commit()
    assert(spilledBytes(s) > 0)
    assert(s.metrics.numKeys === expected.size)
    val c1 = Ckpt(1, s.getStateStoreCheckpointInfo().stateStoreCkptId)
    closeProvider(p)
    assert(readAt(newProvider(conf = bound), c1) === expected) // another executor
  }

  test("list state past maxPendingBytes spills: appends across spills read back in order, and restore") {
    def values(s: ReadStateStore, k: String): Seq[Int] =
      s.valuesIterator(keyRow(k), "list").map(valueOf).toList
    val p = newCfProvider(conf = bound)
    val keys = (0 until 100).map(i => s"list-key-$i")
    val s = p.getStore(0, None)
    createCf(s, "list", multi = true)
    (0 until 1000).foreach(i => keys.foreach(k => s.merge(keyRow(k), valueRow(i), "list")))
    s.remove(keyRow(keys(1)), "list")
    s.merge(keyRow(keys(1)), valueRow(-1), "list")
    val expected = keys.map(k => k -> (if (k == keys(1)) Seq(-1) else 0 until 1000)).toMap
    assert(keys.forall(k => values(s, k) == expected(k)))
    s.commit()
    assert(spilledBytes(s) > 0)
    val c1 = Ckpt(1, s.getStateStoreCheckpointInfo().stateStoreCkptId)
    closeProvider(p)
    val r = newCfProvider(conf = bound).getReadStore(1, c1.id)
    try {
      r.registerColFamily("list", keySchema, valueSchema, noPrefix, true, false)
      assert(keys.forall(k => values(r, k) == expected(k)))
    } finally r.release()
  }
}

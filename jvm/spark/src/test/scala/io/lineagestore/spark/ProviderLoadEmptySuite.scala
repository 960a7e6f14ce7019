package io.lineagestore.spark

import java.io.File

import org.apache.spark.sql.catalyst.expressions.GenericInternalRow
import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.unsafe.types.UTF8String

/** `getStore(version, None, loadEmpty = true)` as Spark 4.3's offline repartitioning writer
  * (`StatePartitionAllColumnFamiliesWriter`) calls it: a new provider, an empty store at the batch's version,
  * puts, commit, `getStateStoreCheckpointInfo`, close. The query then resumes with a new provider loading the
  * checkpoint its commit log recorded.
  */
class ProviderLoadEmptySuite extends ProviderTestSupport {

  /** The old lineage 1..4 (with snapshots), holding "stale" and "k1".."k4"; returns its head. */
  private def oldLineage(id: StateStoreId = storeId()): Ckpt = {
    val p = newProvider(id)
    var c = Empty
    for (v <- 1 to 4) {
      c = batch(p, c) { s => put(s, "stale", v); put(s, s"k$v", v) }
      p.doMaintenance()
    }
    closeProvider(p)
    assert(snapshotFiles(id).nonEmpty)
    c
  }

  /** What StatePartitionAllColumnFamiliesWriter does for one partition at `batchId`. */
  private def rewrite(batchId: Long, rows: Map[String, Int], force: Boolean = false): Ckpt = {
    val w = newProvider()
    val s = w.getStore(batchId, None, forceSnapshotOnCommit = force, loadEmpty = true)
    assert(s.version === batchId)
    assert(data(s).isEmpty)
    rows.foreach { case (k, v) => put(s, k, v) }
    assert(s.commit() === batchId + 1)
    val info = s.getStateStoreCheckpointInfo()
    // what StateRewriter asserts of every partition
    assert(info.batchVersion === batchId + 1)
    assert(info.baseStateStoreCkptId.isEmpty)
    assert(info.stateStoreCkptId.nonEmpty)
    closeProvider(w)
    Ckpt(batchId + 1, info.stateStoreCkptId)
  }

  test(
    "getStore(loadEmpty) then commit: version+1 with no base ID; a new provider reloads only the new state"
  ) {
    val head = oldLineage()
    val c5 = rewrite(head.version, Map("kept" -> 7))
    assert(snapshotFiles().contains(s"5_${c5.id.get}.zip"), "the fresh start's snapshot is uploaded on close")
    assert(readAt(newProvider(), c5) === Map(("kept", 0) -> 7))
    // the query resumes on it: the next batch and a reload of that one never see the old keys
    val p = newProvider()
    val c6 = batch(p, c5)(s => put(s, "next", 1))
    closeProvider(p)
    assert(readAt(newProvider(), c6) === Map(("kept", 0) -> 7, ("next", 0) -> 1))
  }

  test("without its snapshot the fresh start is rebuilt from its delta alone, old files still present") {
    val head = oldLineage()
    val c5 = rewrite(head.version, Map("kept" -> 7))
    assert(fileOf(c5, "zip").delete())
    assert(deltaFiles().count(fileVersion(_) < 5) == 4, "the old lineage is still on storage")
    assert(readAt(newProvider(), c5) === Map(("kept", 0) -> 7))
    // and the old head stays loadable by its own ID (a reader of an older batch)
    assert(readAt(newProvider(), head)(("stale", 0)) === 4)
  }

  test("a repartitioned store on a partition that had no state, and with forceSnapshotOnCommit") {
    val c3 = rewrite(2, Map("a" -> 1, "b" -> 2), force = true)
    assert(snapshotFiles() === Set(s"3_${c3.id.get}.zip"))
    assert(deltaFiles() === Set(s"3_${c3.id.get}.delta"))
    assert(readAt(newProvider(), c3) === Map(("a", 0) -> 1, ("b", 0) -> 2))
  }

  test("column families are created in the empty store, as the writer does for transformWithState") {
    val w = newCfProvider()
    val s = w.getStore(9, None, loadEmpty = true)
    createCf(s, "listState", multi = true)
    put(s, "x", 1, cf = "listState")
    put(s, "y", 2)
    s.commit()
    val c10 = Ckpt(10, s.getStateStoreCheckpointInfo().stateStoreCkptId)
    closeProvider(w)
    val r = newCfProvider()
    val rs = r.getStore(c10.version, c10.id)
    try {
      createCf(rs, "listState", multi = true)
      assert(data(rs, "listState") === Map(("x", 0) -> 1))
      assert(data(rs) === Map(("y", 0) -> 2))
    } finally rs.abort()
  }

  test("Spark's own repartition writer (StatePartitionAllColumnFamiliesWriter) drives the provider") {
    // the writer puts state under <checkpoint>/state/<operator>/<partition>, as a query does
    val queryCkpt = new File(root, "query")
    val sid =
      StateStoreId(new File(queryCkpt, "state").getAbsolutePath, 0, 0, StateStoreId.DEFAULT_STORE_NAME)
    val head = oldLineage(sid)
    val schema = StateStoreColFamilySchema(
      StateStore.DEFAULT_COL_FAMILY_NAME,
      0.toShort,
      keySchema,
      0.toShort,
      valueSchema,
      Some(noPrefix),
      None
    )
    val writer = new StatePartitionAllColumnFamiliesWriter(
      storeConf(),
      hadoopConf(),
      0,
      queryCkpt.getAbsolutePath,
      0L,
      StateStoreId.DEFAULT_STORE_NAME,
      head.version,
      Map(StateStore.DEFAULT_COL_FAMILY_NAME -> StatePartitionWriterColumnFamilyInfo(schema)),
      None
    )
    // rows as StatePartitionAllColumnFamiliesReader produces them: (partition_key, key_bytes, value_bytes, cf)
    val rows = Seq("kept" -> 7, "other" -> 8).iterator.map { case (k, v) =>
      new GenericInternalRow(
        Array[Any](
          null,
          keyRow(k).getBytes,
          valueRow(v).getBytes,
          UTF8String.fromString(StateStore.DEFAULT_COL_FAMILY_NAME)
        )
      )
    }
    val info = writer.write(rows)
    assert(info.batchVersion === head.version + 1 && info.baseStateStoreCkptId.isEmpty)
    val c5 = Ckpt(info.batchVersion, info.stateStoreCkptId)
    assert(readAt(newProvider(sid), c5) === Map(("kept", 0) -> 7, ("other", 0) -> 8))
    assert(snapshotFiles(sid).contains(s"5_${c5.id.get}.zip"))
  }

  test("loadEmpty with a checkpoint ID is refused: an empty store has none") {
    val p = newProvider()
    val e = intercept[IllegalArgumentException](p.getStore(3, Some("abc"), loadEmpty = true))
    assert(e.getMessage.contains("abc"))
    // the provider is usable afterwards
    assert(batch(p, Empty)(s => put(s, "a", 1)).version === 1)
  }
}

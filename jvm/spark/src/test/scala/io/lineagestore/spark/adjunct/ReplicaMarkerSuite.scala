package io.lineagestore.spark.adjunct

import java.io.File
import java.nio.charset.StandardCharsets.UTF_8
import java.util.concurrent.Executors

import org.apache.hadoop.fs.Path
import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.adjunct.AdjunctTableLog
import io.lineagestore.config.LineageConf
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.store.ColumnFamilies
import io.lineagestore.testing.{LocalStores, TempDirs}

/** An executor's replica records the version it holds in the table's markers (what `lineagestore inspect`
  * reports). A marker's write can fail where the replica is valid (Spark kills a task by interrupting it, and
  * a write by an interrupted thread fails): the next task to use the replica writes it.
  */
class ReplicaMarkerSuite extends AnyFunSuite {
  test("a marker whose write failed is written by the next task to use the replica") {
    val root = TempDirs.create("lineagestore-replica-marker")
    val table = new Path(new File(root, "table").toURI)
    val storePath = new Path(table, AdjunctTableLog.StoreDir).toString
    val pool = Executors.newFixedThreadPool(2)
    val writer = LocalStores.store(storePath, new File(root, "writer"), pool)
    val v1 =
      try {
        writer.load(CheckpointId.Empty)
        writer.put(ColumnFamilies.DefaultId, "k".getBytes(UTF_8), "v".getBytes(UTF_8))
        writer.commit()
      } finally writer.close()
    val markers = new AdjunctTableLog(
      LocalStores.blobs(table.toString)
    )
    val confEntries = Map(LineageConf.LocalDir.key -> new File(root, "local").getPath)
    val replica = AdjunctReplicas.replica(storePath, confEntries, -1)
    // the markers' directory cannot be created while a file stands in its place
    val blocker = new File(new File(root, "table"), AdjunctTableLog.ReplicasDir.split('/').head)
    assert(blocker.createNewFile())
    try {
      val store = replica.acquire(v1)
      assert(new String(store.get(ColumnFamilies.DefaultId, "k".getBytes(UTF_8)), UTF_8) == "v")
      replica.release()
      assert(blocker.delete())
      assert(markers.replicas().isEmpty)
      // the next task: nothing to load, the marker written
      replica.acquire(v1)
      replica.release()
      assert(markers.replicas().map(m => (m.version, m.uniqueId)) == Seq((v1.version, v1.uniqueId)))
    } finally pool.shutdown() // the replica stays open, as on an executor, until the JVM ends
  }
}

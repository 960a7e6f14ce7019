package io.lineagestore.adjunct

import java.io.File
import java.nio.file.Files
import java.util.concurrent.Executors

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.scalatest.BeforeAndAfterEach
import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.lineage.CheckpointId
import io.lineagestore.store.LocalDirectories
import io.lineagestore.testing.LocalStores
import io.lineagestore.tools.CheckpointTools

/** An adjunct table's commit log and `inspect` over a table written by the real store on a local Hadoop
  * filesystem: records round-trip, versions are listed in order, an unfinished batch (a delta no record
  * names) shows as uncommitted, and a record lacking a field fails naming its file.
  */
class AdjunctInspectionSuite extends AnyFunSuite with BeforeAndAfterEach {
  private var tmp: File = _
  private val pool = Executors.newFixedThreadPool(2)

  override def beforeEach(): Unit = tmp = Files.createTempDirectory("lineagestore-adjunct").toFile
  override def afterEach(): Unit = LocalDirectories.deleteRecursively(tmp)

  private def table = new File(tmp, "table").toURI.toString
  private def log = new AdjunctTableLog(
    LocalStores.blobs(table)
  )

  private def writeVersions(committed: Int, unfinished: Boolean): Unit = {
    val store = LocalStores.store(
      new Path(new Path(table), AdjunctTableLog.StoreDir).toString,
      new File(tmp, "local"),
      pool
    )
    try {
      store.load(CheckpointId.Empty)
      for (v <- 1 to committed + (if (unfinished) 1 else 0)) {
        store.put(1, Array(v.toByte), Array(1, 2, 3))
        val id = store.commit(s"u$v")
        if (v <= committed) log.write(AdjunctCommit(id.version, id.uniqueId, "src", v - 1L))
      }
    } finally store.close()
  }

  test("commit records round-trip and are listed by version; inspect shows versions, size, unfinished") {
    log.writeMeta(Map("keySchema" -> "k", "valueSchema" -> "v"))
    writeVersions(committed = 11, unfinished = true)
    assert(log.commits().map(_.version) == (1L to 11L))
    assert(log.latest().contains(AdjunctCommit(11, "u11", "src", 10)))
    assert(AdjunctInspection.isTable(table, new Configuration()))
    assert(!AdjunctInspection.isTable(new File(tmp, "nothing").toURI.toString, new Configuration()))
    val report = CheckpointTools.inspectAdjunctTable(table)
    assert(report.contains("\"deltas\": 12,"), report)
    assert(report.contains("\"uncommitted\": [\"12_u12.delta\"]"), report)
    assert(
      report.contains(
        "{\"version\": 11, \"uniqueId\": \"u11\", \"sourceBatchId\": 10, \"files\": [\"11_u11.delta\"]}"
      ),
      report
    )
  }

  test(
    "inspect shows each replica's marker and its lag behind the latest version; a torn marker is skipped"
  ) {
    log.writeMeta(Map("keySchema" -> "k", "valueSchema" -> "v"))
    writeVersions(committed = 4, unfinished = false)
    log.writeReplica(ReplicaMark("1@127.0.0.2", 4, "u4", 1000L, 0L, 4L), 1)
    // a replica that moved back (a read of an older version) and on: its newest marker counts, not its highest
    log.writeReplica(ReplicaMark("2@127.0.0.3", 5, "u5", 900L, 0L, 2L), 9)
    log.writeReplica(ReplicaMark("2@127.0.0.3", 3, "u3", 950L, 0L, 3L), 10)
    LocalStores
      .blobs(table)
      .write(AdjunctTableLog.replicaName("3@torn", 1))(_.write("version=".getBytes("UTF-8")))
    assert(log.replicas().map(r => r.name -> r.version) == Seq("1@127.0.0.2" -> 4L, "2@127.0.0.3" -> 3L))
    val report = CheckpointTools.inspectAdjunctTable(table)
    assert(
      report.contains(
        "{\"replica\": \"2@127.0.0.3\", \"version\": 3, \"uniqueId\": \"u3\", \"lag\": 1, \"storeLag\": 1, " +
          "\"loadedAtMs\": 950, \"bytesDownloaded\": 0, \"deltasReplayed\": 3}"
      ),
      report
    )
    // the one partition of a table of one store: its checkpoint, and its replicas' furthest lag
    assert(
      report.contains(
        "\"partitionStates\": [{\"partition\": 0, \"checkpoint\": \"4_u4\", \"storeVersion\": 4, " +
          "\"since\": 4, \"replicas\": 2, \"maxLag\": 1, \"maxStoreLag\": 1}]"
      ),
      report
    )
    assert(
      report.contains("\"replica\": \"1@127.0.0.2\", \"version\": 4, \"uniqueId\": \"u4\", \"lag\": 0"),
      report
    )
    assert(
      AdjunctTableLog.replicaName(
        "driver@my host/x",
        12
      ) == "_adjunct/replicas/driver@my_host_x~0000000000000000012"
    )
  }

  test(
    "a partitioned table: records name each partition's store checkpoint; inspect sums the stores, lists " +
      "each version's files by partition and a partition replica's lag by the records naming its checkpoint"
  ) {
    log.writeMeta(Map("keySchema" -> "k", "valueSchema" -> "v", AdjunctTableLog.PartitionsKey -> "2"))
    // partition 0 commits at table versions 1 and 3, partition 1 at version 2 only
    def storeOf(p: Int) =
      LocalStores.store(
        new Path(new Path(table), AdjunctTableLog.storeDir(p)).toString,
        new File(tmp, s"local$p"),
        pool,
        p
      )
    def commitIn(p: Int, from: CheckpointId, uid: String): CheckpointId = {
      val store = storeOf(p)
      try {
        store.load(from)
        store.put(1, Array(p.toByte), Array(1))
        store.commit(uid)
      } finally store.close()
    }
    val a1 = commitIn(0, CheckpointId.Empty, "a1")
    log.write(AdjunctCommit(1, "t1", "src", 0, 2, Map(0 -> a1)))
    val b1 = commitIn(1, CheckpointId.Empty, "b1")
    log.write(AdjunctCommit(2, "t2", "src", 1, 2, Map(0 -> a1, 1 -> b1)))
    val a2 = commitIn(0, a1, "a2")
    log.write(AdjunctCommit(3, "t3", "src", 2, 2, Map(0 -> a2, 1 -> b1)))
    commitIn(1, b1, "b2orphan") // a crash before version 4's record
    assert(log.commits().map(_.storeCheckpoint(1)) == Seq(CheckpointId.Empty, b1, b1))
    assert(log.latest().contains(AdjunctCommit(3, "t3", "src", 2, 2, Map(0 -> a2, 1 -> b1))))
    assert(AdjunctCommit(7, "u7", "src", 0).storeCheckpoint(0) == CheckpointId(7, "u7")) // one store: itself
    // replicas: partition 1's holds b1 (named by versions 2 and 3: current), partition 0's holds a1 (version 2)
    log.writeReplica(ReplicaMark("1@h", 1, "b1", 1000L, 0L, 1L, partition = 1), 1)
    log.writeReplica(ReplicaMark("1@h", 1, "a1", 1000L, 0L, 1L, partition = 0), 1)
    assert(log.replicas().map(r => (r.name, r.partition)) == Seq("1@h" -> 0, "1@h" -> 1))
    val report = CheckpointTools.inspectAdjunctTable(table)
    assert(report.contains("\"partitions\": 2"), report)
    assert(report.contains("\"deltas\": 4,"), report)
    assert(report.contains("\"uncommitted\": [\"1/2_b2orphan.delta\"]"), report)
    assert(
      report.contains(
        "\"version\": 2, \"uniqueId\": \"t2\", \"sourceBatchId\": 1, " +
          "\"files\": [\"1/1_b1.delta\"]}"
      ),
      report
    )
    assert(
      report.contains(
        "\"version\": 3, \"uniqueId\": \"t3\", \"sourceBatchId\": 2, " +
          "\"files\": [\"0/2_a2.delta\"]}"
      ),
      report
    )
    assert(report.contains("\"replica\": \"1@h\", \"version\": 2, \"uniqueId\": \"a1\", \"lag\": 1"), report)
    assert(report.contains("\"replica\": \"1@h\", \"version\": 3, \"uniqueId\": \"b1\", \"lag\": 0"), report)
  }

  test("a record lacking a field fails naming the record") {
    log.writeMeta(Map("keySchema" -> "k", "valueSchema" -> "v"))
    LocalStores
      .blobs(table)
      .write(AdjunctTableLog.commitName(3))(_.write("version=3\n".getBytes("UTF-8")))
    val e = intercept[Exception](log.commits())
    assert(
      e.getMessage.contains("_adjunct/commits/3") && e.getMessage.contains("lacks 'uniqueId'"),
      e.getMessage
    )
  }
}

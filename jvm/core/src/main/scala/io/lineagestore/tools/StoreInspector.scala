package io.lineagestore.tools

import java.util.concurrent.Executors

import scala.util.Try

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path

import io.lineagestore.format.StoreIdentity
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.storage.HadoopBlobStore
import io.lineagestore.store.CheckpointFiles

/** Read-only description of one store directory, as JSON, for the Python tools (reached through py4j). Uses
  * the one implementation of the format; never writes.
  */
object StoreInspector {

  /** @param storeDir
    *   `<checkpoint>/state/<operatorId>/<partitionId>[/<storeName>]`
    * @return
    *   JSON: {"checkpoints": [{version, uniqueId, delta, snapshot, deltaBytes, snapshotBytes, ancestors,
    *   error}], "sharedBlobs": n, "sharedBytes": n}
    */
  def describe(storeDir: String, operatorId: Long, partitionId: Int, storeName: String): String = {
    val blobs = new HadoopBlobStore(new Path(storeDir), new Configuration())
    val pool = Executors.newSingleThreadExecutor()
    try {
      val files = new CheckpointFiles(blobs, StoreIdentity(operatorId, partitionId, storeName), pool)
      val listed = files.listCheckpointFiles()
      val ids = listed.map(_.id).distinct.sortBy(id => (id.version, id.uniqueId))
      val entries = ids.map { id =>
        val hasDelta = listed.exists(f => f.id == id && f.kind == CheckpointId.Delta)
        val hasZip = listed.exists(f => f.id == id && f.kind == CheckpointId.Snapshot)
        val lineage = if (hasDelta) Try(files.ancestorsOf(id).getOrElse(Nil)) else Try(Nil)
        val fields = Seq(
          s""""version": ${id.version}""",
          s""""uniqueId": "${id.uniqueId}"""",
          s""""delta": $hasDelta""",
          s""""snapshot": $hasZip""",
          s""""deltaBytes": ${blobs.size(id.deltaFileName).getOrElse(0L)}""",
          s""""snapshotBytes": ${blobs.size(id.snapshotFileName).getOrElse(0L)}""",
          s""""ancestors": [${lineage
              .getOrElse(Nil)
              .map(a => s""""${a.version}_${a.uniqueId}"""")
              .mkString(", ")}]"""
        ) ++ lineage.failed.toOption.map(e => s""""error": "${escape(e.getMessage)}"""")
        fields.mkString("{", ", ", "}")
      }
      val shared = files.listSharedBlobs()
      s"""{"checkpoints": [${entries.mkString(", ")}], "sharedBlobs": ${shared.size}, """ +
        s""""sharedBytes": ${shared.map(_.size).sum}}"""
    } finally pool.shutdownNow()
  }

  private def escape(s: String): String =
    Option(s).getOrElse("").flatMap {
      case '"'          => "\\\""
      case '\\'         => "\\\\"
      case c if c < ' ' => " "
      case c            => c.toString
    }
}

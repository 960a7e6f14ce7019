package io.lineagestore.tools

import java.util.concurrent.ExecutorService

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path

import io.lineagestore.config.LineageConf
import io.lineagestore.engine.DaemonThreads
import io.lineagestore.format.StoreIdentity
import io.lineagestore.storage.HadoopBlobStore
import io.lineagestore.store.CheckpointFiles

/** The Hadoop configuration the tools use. Python may add settings (an s3a endpoint, credentials provider)
  * before its first call; each tool call reads it when it opens a filesystem.
  */
object ToolEnv {
  private val conf = new Configuration()

  def hadoopConf: Configuration = conf.synchronized(new Configuration(conf))

  def set(key: String, value: String): Unit = conf.synchronized(conf.set(key, value))
}

/** A store directory as Spark lays it out ([[io.lineagestore.lineage.StateLayout]]). */
final case class StoreRef(operatorId: Long, partitionId: Int, storeName: String, dir: String) {
  def identity: StoreIdentity = StoreIdentity(operatorId, partitionId, storeName)
  override def toString: String = s"$identity at $dir"
}

/** An open store directory for the tools: the store's [[CheckpointFiles]] over a [[HadoopBlobStore]], with a
  * small transfer pool of its own. Close it.
  */
final class ToolStore(val ref: StoreRef, conf: Configuration = ToolEnv.hadoopConf, threads: Int = 4)
    extends AutoCloseable {
  val blobs = new HadoopBlobStore(new Path(ref.dir), conf, LineageConf.DeltaUploadPartBytes.default)
  private val pool: ExecutorService =
    DaemonThreads.pool(threads, s"lineagestore-tool-${ref.operatorId}-${ref.partitionId}")
  // the tools read rarely and must prove identity, not only transfer: SHA-256 or the SST's ID too (verify
  // restores snapshots)
  val files = new CheckpointFiles(blobs, ref.identity, pool, checkIdentityOnDownload = true)

  def locate(name: String): String = blobs.locate(name)

  override def close(): Unit = pool.shutdownNow()
}

object ToolStore {
  def using[T](ref: StoreRef, conf: Configuration = ToolEnv.hadoopConf)(body: ToolStore => T): T = {
    val s = new ToolStore(ref, conf)
    try body(s)
    finally s.close()
  }
}

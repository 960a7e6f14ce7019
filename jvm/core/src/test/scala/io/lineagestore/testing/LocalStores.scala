package io.lineagestore.testing

import java.io.File
import java.util.concurrent.ExecutorService

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path

import io.lineagestore.config.LineageConf
import io.lineagestore.format.StoreIdentity
import io.lineagestore.storage.HadoopBlobStore
import io.lineagestore.store.{CheckpointFiles, LineageStore, StoreSettings}

/** A store on the local Hadoop filesystem (its checksummed `LocalFileSystem`, `.crc` sidecars and all), built
  * the way the adjunct suites write an adjunct table's versions: one place for the blob store, the part size
  * and the store identity they all use.
  */
object LocalStores {

  /** The blob store at `dir` (a path or URI) with the configuration's default streamed part size. */
  def blobs(dir: String): HadoopBlobStore =
    new HadoopBlobStore(new Path(dir), new Configuration(), LineageConf.DeltaUploadPartBytes.default)

  /** The default store of `partition` (operator 0) whose files live at `dir` and whose RocksDB lives in
    * `local`.
    */
  def store(
      dir: String,
      local: File,
      pool: ExecutorService,
      partition: Int = 0,
      settings: StoreSettings = StoreSettings.Default
  ): LineageStore =
    new LineageStore(
      new CheckpointFiles(blobs(dir), StoreIdentity(0, partition, "default"), pool),
      local,
      settings
    )
}

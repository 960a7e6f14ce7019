package io.lineagestore.store

import java.io.File
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files
import java.util.concurrent.Executors

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.scalatest.{BeforeAndAfterEach, Suite}

import io.lineagestore.config.LineageConf
import io.lineagestore.format.StoreIdentity
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.storage.{BlobStore, HadoopBlobStore}
import io.lineagestore.testing.TempDirs

/** One store against a real RocksDB and a real local Hadoop filesystem under a fresh temporary directory: the
  * remote side in `remote`, each [[newStore]] on its own local directory, closed after the test.
  */
trait StoreFixture extends BeforeAndAfterEach { this: Suite =>
  protected var tmp: File = _
  protected val pool = Executors.newFixedThreadPool(4)
  protected val D = ColumnFamilies.DefaultId
  private val opened = scala.collection.mutable.Buffer.empty[LineageStore]

  /** Settings of [[newStore]] when a test gives none. */
  protected def defaultSettings: StoreSettings

  override def beforeEach(): Unit = {
    tmp = TempDirs.create("lineagestore-test")
    super.beforeEach()
  }
  override def afterEach(): Unit =
    try super.afterEach()
    finally { opened.foreach(_.close()); opened.clear() }

  protected def remote = new File(tmp, "remote")
  protected def remoteBlobs: BlobStore =
    new HadoopBlobStore(new Path(remote.toURI), new Configuration(), LineageConf.DeltaUploadPartBytes.default)
  protected def files: CheckpointFiles = filesOn(remoteBlobs)
  protected def filesOn(blobs: BlobStore): CheckpointFiles =
    new CheckpointFiles(blobs, StoreIdentity(0, 0, "default"), pool)

  /** A store on a fresh local directory (or on `local`), closed after the test. */
  protected def newStore(
      settings: StoreSettings = defaultSettings,
      checkpointFiles: CheckpointFiles = files,
      crash: CrashPoints = CrashPoints.None,
      local: File = null,
      applyPool: java.util.concurrent.Executor = io.lineagestore.engine.SharedApplyPool.pool,
      snapshotPartition: Option[Int] = None
  ): LineageStore = {
    val dir = Option(local).getOrElse(Files.createTempDirectory(tmp.toPath, "local").toFile)
    val s =
      new LineageStore(
        checkpointFiles,
        dir,
        settings,
        crash,
        applyPool = applyPool,
        snapshotPartition = snapshotPartition
      )
    opened += s
    s
  }

  protected def b(s: String): Array[Byte] = s.getBytes(UTF_8)
  protected def contents(s: LineageStore): Map[String, String] = {
    val it = s.scan(D, Array.emptyByteArray, null)
    try it.map { case (k, v) => new String(k, UTF_8) -> new String(v, UTF_8) }.toMap
    finally it.close()
  }
  protected def commitBatch(
      s: LineageStore,
      puts: Map[String, String],
      deletes: Seq[String] = Nil
  ): CheckpointId = {
    puts.foreach { case (k, v) => s.put(D, b(k), b(v)) }
    deletes.foreach(k => s.delete(D, b(k)))
    s.commit()
  }
  protected def remoteNames: Set[String] =
    Option(remote.list()).map(_.toSet).getOrElse(Set.empty).filterNot(_.endsWith(".crc"))
}

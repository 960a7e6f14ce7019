package io.lineagestore.spark

import java.io.File
import java.nio.file.Files
import java.util.UUID

import scala.collection.mutable

import org.apache.hadoop.conf.Configuration
import org.apache.spark.sql.catalyst.expressions.{GenericInternalRow, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.BeforeAndAfterEach
import org.scalatest.funsuite.AnyFunSuite

/** What the driver's commit log records for one partition: version and the unique ID of the commit. */
final case class Ckpt(version: Long, id: Option[String])

/** Drives [[LineageStateStoreProvider]] directly, the way Spark's executors and driver do: providers created
  * on a store directory, stores obtained with the unique ID the previous commit reported (checkpoint format
  * version 2), real UnsafeRows through Spark's own encoders.
  */
trait ProviderTestSupport extends AnyFunSuite with BeforeAndAfterEach {

  // ---- schemas and rows ----------------------------------------------------------------------------------

  val keySchema: StructType = new StructType().add("key", StringType).add("partition", IntegerType)
  val valueSchema: StructType = new StructType().add("value", IntegerType)
  val noPrefix: KeyStateEncoderSpec = NoPrefixKeyStateEncoderSpec(keySchema)

  private val keyProj = UnsafeProjection.create(keySchema)
  private val valueProj = UnsafeProjection.create(valueSchema)

  def keyRow(k: String, p: Int = 0): UnsafeRow =
    keyProj(new GenericInternalRow(Array[Any](UTF8String.fromString(k), p))).copy()
  def valueRow(v: Int): UnsafeRow = valueProj(new GenericInternalRow(Array[Any](v))).copy()
  def keyOf(r: UnsafeRow): (String, Int) = (r.getUTF8String(0).toString, r.getInt(1))
  def valueOf(r: UnsafeRow): Int = r.getInt(0)

  type Data = Map[(String, Int), Int]

  def put(
      s: StateStore,
      k: String,
      v: Int,
      p: Int = 0,
      cf: String = StateStore.DEFAULT_COL_FAMILY_NAME
  ): Unit =
    s.put(keyRow(k, p), valueRow(v), cf)
  def get(
      s: ReadStateStore,
      k: String,
      p: Int = 0,
      cf: String = StateStore.DEFAULT_COL_FAMILY_NAME
  ): Option[Int] =
    Option(s.get(keyRow(k, p), cf)).map(valueOf)
  def remove(s: StateStore, k: String, p: Int = 0, cf: String = StateStore.DEFAULT_COL_FAMILY_NAME): Unit =
    s.remove(keyRow(k, p), cf)

  /** Every (key, value) of a family, via iterator(); fails on duplicate keys. */
  def data(s: ReadStateStore, cf: String = StateStore.DEFAULT_COL_FAMILY_NAME): Data = {
    val it = s.iterator(cf)
    try {
      val rows = it.map(p => keyOf(p.key) -> valueOf(p.value)).toSeq
      assert(rows.map(_._1).distinct.size === rows.size, s"iterator returned a key twice: $rows")
      rows.toMap
    } finally it.close()
  }

  // ---- configuration -------------------------------------------------------------------------------------

  val FormatVersionKey = "spark.sql.streaming.stateStore.checkpointFormatVersion"
  val MinDeltasKey = "spark.sql.streaming.stateStore.minDeltasForSnapshot"
  val MinBatchesKey = "spark.sql.streaming.minBatchesToRetain"
  val ProviderClassKey = "spark.sql.streaming.stateStore.providerClass"
  val LocalDirKey = "spark.sql.streaming.stateStore.lineagestore.localDir"
  val LocalRetentionKey = "spark.sql.streaming.stateStore.lineagestore.localRetentionMs"

  def storeConf(extra: (String, String)*): StateStoreConf = {
    val sql = new SQLConf()
    sql.setConfString(ProviderClassKey, classOf[LineageStateStoreProvider].getName)
    sql.setConfString(FormatVersionKey, "2")
    sql.setConfString(MinDeltasKey, "2")
    sql.setConfString(MinBatchesKey, "100")
    sql.setConfString(LocalDirKey, localDir.getAbsolutePath)
    // every provider is "a new executor" with its own directory; tests of directory reuse set a retention
    sql.setConfString(LocalRetentionKey, "0")
    extra.foreach { case (k, v) => sql.setConfString(k, v) }
    StateStoreConf(sql)
  }

  def hadoopConf(): Configuration = {
    val c = new Configuration()
    // what Spark's state store RDD sets; lets the provider report commits without a warning
    c.set("sql.streaming.runId", UUID.randomUUID().toString)
    c
  }

  // ---- temp directories and providers ----------------------------------------------------------------------

  private var tmp: File = _
  private val providers = mutable.Buffer.empty[StateStoreProvider]

  def root: File = tmp
  def checkpointRoot: File = new File(tmp, "checkpoint")
  def localDir: File = new File(tmp, "local")

  override def beforeEach(): Unit = {
    super.beforeEach()
    tmp = Files.createTempDirectory("lineagestore-spark-test").toFile
  }

  override def afterEach(): Unit = {
    try providers.foreach(p => scala.util.Try(p.close()))
    finally {
      providers.clear()
      deleteRecursively(tmp)
      super.afterEach()
    }
  }

  def deleteRecursively(f: File): Unit = {
    if (f.isDirectory) Option(f.listFiles()).getOrElse(Array.empty[File]).foreach(deleteRecursively)
    f.delete()
  }

  def storeId(opId: Long = 0, partition: Int = 0, storeName: String = StateStoreId.DEFAULT_STORE_NAME) =
    StateStoreId(checkpointRoot.getAbsolutePath, opId, partition, storeName)

  /** A new provider (a new executor, or the first load of this store on one) on the store directory. */
  def newProvider(
      id: StateStoreId = storeId(),
      spec: KeyStateEncoderSpec = noPrefix,
      useColumnFamilies: Boolean = false,
      multipleValues: Boolean = false,
      conf: StateStoreConf = null,
      valueSchema: StructType = valueSchema
  ): LineageStateStoreProvider = {
    val p = new LineageStateStoreProvider
    p.init(
      id,
      spec.keySchema,
      valueSchema,
      spec,
      useColumnFamilies,
      Option(conf).getOrElse(storeConf()),
      hadoopConf(),
      multipleValues,
      None
    )
    providers += p
    p
  }

  /** A provider with column families enabled. */
  def newCfProvider(conf: StateStoreConf = null): LineageStateStoreProvider =
    newProvider(useColumnFamilies = true, conf = conf)

  /** Creates family `name` (if absent) with the test key and value schemas. */
  def createCf(s: StateStore, name: String, multi: Boolean = false): Unit =
    s.createColFamilyIfAbsent(name, keySchema, valueSchema, noPrefix, multi, false)

  /** Spark's executor loss: the provider goes away (closed like Spark's unload does). */
  def closeProvider(p: StateStoreProvider): Unit = {
    p.close()
    providers -= p
  }

  val Empty: Ckpt = Ckpt(0, None)

  /** Loads `from`, applies `body`, commits; returns the new checkpoint as the driver would record it. */
  def batch(p: StateStoreProvider, from: Ckpt)(body: StateStore => Unit): Ckpt = {
    val s = p.getStore(from.version, from.id)
    assert(s.version === from.version)
    body(s)
    val v = s.commit()
    assert(v === from.version + 1)
    val info = s.getStateStoreCheckpointInfo()
    assert(info.batchVersion === v)
    assert(info.stateStoreCkptId.nonEmpty)
    assert(info.baseStateStoreCkptId === from.id)
    Ckpt(v, info.stateStoreCkptId)
  }

  /** The committed state of `c`, read through a read-only store. */
  def readAt(p: StateStoreProvider, c: Ckpt, cf: String = StateStore.DEFAULT_COL_FAMILY_NAME): Data = {
    val s = p.getReadStore(c.version, c.id)
    try data(s, cf)
    finally s.release()
  }

  /** Files of a store directory (without Hadoop's .crc files), relative to it. */
  def storeFiles(id: StateStoreId = storeId()): Set[String] = {
    val dir = new File(id.storeCheckpointLocation().toUri.getPath)
    def walk(f: File, prefix: String): Seq[String] =
      Option(f.listFiles()).getOrElse(Array.empty[File]).toSeq.flatMap { c =>
        if (c.isDirectory) walk(c, s"$prefix${c.getName}/") else Seq(prefix + c.getName)
      }
    walk(dir, "").filterNot(_.endsWith(".crc")).toSet
  }

  def deltaFiles(id: StateStoreId = storeId()): Set[String] = storeFiles(id).filter(_.endsWith(".delta"))
  def snapshotFiles(id: StateStoreId = storeId()): Set[String] = storeFiles(id).filter(_.endsWith(".zip"))
  def fileVersion(name: String): Long = name.takeWhile(_ != '_').toLong

  def fileOf(c: Ckpt, ext: String, id: StateStoreId = storeId()): File =
    new File(new File(id.storeCheckpointLocation().toUri.getPath), s"${c.version}_${c.id.get}.$ext")
}

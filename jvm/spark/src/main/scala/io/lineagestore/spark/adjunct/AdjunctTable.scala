package io.lineagestore.spark.adjunct

import scala.jdk.CollectionConverters._

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.apache.spark.sql.types._

import io.lineagestore.adjunct.{AdjunctCommit, AdjunctTableLog}
import io.lineagestore.config.{InvalidConfigException, LineageConf}
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.storage.HadoopBlobStore
import io.lineagestore.store.{InjectedFaults, StoreSettings}

/** Bad input to an adjunct-table call: names what is wrong and what to do; raised before anything is written.
  */
class AdjunctTableException(message: String) extends IllegalArgumentException(message)

/** The schema of an adjunct table: key columns, value columns, and the stored value row's layout (ordering,
  * deleted, values...), the UnsafeRow the store holds per key.
  */
final case class AdjunctSchema(keys: StructType, values: StructType) {
  import AdjunctSchema._

  /** What the store holds per key: the change's ordering value, whether it is a tombstone, the values. */
  def stored: StructType =
    StructType(
      StructField(OrderingField, LongType, nullable = false) +:
        StructField(DeletedField, BooleanType, nullable = false) +: values.fields.map(_.copy(nullable = true))
    )

  def toMeta(partitions: Int): Map[String, String] =
    Map("keySchema" -> keys.json, "valueSchema" -> values.json, "format" -> "1") ++
      Option.when(partitions > 1)(AdjunctTableLog.PartitionsKey -> partitions.toString)
}

object AdjunctSchema {
  val OrderingField = "__lineagestore_ordering"
  val DeletedField = "__lineagestore_deleted"

  def fromMeta(m: Map[String, String]): AdjunctSchema =
    AdjunctSchema(
      DataType.fromJson(m("keySchema")).asInstanceOf[StructType],
      DataType.fromJson(m("valueSchema")).asInstanceOf[StructType]
    )

  /** A type equal to `b` up to nullability (the table stores either). */
  def sameType(a: DataType, b: DataType): Boolean = a.catalogString == b.catalogString
}

/** An adjunct table at `path` as the driver sees it: its files, opened with `hadoopConf`. */
final class AdjunctTable(val path: String, hadoopConf: Configuration) {
  val log = new AdjunctTableLog(
    new HadoopBlobStore(new Path(path), hadoopConf, LineageConf.DeltaUploadPartBytes.default)
  )
  def storePath: String = storePathOf(0)
  def storePathOf(partition: Int): String =
    new Path(new Path(path), AdjunctTableLog.storeDir(partition)).toString

  /** The table's schema (read once per instance); fails naming the path when no table is there (or a query
    * checkpoint is).
    */
  lazy val schema: AdjunctSchema = AdjunctSchema.fromMeta(meta)

  /** The number of partitions (stores) the table keys are placed in: 1 unless maintained with more. */
  lazy val partitions: Int = AdjunctTable.partitionsOf(meta)

  private lazy val meta: Map[String, String] = log.readMeta().getOrElse(throw noTable())

  def noTable(): AdjunctTableException = {
    val fs = new Path(path).getFileSystem(hadoopConf)
    val queryCheckpoint = Seq("offsets", "commits", "metadata").exists(n => fs.exists(new Path(path, n)))
    val what =
      if (queryCheckpoint)
        "a streaming query's checkpoint (offsets/, commits/, metadata), not an adjunct table"
      else s"no adjunct table (no ${AdjunctTableLog.MetaName})"
    new AdjunctTableException(
      s"$path holds $what. Pass the path a maintaining query writes (lineagestore.adjunct.maintain), and keep " +
        "a query's checkpointLocation elsewhere."
    )
  }

  /** The committed version `version` (latest when negative), failing by name when it is absent. */
  def resolve(version: Long): AdjunctCommit = {
    schema // a missing table is named before a missing version
    val versions = log.versions() // one listing; only the record resolved is read
    if (versions.isEmpty)
      throw new AdjunctTableException(
        s"adjunct table $path has no committed version yet; start its maintaining " +
          "query (lineagestore.adjunct.maintain) and wait for its first batch"
      )
    val wanted = if (version < 0) versions.last else version
    Option
      .when(versions.contains(wanted))(wanted)
      .flatMap(log.commit) // None: cleaned up between the listing and the read
      .getOrElse {
        val kept = s"it keeps versions ${versions.head} to ${versions.last}"
        val why =
          if (wanted < versions.head || versions.contains(wanted)) s"version $wanted was cleaned up"
          else s"version $wanted does not exist"
        throw new AdjunctTableException(
          s"adjunct table $path: $why ($kept); pass one of those or none (latest)"
        )
      }
  }
}

object AdjunctTable {
  def partitionsOf(meta: Map[String, String]): Int =
    meta.get(AdjunctTableLog.PartitionsKey).map(_.toInt).getOrElse(1)

  /** A Hadoop configuration as plain entries, to rebuild it on executors. */
  def confEntries(conf: Configuration): Map[String, String] =
    conf.iterator().asScala.map(e => e.getKey -> e.getValue).toMap

  /** What an adjunct call ships to the tasks: the session's Hadoop configuration, its lineagestore settings
    * (`spark.sql.streaming.stateStore.lineagestore.*`: where the local copies live, how long they are kept,
    * RocksDB's memory, ...) and Spark's snapshot interval (`minDeltasForSnapshot`), which the writers and
    * replicas apply as the provider's stores do. The settings are checked here, on the driver, so a bad value
    * fails the call naming its key before any task runs or anything is written.
    */
  def confEntries(spark: org.apache.spark.sql.SparkSession): Map[String, String] = {
    val lineage = spark.conf.getAll.filter { case (k, _) => k.startsWith(LineageConf.Prefix) }
    try LineageConf.validate(lineage)
    catch {
      case e: InvalidConfigException =>
        throw new AdjunctTableException(
          s"${e.getMessage} Nothing was read or written; fix the session's setting."
        )
    }
    val interval = spark.conf.getOption(StoreSettings.SparkMinDeltasForSnapshotKey)
    // the test-only fault hook (InjectedFaults: never set in production), for the maintain's named steps
    val faults = spark.conf.getAll.filter { case (k, _) => k.startsWith(InjectedFaults.Prefix) }
    confEntries(spark.sparkContext.hadoopConfiguration) ++ lineage ++ faults ++
      interval.map(StoreSettings.SparkMinDeltasForSnapshotKey -> _)
  }

  def confOf(entries: Map[String, String]): Configuration = {
    val c = new Configuration(false)
    entries.foreach { case (k, v) => c.set(k, v) }
    c
  }
}

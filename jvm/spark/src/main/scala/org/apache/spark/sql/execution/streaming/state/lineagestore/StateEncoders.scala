package org.apache.spark.sql.execution.streaming.state.lineagestore

import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.sql.types.StructType

import io.lineagestore.format.DeltaRecordKind

/** Thin shim to Spark's own state key/value encoders (package-private to Spark SQL). Using them keeps the
  * byte order of prefix and range scans exactly what Spark's operators expect, and gives the Avro encoding
  * (`spark.sql.streaming.stateStore.encodingFormat=avro`) Spark's own value-schema evolution: with a schema
  * provider (transformWithState), each value carries the id of the schema it was written with and is read
  * back through that schema. Nothing else lives here.
  */
final class StateEncoders(
    spec: KeyStateEncoderSpec,
    valueSchema: StructType,
    multipleValues: Boolean,
    avro: Option[StateEncoders.Avro] = None
) extends Serializable {
  @transient private lazy val data: RocksDBDataEncoder = avro match {
    case None    => new UnsafeRowDataEncoder(spec, valueSchema)
    case Some(a) =>
      RocksDBStateStoreProvider.getDataEncoder(
        StateEncoders.AvroFormat,
        a.cacheKey,
        spec,
        valueSchema,
        a.schemaProvider,
        Some(a.cacheKey.colFamilyName)
      )
  }
  @transient private lazy val keys = spec.toEncoder(data, false)
  @transient private lazy val values =
    RocksDBStateEncoder.getValueEncoder(data, valueSchema, multipleValues, 1)

  def supportsPrefixScan: Boolean = keys.supportPrefixKeyScan
  def supportsRangeScan: Boolean = keys.supportsRangeScan
  def supportsMultipleValues: Boolean = values.supportsMultipleValuesPerKey

  def encodeKey(k: UnsafeRow): Array[Byte] = keys.encodeKey(k)
  def encodePrefix(k: UnsafeRow): Array[Byte] = keys.encodePrefixKey(k)
  def decodeKey(b: Array[Byte]): UnsafeRow = keys.decodeKey(b)

  def encodeValue(v: UnsafeRow): Array[Byte] = values.encodeValue(v)
  def decodeValue(b: Array[Byte]): UnsafeRow = values.decodeValue(b)
  def decodeValues(b: Array[Byte]): Iterator[UnsafeRow] = values.decodeValues(b)
}

object StateEncoders {
  val AvroFormat = "avro" // spark.sql.streaming.stateStore.encodingFormat's value, as Spark compares it

  /** Where an Avro encoder is cached (Spark's encoder cache, by store and column family) and the schema
    * history it reads older values with.
    */
  final case class Avro(cacheKey: StateRowEncoderCacheKey, schemaProvider: Option[StateSchemaProvider])

  /** The Avro settings of column family `family` of store `id`, or None unless `encodingFormat` is avro. */
  def avroFor(
      encodingFormat: String,
      id: StateStoreId,
      hadoopConf: org.apache.hadoop.conf.Configuration,
      family: String,
      schemaProvider: Option[StateSchemaProvider]
  ): Option[Avro] =
    if (!encodingFormat.equalsIgnoreCase(AvroFormat)) None
    else {
      // the run id keeps a restarted query (which may have evolved its schemas) off the old run's encoders
      val scope = s"${id.checkpointRootLocation}|${StateStoreProvider.getRunId(hadoopConf)}"
      Some(
        Avro(
          StateRowEncoderCacheKey(scope, id.operatorId, id.partitionId, id.storeName, family),
          schemaProvider
        )
      )
    }
}

/** Thin shim to Spark-internal calls a provider must make. */
object SparkInternals {

  /** Tells the driver's coordinator this store committed `version` (Spark 4.3's commit validation). */
  def reportCommit(version: Long, id: StateStoreId, hadoopConf: org.apache.hadoop.conf.Configuration): Unit =
    StateStore.reportCommitToCoordinator(version, id, hadoopConf)

  /** The executors the driver's block manager knows now (this one's peers, the driver excluded) and this one,
    * by executor ID: the membership standby copies are placed over (`BlockManagerMaster` is Spark's).
    */
  def executorIds(): Set[String] = {
    val env = org.apache.spark.SparkEnv.get
    val bm = env.blockManager
    (bm.master.getPeers(bm.blockManagerId).map(_.executorId) :+ env.executorId).toSet
  }
}

/** Thin shim: Spark's change-feed record shape (RecordType values inside Spark's NextIterator). */
object ChangeFeed {
  type Record = (RecordType.Value, UnsafeRow, UnsafeRow, Long)

  /** `changes` yields (kind, key, value or null, batchId); a put is Spark's update (`PUT_RECORD`), a merge
    * its append (`MERGE_RECORD`).
    */
  def iterator(
      changes: Iterator[(DeltaRecordKind, UnsafeRow, UnsafeRow, Long)]
  ): org.apache.spark.util.NextIterator[Record] =
    new org.apache.spark.util.NextIterator[Record] {
      override protected def getNext(): Record =
        if (!changes.hasNext) { finished = true; null }
        else {
          val (kind, k, v, batch) = changes.next()
          val recordType = kind match {
            case DeltaRecordKind.Put    => RecordType.PUT_RECORD
            case DeltaRecordKind.Delete => RecordType.DELETE_RECORD
            case DeltaRecordKind.Merge  => RecordType.MERGE_RECORD
          }
          (recordType, k, v, batch)
        }
      override protected def close(): Unit = ()
    }
}

/** Thin shim: Spark's change-feed interface names Spark-private types, so the provider implements it through
  * this trait and supplies the records as a plain iterator of (kind, key, value or null, batchId).
  */
trait ChangeFeedSupport extends SupportsFineGrainedReplay {
  protected def changeRecords(
      startVersion: Long,
      endVersion: Long,
      colFamilyNameOpt: Option[String],
      endVersionStateStoreCkptId: Option[String]
  ): Iterator[(DeltaRecordKind, UnsafeRow, UnsafeRow, Long)]

  override def getStateStoreChangeDataReader(
      startVersion: Long,
      endVersion: Long,
      colFamilyNameOpt: Option[String],
      endVersionStateStoreCkptId: Option[String]
  ): org.apache.spark.util.NextIterator[ChangeFeed.Record] =
    ChangeFeed.iterator(changeRecords(startVersion, endVersion, colFamilyNameOpt, endVersionStateStoreCkptId))
}

/** Thin shim: telling Spark's state store coordinator a snapshot was uploaded (its snapshot-lag report). */
object SnapshotReporting {
  def reportUploaded(
      id: StateStoreId,
      hadoopConf: org.apache.hadoop.conf.Configuration,
      version: Long
  ): Unit = {
    val runId = scala.util.Try(java.util.UUID.fromString(StateStoreProvider.getRunId(hadoopConf))).toOption
    for (run <- runId; coordinator <- StateStoreProvider.coordinatorRef) {
      coordinator.snapshotUploaded(StateStoreProviderId(id, run), version, System.currentTimeMillis())
    }
  }
}

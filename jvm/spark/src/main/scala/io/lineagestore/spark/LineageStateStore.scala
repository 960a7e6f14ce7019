package io.lineagestore.spark

import java.util.Arrays

import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.sql.execution.streaming.state.lineagestore.StateEncoders
import org.apache.spark.sql.types.StructType

import io.lineagestore.engine.ListMerge
import io.lineagestore.lineage.CheckpointId

/** Spark's view of one loaded version of a [[io.lineagestore.store.LineageStore]]: read-only or writable.
  * Translates rows to bytes with Spark's own encoders and column-family names to ids.
  */
private[spark] class LineageStateStore(
    provider: LineageStateStoreProvider,
    val version: Long,
    readOnly: Boolean,
    forceSnapshotOnCommit: Boolean
) extends StateStore {
  private val store = provider.lineageStore
  private val parentId: CheckpointId = store.loadedCheckpoint.get
  @volatile private var state: Int = LineageStateStore.Open
  private var committedId: Option[CheckpointId] = None

  override def id: StateStoreId = provider.stateStoreId

  private def family(name: String): (Int, StateEncoders) = {
    val cfId = store.columnFamilies
      .idOf(name)
      .getOrElse(
        throw new IllegalArgumentException(
          s"column family '$name' does not exist in ${provider.stateStoreId}; known: " +
            store.columnFamilies.names.toSeq.sorted.mkString(", ")
        )
      )
    (cfId, provider.encodersFor(name))
  }

  private def checkWritable(op: String): Unit = {
    if (readOnly) throw new IllegalStateException(s"$op on a read-only state store ${provider.stateStoreId}")
    if (state != LineageStateStore.Open) throw new IllegalStateException(s"$op after commit or abort")
  }

  override def get(key: UnsafeRow, colFamilyName: String): UnsafeRow = {
    require(key != null, "key cannot be null")
    val (cf, enc) = family(colFamilyName)
    val v = store.get(cf, enc.encodeKey(key))
    if (v == null) null else enc.decodeValue(v)
  }

  override def valuesIterator(key: UnsafeRow, colFamilyName: String): Iterator[UnsafeRow] = {
    require(key != null, "key cannot be null")
    val (cf, enc) = family(colFamilyName)
    val v = store.get(cf, enc.encodeKey(key))
    if (v == null) Iterator.empty else enc.decodeValues(v)
  }

  override def keyExists(key: UnsafeRow, colFamilyName: String): Boolean = {
    val (cf, enc) = family(colFamilyName)
    store.get(cf, enc.encodeKey(key)) != null
  }

  override def multiGet(keys: Array[UnsafeRow], colFamilyName: String): Iterator[UnsafeRow] =
    keys.iterator.map(get(_, colFamilyName))

  override def put(key: UnsafeRow, value: UnsafeRow, colFamilyName: String): Unit = {
    checkWritable("put")
    require(key != null && value != null, "key and value cannot be null")
    val (cf, enc) = family(colFamilyName)
    store.put(cf, enc.encodeKey(key), enc.encodeValue(value), everyChange = enc.supportsMultipleValues)
  }

  override def putList(key: UnsafeRow, values: Array[UnsafeRow], colFamilyName: String): Unit = {
    checkWritable("putList")
    require(key != null && values != null && values.nonEmpty && !values.contains(null), "key and values")
    val (cf, enc) = family(colFamilyName)
    store.put(
      cf,
      enc.encodeKey(key),
      joinValues(enc, values.iterator),
      everyChange = enc.supportsMultipleValues
    )
  }

  override def merge(key: UnsafeRow, value: UnsafeRow, colFamilyName: String): Unit =
    mergeList(key, Array(value), colFamilyName)

  override def mergeList(key: UnsafeRow, values: Array[UnsafeRow], colFamilyName: String): Unit = {
    checkWritable("merge")
    require(key != null && values != null && !values.contains(null), "key and values cannot be null")
    val (cf, enc) = family(colFamilyName)
    if (!enc.supportsMultipleValues) {
      throw new UnsupportedOperationException(
        s"merge on column family '$colFamilyName' without multiple values"
      )
    }
    // the delta records only the appended values (a merge record), as Spark's changelog does
    if (values.nonEmpty) store.merge(cf, enc.encodeKey(key), joinValues(enc, values.iterator))
  }

  private def joinValues(enc: StateEncoders, values: Iterator[UnsafeRow]): Array[Byte] =
    values.map(enc.encodeValue).reduce(ListMerge(_, _))

  override def remove(key: UnsafeRow, colFamilyName: String): Unit = {
    checkWritable("remove")
    require(key != null, "key cannot be null")
    val (cf, enc) = family(colFamilyName)
    store.delete(cf, enc.encodeKey(key), everyChange = enc.supportsMultipleValues)
  }

  override def deleteRange(beginKey: UnsafeRow, endKey: UnsafeRow, colFamilyName: String): Unit = {
    checkWritable("deleteRange")
    val (cf, enc) = family(colFamilyName)
    val it = store.scan(cf, enc.encodeKey(beginKey), enc.encodeKey(endKey))
    try it.foreach { case (k, _) => store.delete(cf, k) }
    finally it.close()
  }

  private def rows(
      cf: Int,
      enc: StateEncoders,
      from: Array[Byte],
      until: Array[Byte],
      prefix: Array[Byte] = null,
      multi: Boolean = false
  ): StateStoreIterator[UnsafeRowPair] = {
    val it = store.scan(cf, from, until)
    val pair = new UnsafeRowPair()
    val bounded = if (prefix == null) it else it.takeWhile { case (k, _) => startsWith(k, prefix) }
    val out: Iterator[UnsafeRowPair] =
      if (!multi) bounded.map { case (k, v) => pair.withRows(enc.decodeKey(k), enc.decodeValue(v)) }
      else
        bounded.flatMap { case (k, v) =>
          val key = enc.decodeKey(k)
          enc.decodeValues(v).map(value => new UnsafeRowPair(key, value))
        }
    new StateStoreIterator(out, () => it.close())
  }

  private def startsWith(k: Array[Byte], p: Array[Byte]): Boolean =
    k.length >= p.length && Arrays.equals(k, 0, p.length, p, 0, p.length)

  override def iterator(colFamilyName: String): StateStoreIterator[UnsafeRowPair] = {
    val (cf, enc) = family(colFamilyName)
    rows(cf, enc, Array.emptyByteArray, null)
  }

  override def iteratorWithMultiValues(colFamilyName: String): StateStoreIterator[UnsafeRowPair] = {
    val (cf, enc) = family(colFamilyName)
    rows(cf, enc, Array.emptyByteArray, null, multi = true)
  }

  override def prefixScan(prefixKey: UnsafeRow, colFamilyName: String): StateStoreIterator[UnsafeRowPair] = {
    val (cf, enc) = family(colFamilyName)
    val p = enc.encodePrefix(prefixKey)
    rows(cf, enc, p, null, prefix = p)
  }

  override def prefixScanWithMultiValues(
      prefixKey: UnsafeRow,
      colFamilyName: String
  ): StateStoreIterator[UnsafeRowPair] = {
    val (cf, enc) = family(colFamilyName)
    val p = enc.encodePrefix(prefixKey)
    rows(cf, enc, p, null, prefix = p, multi = true)
  }

  override def rangeScan(
      startKey: Option[UnsafeRow],
      endKey: Option[UnsafeRow],
      colFamilyName: String
  ): StateStoreIterator[UnsafeRowPair] = {
    val (cf, enc) = family(colFamilyName)
    rows(
      cf,
      enc,
      startKey.map(enc.encodeKey).getOrElse(Array.emptyByteArray),
      endKey.map(enc.encodeKey).orNull
    )
  }

  override def rangeScanWithMultiValues(
      startKey: Option[UnsafeRow],
      endKey: Option[UnsafeRow],
      colFamilyName: String
  ): StateStoreIterator[UnsafeRowPair] = {
    val (cf, enc) = family(colFamilyName)
    val from = startKey.map(enc.encodeKey).getOrElse(Array.emptyByteArray)
    rows(cf, enc, from, endKey.map(enc.encodeKey).orNull, multi = true)
  }

  override def createColFamilyIfAbsent(
      colFamilyName: String,
      keySchema: StructType,
      valueSchema: StructType,
      keyStateEncoderSpec: KeyStateEncoderSpec,
      useMultipleValuesPerKey: Boolean,
      isInternal: Boolean
  ): Unit = {
    if (!store.columnFamilies.names.contains(colFamilyName)) {
      checkWritable("createColFamilyIfAbsent")
      provider.forgetColumnFamily(colFamilyName) // a new family takes the schema given now
      store.columnFamilies.create(colFamilyName)
    }
    provider.registerColumnFamily(colFamilyName, keyStateEncoderSpec, valueSchema, useMultipleValuesPerKey)
  }

  override def registerColFamily(
      colFamilyName: String,
      keySchema: StructType,
      valueSchema: StructType,
      keyStateEncoderSpec: KeyStateEncoderSpec,
      useMultipleValuesPerKey: Boolean,
      isInternal: Boolean
  ): Unit =
    provider.registerColumnFamily(colFamilyName, keyStateEncoderSpec, valueSchema, useMultipleValuesPerKey)

  override def removeColFamilyIfExists(colFamilyName: String): Boolean = {
    checkWritable("removeColFamilyIfExists")
    if (colFamilyName == StateStore.DEFAULT_COL_FAMILY_NAME) {
      throw new IllegalArgumentException("the default column family cannot be removed")
    }
    val removed = store.columnFamilies.remove(colFamilyName)
    if (removed) provider.forgetColumnFamily(colFamilyName)
    removed
  }

  override def allColumnFamilyNames: Set[String] = store.columnFamilies.names

  override def commit(): Long = provider.synchronized {
    checkWritable("commit")
    val catchUpsBefore = store.counters.catchUpSnapshots.get
    val newId = store.commit()
    provider.afterCommit(newId, catchUpsBefore)
    if (forceSnapshotOnCommit) store.freezeNow()
    committedId = Some(newId)
    state = LineageStateStore.Committed
    provider.onCommitted(newId)
    provider.releaseOwnership()
    newId.version
  }

  override def abort(): Unit = provider.synchronized {
    if (state == LineageStateStore.Open) {
      if (!readOnly) store.abort()
      state = LineageStateStore.Aborted
      provider.releaseOwnership()
    }
  }

  override def release(): Unit = abort()

  /** This read store became a write store: closing it must neither abort nor release ownership. */
  private[spark] def markUpgraded(): Unit = provider.synchronized {
    if (state == LineageStateStore.Open) state = LineageStateStore.Upgraded
  }

  override def hasCommitted: Boolean = state == LineageStateStore.Committed

  override def metrics: StateStoreMetrics = provider.metricsOf(this)

  override def getStateStoreCheckpointInfo(): StateStoreCheckpointInfo = {
    val ckpt = committedId.getOrElse(
      throw new IllegalStateException(s"checkpoint info of ${provider.stateStoreId} asked before commit")
    )
    StateStoreCheckpointInfo(
      provider.stateStoreId.partitionId,
      ckpt.version,
      Some(ckpt.uniqueId),
      if (parentId.isEmptyState) None else Some(parentId.uniqueId)
    )
  }

  override def toString: String = s"LineageStateStore[${provider.stateStoreId}, version=$version]"
}

private[spark] object LineageStateStore {
  val Open = 0
  val Committed = 1
  val Aborted = 2
  val Upgraded = 3
}

package io.lineagestore.store

import java.util.Arrays

import io.lineagestore.engine.{BatchLog, Change, ChunkedWriteBatch, ListMerge, PendingWrites}
import io.lineagestore.format.{DeltaFile, DeltaRecordKind, FamilyKeys}
import io.lineagestore.lineage.CheckpointId

/** Between a batch's changes and a delta file's records, both ways. Merges (list appends) are written as
  * merge records holding only the appended elements, so a delta's size follows what a batch appended, not the
  * length of the list; replaying resolves them into plain values, so the local RocksDB (and every snapshot's
  * files) never holds a merge operand.
  */
private[store] object DeltaRecords {

  /** Writes every change of `pending` to `w` (created with `merges = pending.hasMerges`), in the order the
    * format requires: a key's changes adjacent and in order; keys ascending in a delta with merge records.
    */
  def write(pending: PendingWrites, w: DeltaFile.Writer): Unit =
    pending.foreachChange(inKeyOrder = pending.hasMerges) {
      case (k, Change.Put(v))   => w.put(k, v)
      case (k, Change.Delete)   => w.delete(k)
      case (k, Change.Merge(e)) => w.merge(k, e)
    }

  /** A batch's delta written while it runs ([[BatchLog]] over a [[DeltaInProgress]]). */
  final class Streamed(val delta: DeltaInProgress) extends BatchLog {
    override def put(key: Array[Byte], value: Array[Byte]): Unit = delta.put(key, value)
    override def delete(key: Array[Byte]): Unit = delta.delete(key)
    override def discard(): Unit = delta.abort()
  }

  /** The records of family `cf` in the verified delta `id`, as (checkpoint, kind, user key, value); all read
    * and verified before any is returned.
    */
  def ofFamily(
      files: CheckpointFiles,
      id: CheckpointId,
      cf: Int
  ): Seq[(CheckpointId, DeltaRecordKind, Array[Byte], Array[Byte])] = {
    val records = Seq.newBuilder[(CheckpointId, DeltaRecordKind, Array[Byte], Array[Byte])]
    files.readDelta(id) { (kind, k, v) =>
      if (FamilyKeys.isIn(cf, k)) records += ((id, kind, FamilyKeys.userKey(k), v))
    }
    records.result()
  }

  /** Stages the verified delta `id` into `batch` as plain puts and deletes. A merge appends to what the key's
    * previous record in the delta left, or, for a key's first record, to `committed(key)` (the value before
    * the delta).
    */
  def replay(
      files: CheckpointFiles,
      id: CheckpointId,
      committed: Array[Byte] => Array[Byte],
      batch: ChunkedWriteBatch
  ): Unit = {
    var lastKey: Array[Byte] = null
    var lastValue: Array[Byte] = null
    files.readDelta(id) { (kind, k, v) =>
      val value = kind match {
        case DeltaRecordKind.Put    => v
        case DeltaRecordKind.Delete => null
        case DeltaRecordKind.Merge  =>
          ListMerge(if (lastKey != null && Arrays.equals(lastKey, k)) lastValue else committed(k), v)
      }
      if (value == null) batch.delete(k) else batch.put(k, value)
      lastKey = k
      lastValue = value
    }
  }
}

package io.lineagestore.spark.adjunct

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{GenericInternalRow, JoinedRow, UnsafeRow}

/** The adjunct lookup operator's rows for one task: reads up to `batchSize` events ahead (each copied, as the
  * events' iterator may reuse its row), looks their keys up together (`getMany`: one RocksDB `MultiGet`,
  * where one `get` per event cost a JNI call each) and returns each event, in order, joined with its stored
  * row (ordering, deleted, values...), or with nulls where its key is null, absent or deleted (a tombstone).
  *
  * `keyOf` encodes an event's key (and may refuse it: a misplaced event of a partitioned table), called only
  * for events whose key columns (`keyOrdinals`) are all set. The row returned is reused: the scan over the
  * operator's RDD projects each before it asks for the next.
  */
final class LookupBatches(
    events: Iterator[InternalRow],
    batchSize: Int,
    keyOrdinals: Array[Int],
    keyOf: InternalRow => Array[Byte],
    getMany: java.util.List[Array[Byte]] => java.util.List[Array[Byte]],
    storedFields: Int
) extends Iterator[InternalRow] {
  private val held = new Array[InternalRow](batchSize)
  private val slots = new Array[Int](batchSize) // each held event's index in `found`; -1: a null key
  private val keys = new java.util.ArrayList[Array[Byte]](batchSize)
  private var found: java.util.List[Array[Byte]] = java.util.Collections.emptyList()
  private var heldCount = 0 // events held
  private var at = 0 // the next held event to return
  private val absent = new GenericInternalRow(storedFields)
  private val value = new UnsafeRow(storedFields)
  private val joined = new JoinedRow()

  override def hasNext: Boolean = at < heldCount || { fill(); heldCount > 0 }

  override def next(): InternalRow = {
    if (!hasNext) throw new NoSuchElementException("no more events to look up")
    val event = held(at)
    val slot = slots(at)
    held(at) = null
    at += 1
    val bytes = if (slot < 0) null else found.get(slot)
    val right =
      if (bytes == null) absent
      else {
        value.pointTo(bytes, bytes.length)
        if (value.getBoolean(1)) absent else value
      }
    joined(event, right)
  }

  private def fill(): Unit = {
    heldCount = 0
    at = 0
    keys.clear()
    while (heldCount < batchSize && events.hasNext) {
      val event = events.next().copy()
      held(heldCount) = event
      if (keyOrdinals.exists(event.isNullAt)) slots(heldCount) = -1
      else {
        slots(heldCount) = keys.size
        keys.add(keyOf(event))
      }
      heldCount += 1
    }
    found = if (keys.isEmpty) java.util.Collections.emptyList() else getMany(keys)
  }
}

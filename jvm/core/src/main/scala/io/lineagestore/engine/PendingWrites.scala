package io.lineagestore.engine

import java.util.{Arrays, Comparator}
import java.util.concurrent.ConcurrentSkipListMap

/** Thrown when one batch's uncommitted writes exceed the configured bound. */
class PendingWritesLimitException(message: String) extends IllegalStateException(message)

/** The writes of the batch in progress, kept out of RocksDB until commit, so abort (and a failed or duplicate
  * task) costs nothing and leaves no trace in the committed state.
  *
  * Ordered like RocksDB's bytewise comparator so it can be merged with a RocksDB iterator. A concurrent skip
  * list because Spark's operators remove keys while iterating (watermark eviction): its iterators are weakly
  * consistent and never throw on modification.
  *
  * Memory is bounded: past `limitBytes` of keys and values a write fails with an error naming `limitKey`.
  */
final class PendingWrites(limitBytes: Long, limitKey: String) {
  import PendingWrites._

  private val map = new ConcurrentSkipListMap[Array[Byte], Array[Byte]](Order)
  private var bytes = 0L

  def put(key: Array[Byte], value: Array[Byte]): Unit = record(key, value)

  def delete(key: Array[Byte]): Unit = record(key, Tombstone)

  /** None: not touched by this batch. Some(null): deleted by it. Some(v): written by it. */
  def lookup(key: Array[Byte]): Option[Array[Byte]] = {
    val v = map.get(key)
    if (v == null) None else if (v eq Tombstone) Some(null) else Some(v)
  }

  def isEmpty: Boolean = map.isEmpty
  def size: Int = map.size
  def sizeBytes: Long = bytes

  /** Entries with keys in [from, until) (until null = unbounded), in key order; value null = deleted. */
  def range(from: Array[Byte], until: Array[Byte]): Iterator[(Array[Byte], Array[Byte])] = {
    import scala.jdk.CollectionConverters._
    val sub = if (until == null) map.tailMap(from, true) else map.subMap(from, true, until, false)
    sub.entrySet().iterator().asScala.map { e =>
      (e.getKey, if (e.getValue eq Tombstone) null else e.getValue)
    }
  }

  def clear(): Unit = { map.clear(); bytes = 0L }

  private def record(key: Array[Byte], value: Array[Byte]): Unit = {
    val previous = map.put(key, value)
    bytes += value.length + (if (previous == null) key.length + EntryOverhead else -previous.length)
    if (bytes > limitBytes) {
      throw new PendingWritesLimitException(
        s"this batch's uncommitted state changes reached $bytes bytes, over the limit of $limitBytes bytes " +
          s"set by $limitKey. Raise $limitKey (the changes of one batch of one partition are held in memory " +
          "until commit), or use more shuffle partitions so each partition changes less per batch."
      )
    }
  }
}

object PendingWrites {
  val Order: Comparator[Array[Byte]] = (a: Array[Byte], b: Array[Byte]) => Arrays.compareUnsigned(a, b)
  private val Tombstone = new Array[Byte](0) // compared by reference: an empty value stays a value
  private val EntryOverhead = 64 // skip-list node and array headers, roughly
}

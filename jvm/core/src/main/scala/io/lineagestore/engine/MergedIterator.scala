package io.lineagestore.engine

/** An iterator holding a native resource; closed when exhausted or by [[close]]. */
trait CloseableIterator[A] extends Iterator[A] with AutoCloseable

object CloseableIterator {

  /** `it`, with `onClose` run once when closed. */
  def of[A](it: Iterator[A], onClose: => Unit = ()): CloseableIterator[A] = new CloseableIterator[A] {
    private var closed = false
    override def hasNext: Boolean = it.hasNext
    override def next(): A = it.next()
    override def close(): Unit = if (!closed) { closed = true; onClose }
  }
}

/** Merges committed entries with pending ones (both ascending, bytewise); a pending entry replaces the
  * committed entry of the same key by its resolved value (a pending merge appends to it), and a pending
  * delete hides it.
  */
final class MergedIterator(
    base: Iterator[(Array[Byte], Array[Byte])],
    pending: Iterator[(Array[Byte], PendingWrites.Entry)],
    onClose: () => Unit
) extends CloseableIterator[(Array[Byte], Array[Byte])] {
  private val b = base.buffered
  private val p = pending.buffered
  private var nextEntry: (Array[Byte], Array[Byte]) = _
  private var closed = false

  private def advance(): Unit = {
    nextEntry = null
    while (nextEntry == null && (b.hasNext || p.hasNext)) {
      val cmp =
        if (!b.hasNext) 1 else if (!p.hasNext) -1 else PendingWrites.Order.compare(b.head._1, p.head._1)
      val candidate =
        if (cmp < 0) b.next()
        else {
          val committed = if (cmp == 0) b.next()._2 else null
          val (k, entry) = p.next()
          (k, PendingWrites.resolve(entry, committed))
        }
      if (candidate._2 != null) nextEntry = candidate
    }
    if (nextEntry == null) close()
  }

  advance()

  override def hasNext: Boolean = nextEntry != null
  override def next(): (Array[Byte], Array[Byte]) = {
    if (nextEntry == null) throw new NoSuchElementException
    val r = nextEntry
    advance()
    r
  }
  override def close(): Unit = if (!closed) { closed = true; onClose() }
}

/** Two iterators of entries in ascending key order as one: their union, `newer`'s entry shadowing `older`'s
  * of the same key (a batch's entries in memory over those it spilled).
  */
private[engine] object Shadowing {
  def apply[V](
      newer: Iterator[(Array[Byte], V)],
      older: Iterator[(Array[Byte], V)]
  ): Iterator[(Array[Byte], V)] =
    new Iterator[(Array[Byte], V)] {
      private val n = newer.buffered
      private val o = older.buffered
      override def hasNext: Boolean = n.hasNext || o.hasNext
      override def next(): (Array[Byte], V) =
        if (!o.hasNext) n.next()
        else if (!n.hasNext) o.next()
        else {
          val cmp = PendingWrites.Order.compare(n.head._1, o.head._1)
          if (cmp < 0) n.next()
          else if (cmp > 0) o.next()
          else { o.next(); n.next() }
        }
    }
}

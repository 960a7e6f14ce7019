package io.lineagestore.engine

import java.nio.ByteBuffer
import java.util.Arrays

/** One change a batch made to a key. */
sealed abstract class Change
object Change {
  final case class Put(value: Array[Byte]) extends Change
  case object Delete extends Change

  /** Appends `elements` (one or more values joined by [[ListMerge.Delimiter]]) to the key's value. */
  final case class Merge(elements: Array[Byte]) extends Change
}

/** The engine's one merge: appending elements to a multi-valued key's value, joined by one `,` byte, which is
  * how Spark's multi-valued value decoder reads a list back (and what Spark's RocksDB merge operator does).
  * The local RocksDB never holds a merge operand: merges are resolved into plain values when a batch is
  * applied, so a snapshot's files read the same with or without this operation.
  */
object ListMerge {
  val Delimiter: Byte = ','

  /** `base` (null: no value) with `elements` appended. */
  def apply(base: Array[Byte], elements: Array[Byte]): Array[Byte] =
    if (base == null) elements
    else {
      val out = Arrays.copyOf(base, base.length + 1 + elements.length)
      out(base.length) = Delimiter
      System.arraycopy(elements, 0, out, base.length + 1, elements.length)
      out
    }

  /** The value after `changes`, applied in order to `base` (null: no value); null when the key is gone. */
  def applyAll(base: Array[Byte], changes: Iterable[Change]): Array[Byte] =
    changes.foldLeft(base) {
      case (_, Change.Put(v))         => v
      case (_, Change.Delete)         => null
      case (cur, Change.Merge(elems)) => apply(cur, elems)
    }
}

/** Every change a batch made to a key, in order: what [[PendingWrites]] keeps for a key written with
  * `everyChange` or merged into (Spark's change feed reports each change of a multi-valued key).
  */
private[engine] final class ChangeList(val list: Vector[Change]) {

  /** The heap the changes take, as the batch's bound counts it. */
  def valueBytes: Long = list.iterator.map {
    case Change.Put(v)   => v.length.toLong + 16
    case Change.Merge(e) => e.length.toLong + 16
    case Change.Delete   => 16L
  }.sum

  /** The changes as a spilled run holds them ([[ChangeList.decode]] reads them back): per change its kind,
    * then for a put or a merge its bytes' length (4 bytes) and its bytes.
    */
  def encoded: Array[Byte] = {
    val out = ByteBuffer.allocate(list.iterator.map {
      case Change.Put(v)   => 5 + v.length
      case Change.Merge(e) => 5 + e.length
      case Change.Delete   => 1
    }.sum)
    list.foreach {
      case Change.Delete   => out.put(ChangeList.DeleteKind)
      case Change.Put(v)   => out.put(ChangeList.PutKind).putInt(v.length).put(v)
      case Change.Merge(e) => out.put(ChangeList.MergeKind).putInt(e.length).put(e)
    }
    out.array()
  }
}

private[engine] object ChangeList {
  private val DeleteKind: Byte = 0
  private val PutKind: Byte = 1
  private val MergeKind: Byte = 2

  /** The changes [[ChangeList.encoded]] wrote, from `offset` of `raw` to its end. */
  def decode(raw: Array[Byte], offset: Int): ChangeList = {
    val in = ByteBuffer.wrap(raw, offset, raw.length - offset)
    def bytes(): Array[Byte] = { val b = new Array[Byte](in.getInt()); in.get(b); b }
    val list = Vector.newBuilder[Change]
    while (in.hasRemaining) list += (in.get() match {
      case DeleteKind => Change.Delete
      case PutKind    => Change.Put(bytes())
      case MergeKind  => Change.Merge(bytes())
      case other      => throw new IllegalStateException(s"spilled change of kind $other")
    })
    new ChangeList(list.result())
  }
}

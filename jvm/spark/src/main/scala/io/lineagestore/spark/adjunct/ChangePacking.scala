package io.lineagestore.spark.adjunct

import java.io.{ByteArrayInputStream, ByteArrayOutputStream, DataInputStream, DataOutputStream}
import java.util.Comparator

import io.lineagestore.spark.adjunct.AdjunctMaintain.Change

/** A task's reduced changes as one byte array on their way to the driver: per change the key, the ordering
  * value, the stored value and the unknown op (if any), length-prefixed. One array per task instead of a
  * million Java-serialized objects.
  */
object ChangePacking {

  /** The store's key order (RocksDB's bytewise comparator: unsigned lexicographic). */
  val ByKey: Comparator[Change] = (a: Change, b: Change) => java.util.Arrays.compareUnsigned(a.key, b.key)

  def pack(changes: Array[Change]): Array[Byte] = {
    val bytes = new ByteArrayOutputStream(changes.iterator.map(c => c.key.length + c.value.length + 20).sum)
    val out = new DataOutputStream(bytes)
    out.writeInt(changes.length)
    changes.foreach { c =>
      out.writeInt(c.key.length); out.write(c.key)
      out.writeLong(c.ordering)
      out.writeInt(c.value.length); out.write(c.value)
      out.writeBoolean(c.badOp != null)
      if (c.badOp != null) out.writeUTF(c.badOp)
    }
    out.flush()
    bytes.toByteArray
  }

  def unpack(packed: Array[Byte]): Iterator[Change] = {
    val in = new DataInputStream(new ByteArrayInputStream(packed))
    val n = in.readInt()
    Iterator.fill(n) {
      val key = new Array[Byte](in.readInt()); in.readFully(key)
      val ordering = in.readLong()
      val value = new Array[Byte](in.readInt()); in.readFully(value)
      val badOp = if (in.readBoolean()) in.readUTF() else null
      Change(key, ordering, value, badOp)
    }
  }
}

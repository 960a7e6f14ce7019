package io.lineagestore.format

import java.nio.ByteBuffer
import java.nio.charset.StandardCharsets.UTF_8

/** How a store's keys are laid out, in RocksDB and so in every delta record and SST: column families are key
  * prefixes in one keyspace, every key `[familyId:u16][user key]`. Family 0 holds the store's own
  * bookkeeping: `[0 0 'f'][name]` -> the family's id (u16), `[0 0 'i']` -> the next free id (u16),
  * `[0 0 'n'][id:u16]` -> the family's key count (i64). The default family is id 1; an id is never reused.
  */
object FamilyKeys {
  val DefaultId = 1

  def prefix(id: Int): Array[Byte] = u16(id)

  def fullKey(id: Int, key: Array[Byte]): Array[Byte] = {
    val out = new Array[Byte](key.length + 2)
    out(0) = (id >>> 8).toByte
    out(1) = id.toByte
    System.arraycopy(key, 0, out, 2, key.length)
    out
  }

  def userKey(full: Array[Byte]): Array[Byte] = java.util.Arrays.copyOfRange(full, 2, full.length)

  /** Whether the stored key `full` belongs to family `id`. */
  def isIn(id: Int, full: Array[Byte]): Boolean =
    full.length >= 2 && full(0) == (id >>> 8).toByte && full(1) == id.toByte

  // ---- family 0: the registry, the next id, the key counts ------------------------------------------------

  val NextIdKey: Array[Byte] = Array[Byte](0, 0, 'i')
  val RegistryStart: Array[Byte] = Array[Byte](0, 0, 'f')
  val RegistryEnd: Array[Byte] = Array[Byte](0, 0, 'g')

  def registryKey(name: String): Array[Byte] = RegistryStart ++ name.getBytes(UTF_8)
  def registryName(key: Array[Byte]): String = new String(key, RegistryStart.length, key.length - 3, UTF_8)
  def countKey(id: Int): Array[Byte] = Array[Byte](0, 0, 'n') ++ u16(id)

  def u16(v: Int): Array[Byte] = Array((v >>> 8).toByte, v.toByte)
  def u16Value(b: Array[Byte]): Int = ByteBuffer.wrap(b).getShort & 0xffff
}

package io.lineagestore.engine

import java.util.Arrays

/** A key's bytes as a hash-map key: compared by content, its hash computed once. The array must not change
  * while the key is in a map.
  */
private[engine] final class ByteKey(val bytes: Array[Byte]) {
  override val hashCode: Int = Arrays.hashCode(bytes)
  override def equals(other: Any): Boolean = other match {
    case k: ByteKey => k.hashCode == hashCode && Arrays.equals(k.bytes, bytes)
    case _          => false
  }
}

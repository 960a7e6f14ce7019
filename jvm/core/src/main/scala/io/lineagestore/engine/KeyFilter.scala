package io.lineagestore.engine

import scala.util.hashing.MurmurHash3

/** A Bloom filter over keys, on the heap: answers "not there" for most keys that are not, without a call into
  * RocksDB. A spilled run's keys go in one ([[SpilledEntries]]): most lookups of a batch that spilled are of
  * keys no run holds, and a RocksDB lookup through JNI, even one its own Bloom filters answer, cost about as
  * much as the rest of such a write (docs/benchmarks.md, "A first batch larger than `maxPendingBytes`").
  * About 10 bits per key, 7 probes: under 1% false positives. Written by one thread, then read.
  */
final class KeyFilter(expectedKeys: Int) {
  private val bits = math.max(64L, expectedKeys.toLong * KeyFilter.BitsPerKey)
  private val words = new Array[Long](((bits + 63) / 64).toInt)
  private val size = words.length.toLong * 64

  def add(key: Array[Byte]): Unit = {
    val (h1, h2) = KeyFilter.hashes(key)
    var i = 0
    while (i < KeyFilter.Probes) {
      val bit = java.lang.Long.remainderUnsigned(h1 + i * h2, size)
      words((bit >>> 6).toInt) |= 1L << (bit & 63)
      i += 1
    }
  }

  def mightContain(key: Array[Byte]): Boolean = {
    val (h1, h2) = KeyFilter.hashes(key)
    var i = 0
    while (i < KeyFilter.Probes) {
      val bit = java.lang.Long.remainderUnsigned(h1 + i * h2, size)
      if ((words((bit >>> 6).toInt) & (1L << (bit & 63))) == 0) return false
      i += 1
    }
    true
  }

  /** Bytes of heap the filter holds. */
  def heapBytes: Long = words.length * 8L
}

object KeyFilter {
  private val BitsPerKey = 10
  private val Probes = 7

  private def hashes(key: Array[Byte]): (Long, Long) = {
    val h1 = MurmurHash3.bytesHash(key, 0x5f3759df).toLong
    val h2 = MurmurHash3.bytesHash(key, 0x2545f491).toLong
    ((h1 << 32) ^ h2, (h2 << 32) ^ h1 | 1L)
  }
}

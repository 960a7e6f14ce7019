package io.lineagestore.engine

import java.util.Arrays

/** A hash table from byte-array keys, compared by content, to entries (never null), each with a number beside
  * it (the owner's: [[PendingWrites]] keeps a value's place in its [[ValueArena]] there, so that such a value
  * is no object of its own): open addressing with linear probing over four parallel arrays (key, its hash,
  * entry, number).
  *
  * Why not `java.util.HashMap` with a wrapper key: a batch's pending writes live through every young
  * collection until the batch commits, and such a map holds four objects per key (node, wrapper, key, value)
  * where this holds two (key, value), or one where the value is in the batch's arena; at a million rows per
  * batch the garbage collector's copying of those live objects cost ten times Spark's provider's GC
  * (docs/benchmarks.md, the scale grid).
  *
  * A stored key array must not change while it is in the table; a put to a present key keeps the stored array
  * (as `HashMap` does). Not thread-safe; reads from several threads are safe once writes have stopped and
  * were published (a committed batch handed to the apply thread).
  */
private[engine] final class KeyTable {
  private var keys = new Array[Array[Byte]](KeyTable.InitialCapacity)
  private var hashes = new Array[Int](KeyTable.InitialCapacity)
  private var entries = new Array[AnyRef](KeyTable.InitialCapacity)
  private var numbers = new Array[Long](KeyTable.InitialCapacity)
  private var count = 0

  def size: Int = count
  def isEmpty: Boolean = count == 0

  /** The key's entry, or null. */
  def get(key: Array[Byte]): AnyRef = {
    val h = KeyTable.hash(key)
    val i = slotOf(key, h)
    if (keys(i) == null) null else entries(i)
  }

  /** The key's slot, for [[entryAt]] and [[numberAt]], or -1: one lookup for both. */
  def slot(key: Array[Byte]): Int = {
    val i = slotOf(key, KeyTable.hash(key))
    if (keys(i) == null) -1 else i
  }

  /** The entry in a slot [[slot]] returned (until the next write). */
  def entryAt(slot: Int): AnyRef = entries(slot)

  /** The number beside the entry in a slot [[slot]] returned (until the next write). */
  def numberAt(slot: Int): Long = numbers(slot)

  /** Stores `entry` (not null) and `number` for `key`, returning the previous entry (null: none). */
  def put(key: Array[Byte], entry: AnyRef, number: Long = 0L): AnyRef = {
    val h = KeyTable.hash(key)
    val i = slotOf(key, h)
    if (keys(i) != null) { val previous = entries(i); entries(i) = entry; numbers(i) = number; previous }
    else { insertAt(i, key, h, entry, number); null }
  }

  /** Stores `entry` for `key` unless the key is present; returns the present entry (null: stored). */
  def putIfAbsent(key: Array[Byte], entry: AnyRef): AnyRef = {
    val h = KeyTable.hash(key)
    val i = slotOf(key, h)
    if (keys(i) != null) entries(i) else { insertAt(i, key, h, entry, 0L); null }
  }

  /** Every key and entry once, in no particular order. */
  def foreach(f: (Array[Byte], AnyRef) => Unit): Unit = foreachSlot((k, e, _) => f(k, e))

  /** Every key, entry and number once, in no particular order. */
  def foreachSlot(f: (Array[Byte], AnyRef, Long) => Unit): Unit = {
    var i = 0
    while (i < keys.length) {
      if (keys(i) != null) f(keys(i), entries(i), numbers(i))
      i += 1
    }
  }

  /** A table of the entries (with their numbers) for which `keep` holds (this one is left as it was). */
  def filtered(keep: AnyRef => Boolean): KeyTable = {
    val t = new KeyTable
    foreachSlot((k, e, n) => if (keep(e)) t.put(k, e, n))
    t
  }

  // the slot holding `key`, or the empty slot where it would go
  private def slotOf(key: Array[Byte], h: Int): Int = {
    val mask = keys.length - 1
    var i = h & mask
    while (keys(i) != null && !(hashes(i) == h && Arrays.equals(keys(i), key))) i = (i + 1) & mask
    i
  }

  private def insertAt(slot: Int, key: Array[Byte], h: Int, entry: AnyRef, number: Long): Unit = {
    require(entry != null, "a KeyTable entry is never null")
    keys(slot) = key
    hashes(slot) = h
    entries(slot) = entry
    numbers(slot) = number
    count += 1
    if (count * 2 > keys.length) grow() // at most half full: probes stay short
  }

  private def grow(): Unit = {
    val (oldKeys, oldHashes, oldEntries, oldNumbers) = (keys, hashes, entries, numbers)
    keys = new Array[Array[Byte]](oldKeys.length * 2)
    hashes = new Array[Int](oldKeys.length * 2)
    entries = new Array[AnyRef](oldKeys.length * 2)
    numbers = new Array[Long](oldKeys.length * 2)
    val mask = keys.length - 1
    var j = 0
    while (j < oldKeys.length) {
      if (oldKeys(j) != null) {
        var i = oldHashes(j) & mask
        while (keys(i) != null) i = (i + 1) & mask
        keys(i) = oldKeys(j)
        hashes(i) = oldHashes(j)
        entries(i) = oldEntries(j)
        numbers(i) = oldNumbers(j)
      }
      j += 1
    }
  }
}

private[engine] object KeyTable {
  private val InitialCapacity = 16

  /** The content hash, its bits mixed (keys often differ in their last bytes only, and the table's mask keeps
    * the low bits).
    */
  def hash(key: Array[Byte]): Int = {
    val h = Arrays.hashCode(key) * 0x9e3779b9
    h ^ (h >>> 16)
  }
}

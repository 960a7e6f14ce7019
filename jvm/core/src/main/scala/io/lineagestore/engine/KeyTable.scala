package io.lineagestore.engine

import java.util.Arrays

/** A hash table from byte-array keys, compared by content, to entries (never null): open addressing with
  * linear probing over three parallel arrays (key, its hash, entry).
  *
  * Why not `java.util.HashMap` with a wrapper key: a batch's pending writes live through every young
  * collection until the batch commits, and such a map holds four objects per key (node, wrapper, key, value)
  * where this holds two (key, value); at a million rows per batch the garbage collector's copying of those
  * live objects cost ten times Spark's provider's GC (docs/benchmarks.md, the scale grid).
  *
  * A stored key array must not change while it is in the table; a put to a present key keeps the stored array
  * (as `HashMap` does). Not thread-safe; reads from several threads are safe once writes have stopped and
  * were published (a committed batch handed to the apply thread).
  */
private[engine] final class KeyTable {
  private var keys = new Array[Array[Byte]](KeyTable.InitialCapacity)
  private var hashes = new Array[Int](KeyTable.InitialCapacity)
  private var entries = new Array[AnyRef](KeyTable.InitialCapacity)
  private var count = 0

  def size: Int = count
  def isEmpty: Boolean = count == 0

  /** The key's entry, or null. */
  def get(key: Array[Byte]): AnyRef = {
    val h = KeyTable.hash(key)
    val i = slotOf(key, h)
    if (keys(i) == null) null else entries(i)
  }

  /** Stores `entry` (not null) for `key`, returning the previous entry (null: none). */
  def put(key: Array[Byte], entry: AnyRef): AnyRef = {
    val h = KeyTable.hash(key)
    val i = slotOf(key, h)
    if (keys(i) != null) { val previous = entries(i); entries(i) = entry; previous }
    else { insertAt(i, key, h, entry); null }
  }

  /** Stores `entry` for `key` unless the key is present; returns the present entry (null: stored). */
  def putIfAbsent(key: Array[Byte], entry: AnyRef): AnyRef = {
    val h = KeyTable.hash(key)
    val i = slotOf(key, h)
    if (keys(i) != null) entries(i) else { insertAt(i, key, h, entry); null }
  }

  /** Every key and entry once, in no particular order. */
  def foreach(f: (Array[Byte], AnyRef) => Unit): Unit = {
    var i = 0
    while (i < keys.length) {
      if (keys(i) != null) f(keys(i), entries(i))
      i += 1
    }
  }

  /** A table of the entries for which `keep` holds (this one is left as it was). */
  def filtered(keep: AnyRef => Boolean): KeyTable = {
    val t = new KeyTable
    foreach((k, e) => if (keep(e)) t.put(k, e))
    t
  }

  // the slot holding `key`, or the empty slot where it would go
  private def slotOf(key: Array[Byte], h: Int): Int = {
    val mask = keys.length - 1
    var i = h & mask
    while (keys(i) != null && !(hashes(i) == h && Arrays.equals(keys(i), key))) i = (i + 1) & mask
    i
  }

  private def insertAt(slot: Int, key: Array[Byte], h: Int, entry: AnyRef): Unit = {
    require(entry != null, "a KeyTable entry is never null")
    keys(slot) = key
    hashes(slot) = h
    entries(slot) = entry
    count += 1
    if (count * 2 > keys.length) grow() // at most half full: probes stay short
  }

  private def grow(): Unit = {
    val (oldKeys, oldHashes, oldEntries) = (keys, hashes, entries)
    keys = new Array[Array[Byte]](oldKeys.length * 2)
    hashes = new Array[Int](oldKeys.length * 2)
    entries = new Array[AnyRef](oldKeys.length * 2)
    val mask = keys.length - 1
    var j = 0
    while (j < oldKeys.length) {
      if (oldKeys(j) != null) {
        var i = oldHashes(j) & mask
        while (keys(i) != null) i = (i + 1) & mask
        keys(i) = oldKeys(j)
        hashes(i) = oldHashes(j)
        entries(i) = oldEntries(j)
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

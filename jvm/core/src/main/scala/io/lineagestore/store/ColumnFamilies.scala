package io.lineagestore.store

import java.nio.ByteBuffer

import scala.collection.mutable

import io.lineagestore.engine.LocalRocksDb
import io.lineagestore.format.FamilyKeys
import io.lineagestore.format.FamilyKeys._

/** The column families of one store: a registry (name -> id), the next free id and per-family key counts,
  * kept as ordinary keys of family 0 in the key layout of [[FamilyKeys]], so they travel in deltas and
  * snapshots like any state and are rolled back by abort like any state.
  *
  * Invariants: "default" is always id 1; an id is never reused, so keys of a removed family can never
  * reappear under a new one.
  */
final class ColumnFamilies(db: LocalRocksDb) {
  import ColumnFamilies.DefaultName

  private val ids = mutable.Map.empty[String, Int]
  private val countChanges = mutable.Map.empty[Int, Long]

  reload()

  /** Re-reads the registry from the committed state (after a load) and forgets uncommitted count changes. */
  def reload(): Unit = {
    ids.clear()
    countChanges.clear()
    ids(DefaultName) = DefaultId
    val it = db.scan(RegistryStart, RegistryEnd)
    try it.foreach { case (k, v) => ids(registryName(k)) = u16Value(v) }
    finally it.close()
  }

  def names: Set[String] = ids.keySet.toSet
  def idOf(name: String): Option[Int] = ids.get(name)

  /** Creates `name` if absent; returns whether it was created. */
  def create(name: String): Boolean = {
    if (ids.contains(name)) return false
    val next =
      Option(db.get(NextIdKey)).map(u16Value).getOrElse(DefaultId + 1)
    if (next > 0xffff)
      throw new IllegalStateException("too many column families created over this store's life")
    db.put(NextIdKey, u16(next + 1))
    db.put(registryKey(name), u16(next))
    ids(name) = next
    true
  }

  /** Removes `name` and all its keys; returns whether it existed. The default family cannot be removed. */
  def remove(name: String): Boolean = {
    require(name != DefaultName, "the default column family cannot be removed")
    ids.remove(name) match {
      case None     => false
      case Some(id) =>
        val it = db.scan(prefix(id), prefix(id + 1))
        try it.foreach { case (k, _) => db.delete(k) }
        finally it.close()
        db.delete(registryKey(name))
        db.delete(countKey(id))
        countChanges.remove(id)
        true
    }
  }

  def adjustCount(id: Int, delta: Long): Unit = countChanges(id) = countChanges.getOrElse(id, 0L) + delta

  /** Number of keys per family, including this batch's changes. */
  def counts: Map[String, Long] = ids.map { case (name, id) =>
    name -> (Option(db.get(countKey(id))).map(ByteBuffer.wrap(_).getLong).getOrElse(0L) + countChanges
      .getOrElse(id, 0L))
  }.toMap

  /** Moves this batch's count changes into the pending writes; called right before commit. */
  def stageCounts(): Unit = {
    countChanges.foreach { case (id, d) =>
      if (d != 0) {
        val current = Option(db.get(countKey(id))).map(ByteBuffer.wrap(_).getLong).getOrElse(0L)
        db.put(countKey(id), ByteBuffer.allocate(8).putLong(current + d).array())
      }
    }
    countChanges.clear()
  }

  def discardCounts(): Unit = countChanges.clear()
}

object ColumnFamilies {
  val DefaultName = "default"
  val DefaultId: Int = FamilyKeys.DefaultId
}

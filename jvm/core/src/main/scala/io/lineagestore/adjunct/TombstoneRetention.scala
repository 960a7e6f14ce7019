package io.lineagestore.adjunct

import java.nio.ByteBuffer

/** How long an adjunct table keeps a deleted key's tombstone (docs/adjunct-tables.md "Tombstone retention"):
  * pure decisions; the maintain tasks apply them to the stores.
  *
  * The bound is a number of *ordering units* (the change stream's `ordering` column: sequence numbers,
  * microseconds of a timestamp, days of a date), fixed when the table is created and kept in its
  * `table.properties` (`tombstoneRetention`). Each table record of such a table carries the highest ordering
  * value any batch brought so far (`highestOrdering`); a batch's maintain tasks use the *floor* of the record
  * they build on, `highestOrdering - retention`: a tombstone whose ordering is at or below it is purged, and
  * a change at or below it for a key the store holds nothing of is refused (not applied, counted): its key's
  * tombstone may have been purged, and applying it could bring a deleted key back.
  */
object TombstoneRetention {

  /** The key of `table.properties` holding the bound (absent: tombstones are kept for ever). */
  val MetaKey = "tombstoneRetention"

  /** The column family of a store holding one entry per tombstone, keyed by its ordering then its key, so the
    * tombstones at or below a floor are one range scan, not a scan of the table.
    */
  val IndexFamily = "adjunct.tombstones"

  /** The bound a table keeps, from its `table.properties` (None: tombstones kept for ever). */
  def of(meta: Map[String, String], path: String): Option[Long] =
    meta.get(MetaKey).map { v =>
      v.toLongOption
        .filter(_ >= 0)
        .getOrElse(
          throw new IllegalStateException(
            s"adjunct table $path: its table.properties has $MetaKey='$v', not a non-negative whole number"
          )
        )
    }

  /** Checks a bound passed to a call (`passed`: None when the call names none) against the one the table
    * keeps (`kept`; `created`: whether this call creates the table); returns the bound the table has. A
    * negative bound, or one that differs from the table's, is refused by name: a bound changed after
    * tombstones were purged (or kept unindexed, by a table created without one) would let a late change bring
    * back a deleted key, or never purge the tombstones written before.
    */
  def settle(path: String, passed: Option[Long], kept: Option[Long], created: Boolean): Option[Long] = {
    passed.filter(_ < 0).foreach { g =>
      throw new IllegalArgumentException(
        s"adjunct table $path: tombstone_retention=$g is negative; pass a number of ordering units >= 0 " +
          "(how far behind the highest ordering value a deleted key's tombstone is kept), or none"
      )
    }
    if (created) passed
    else
      (passed, kept) match {
        case (None, k)                    => k
        case (Some(g), Some(k)) if g == k => kept
        case (Some(g), Some(k))           =>
          throw new IllegalArgumentException(
            s"adjunct table $path keeps tombstones for $k ordering units (tombstone_retention=$k, set when " +
              s"it was created), but this call passes tombstone_retention=$g; nothing was committed. Pass $k " +
              "(or none: the table's), or maintain a new table at another path: a bound changed after " +
              "tombstones were purged could let a late change bring a deleted key back."
          )
        case (Some(g), None) =>
          throw new IllegalArgumentException(
            s"adjunct table $path was created without tombstone retention (its tombstones are kept for ever " +
              s"and not indexed by ordering), but this call passes tombstone_retention=$g; nothing was " +
              "committed. Pass none, or maintain a new table at another path with the bound from its first batch."
          )
      }
  }

  /** The floor below which a batch over `latest` purges tombstones and refuses late changes: the record's
    * highest ordering minus the bound; None (nothing purged or refused) without a bound or before any change.
    */
  def floor(retention: Option[Long], latest: Option[AdjunctCommit]): Option[Long] =
    for {
      r <- retention
      highest <- latest.flatMap(_.tombstones).flatMap(_.highestOrdering)
    } yield
      if (highest < Long.MinValue + r) Long.MinValue // no underflow: the floor stays at the bottom
      else highest - r

  /** What the next record of a table with a bound says: the highest ordering over `latest`'s and the batch's
    * tasks' (`highest`: each task's, None for one that saw no change), what the tasks purged and refused.
    */
  def stats(
      latest: Option[AdjunctCommit],
      highest: Seq[Option[Long]],
      purged: Long,
      refusedLate: Long
  ): TombstoneStats =
    TombstoneStats(
      (latest.flatMap(_.tombstones).flatMap(_.highestOrdering) +: highest).flatten.maxOption,
      purged,
      refusedLate
    )

  /** A tombstone's entry in [[IndexFamily]]: its ordering (8 bytes, big-endian with the sign bit flipped, so
    * bytewise order is numeric order) then the key.
    */
  def indexKey(ordering: Long, key: Array[Byte]): Array[Byte] =
    ByteBuffer.allocate(8 + key.length).putLong(ordering ^ Long.MinValue).put(key).array()

  /** The key an [[indexKey]] names. */
  def keyOfIndex(index: Array[Byte]): Array[Byte] = java.util.Arrays.copyOfRange(index, 8, index.length)

  /** The end (exclusive) of the index entries at or below `floor`; None: all of them. */
  def indexEnd(floor: Long): Option[Array[Byte]] =
    Option.when(floor != Long.MaxValue)(ByteBuffer.allocate(8).putLong((floor + 1) ^ Long.MinValue).array())
}

/** What a record of a table with tombstone retention says of its tombstones: the highest ordering value any
  * batch brought so far (None: no change yet), and what this version's maintain tasks purged (tombstones at
  * or below the floor) and refused (late changes at or below it for keys the store held nothing of).
  */
final case class TombstoneStats(highestOrdering: Option[Long], purged: Long, refusedLate: Long)

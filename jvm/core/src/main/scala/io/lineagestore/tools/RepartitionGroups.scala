package io.lineagestore.tools

/** Old partitions whose keys all land in `newPartitions`, and only there; `direct` when every key of them
  * goes to the one new partition without being placed (see [[RepartitionGroups.plan]]).
  */
final case class RepartitionGroup(oldPartitions: Seq[Int], newPartitions: Seq[Int], direct: Boolean)

/** Splits a repartition from `oldN` to `newN` partitions into independent groups, so that each group can be
  * written on its own (in parallel, with only its own new stores open).
  *
  * Spark places a key in pmod(h, n) (h its Murmur3 hash). When one count divides the other, that splits the
  * key space into disjoint classes:
  *   - growing to `newN = k * oldN`: pmod(h, k * oldN) mod oldN = pmod(h, oldN), so new partition q draws
  *     only from old partition q mod oldN: group g is old {g} -> new {g, g + oldN, ..., g + (k - 1) * oldN},
  *     and each key is still placed among those k;
  *   - shrinking to `newN = oldN / k`: pmod(h, oldN) mod newN = pmod(h, newN), so every key of old partition
  *     p belongs to new partition p mod newN: group q is old {q, q + newN, ...} -> new {q}, `direct` (no key
  *     is decoded or hashed: its partition follows from where it was).
  * Otherwise a new partition may draw from any old one: one group of everything, every key placed.
  */
object RepartitionGroups {

  def plan(oldN: Int, newN: Int): Seq[RepartitionGroup] = {
    require(oldN > 0 && newN > 0, s"partition counts must be positive, got $oldN -> $newN")
    if (newN % oldN == 0)
      (0 until oldN).map(g => RepartitionGroup(Seq(g), (g until newN by oldN), direct = newN == oldN))
    else if (oldN % newN == 0)
      (0 until newN).map(q => RepartitionGroup((q until oldN by newN), Seq(q), direct = true))
    else Seq(RepartitionGroup(0 until oldN, 0 until newN, direct = false))
  }
}

package io.lineagestore.engine

/** When a store that is only read (an adjunct table's replica: loaded, then looked up by many tasks, never
  * committed) should be compacted into one sorted level. A load replays deltas as writes, so what it replayed
  * sits in memtables and L0 files: a lookup searches the memtables' skip lists and probes each L0 file whose
  * range holds the key before it reaches the one sorted level below, and a replica built from one large delta
  * holds its whole table that way. A compaction rewrites the store once so lookups find each key in one file.
  * Counted in entries, not bytes: a memtable's bytes (skip list nodes, uncompressed) and an SST's
  * (compressed) are not comparable, and a rule in bytes compacted a 1M-key table every seventh version.
  */
object ReadCompaction {

  /** Below this many unsorted entries a replica is left as it is: a small memtable is as fast to search as an
    * SST, and a small table's lookups do not pay for the rewrite.
    */
  val FloorEntries: Long = 100000L

  /** Whether a compaction is due for a store holding `unsortedEntries` in memtables and L0 files, and
    * `sortedEntries` in the levels below: when the unsorted ones are past [[FloorEntries]] and at least a
    * quarter of the sorted ones. So a first load of a large table compacts at once, and versions that each
    * change a few keys are left in the memtable until they add up: each compaction rewrites at most five
    * times what was replayed since the last (a 1M-key table changing 10,000 keys per version: every 25).
    */
  def due(unsortedEntries: Long, sortedEntries: Long): Boolean =
    unsortedEntries >= FloorEntries && unsortedEntries * 4 >= sortedEntries
}

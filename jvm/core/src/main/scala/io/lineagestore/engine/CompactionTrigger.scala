package io.lineagestore.engine

/** How RocksDB compacts one store, chosen at each freeze from the bytes flushed in the snapshot interval it
  * ends, against the store's size. A compaction's rewritten SSTs are new files the next snapshot uploads, and
  * so are the L0 files a flush writes, unless a compaction merges them away first:
  *   - where an interval's flushes add up to several copies of the store (a million rows per batch, every key
  *     changed in every flush), compacting at 4 L0 files merges those copies before the snapshot uploads them
  *     all (the `1m-1m-100b` cell's SST bytes per batch fell from 43-48 to 35-37 MiB, under Spark's
  *     provider's 32 MiB plus its larger changelogs, docs/benchmarks.md); and every L0 compaction then
  *     rewrites a whole copy of the store whichever level it lands in, so it lands in the last one
  *     ([[levelBaseBytes]]): RocksDB otherwise keeps a store larger than its 256 MiB level base as two
  *     copies, the level L0 compacts into plus the last level below it, both rewritten within an interval,
  *     and each snapshot uploaded both (`1m-1m-1k`: 2.8 copies of each partition's store per snapshot);
  *   - otherwise the interval's flushes hold mostly different keys (small batches, or batches of a tenth of
  *     the keys), and each compaction rewrites much of the store to take in little, so compactions should be
  *     rare: the L0 file count that triggers one is set high ([[FewCopies]]), and RocksDB's own L0 size score
  *     compacts once L0 holds as much as the level base or the level it compacts into. A count alone mistakes
  *     small flushes for many: the write-buffer manager (`memoryBytes`, shared by every store of the
  *     executor) flushes a store's memtable long before it is full when many stores share it, and at 8 files
  *     the 16 stores of `10m-100k-1k` (flushes of 13-18 MiB, about five an interval) compacted once or twice
  *     an interval, each time rewriting their 240 MiB L5 and part of L6: 374-422 MiB per snapshot, for 64 MiB
  *     of new keys (docs/benchmarks.md); except where they add up to about one copy of a store larger than
  *     the level base and are still in L0 at the freeze, which compacts as for many copies ([[forInterval]]
  *     says why).
  * A margin between the two keeps a store near the boundary from switching at every freeze.
  */
object CompactionTrigger {

  /** The L0 file count that triggers a compaction where the flushes hold mostly different keys: a bound on
    * read amplification (a lookup probes every L0 file's Bloom filter), high enough that the L0 size score
    * decides. 8 before: with full 64 MiB memtables the size score fired first anyway (at four files), with
    * the write-buffer manager's small flushes the count did, and compacted several times as often.
    */
  val FewCopies = 20
  val ManyCopies = 4
  val Initial: Int = FewCopies

  /** RocksDB's L0 counts at which writes slow down and stop (its defaults, 20 and 36, are at or near
    * [[FewCopies]]): well above it, so a compaction in progress never throttles the apply thread's writes
    * while flushes go on.
    */
  val SlowdownWritesAt = 36
  val StopWritesAt = 56

  /** RocksDB's `max_bytes_for_level_base` default: with dynamic level sizes, a store up to this size lives in
    * the last level alone.
    */
  val DefaultLevelBase: Long = 256L << 20

  /** The largest level base set: an L0 compaction into the last level rewrites all of it, and one compaction
    * is one thread's work while flushes go on (past 36 L0 files RocksDB stops writes).
    */
  val MaxLevelBase: Long = 1L << 30

  /** The trigger after an interval of `shape`, given the `current`, for a store whose level base at few
    * copies is `levelBase` (RocksDB's; tests shrink it):
    *   - its flushes hold several copies of the store: many copies;
    *   - they rewrote about one copy of a store larger than the level base (what a load adds is no copy), and
    *     it is still in L0 at the freeze (three quarters of a copy or more): many copies too. Those L0 files
    *     are uploaded by this snapshot and again inside the intermediate level the next compaction writes
    *     them into (`10m-1m-100b` at 8 files: about a copy in L0 plus 190-210 MiB of L5 at each freeze, per
    *     store); at 4 with the store in its last level alone, most of an interval's flushes are merged before
    *     its freeze (278.7 against 308.8 MiB per batch over 33 batches, docs/benchmarks.md). Where
    *     compactions keep L0 small (`1m-100k-1k`: a quarter to a half of a copy at its freezes, the churn
    *     absorbed by L5 while L6 stays put), 4 would rewrite the whole store each interval instead (281
    *     against 241 MB per batch, measured);
    *   - fewer: few copies, with a margin below each threshold (and below the level base) so that a store
    *     near one does not switch at every freeze.
    */
  def forInterval(shape: IntervalShape, current: Int, levelBase: Long = DefaultLevelBase): Int = {
    import shape._
    def oneCopyInL0 =
      storeBytes > levelBase && rewrittenBytes * 4 >= 3 * storeBytes && l0Bytes * 4 >= 3 * storeBytes
    if (storeBytes <= 0) current
    else if (flushedBytes >= 3 * storeBytes || oneCopyInL0) ManyCopies
    else if (
      flushedBytes * 2 <= 3 * storeBytes &&
      (storeBytes * 8 <= 7 * levelBase || flushedBytes * 8 <= 3 * storeBytes)
    ) FewCopies
    else current
  }

  /** Whether the flushes of an interval not yet over, `flushedBytes`, rewrote several copies of a store of
    * `storeBytes` (its largest sorted level, or RocksDB's estimate where larger), so that it compacts as for
    * many copies before its freeze. What the live SST files, L0 included, grew by since the interval began
    * (`liveAtStartBytes` to `liveBytes`) is what the flushes added, not what they rewrote: a load's new keys,
    * or copies no compaction has merged yet. Counted as rewrites, a load of 640 MiB per store switched 6 of a
    * 10M-key cell's 16 stores to 4 while its compactions lagged behind its flushes (17 L0 files beside an 82
    * MB L6), and until the second freeze every L0 compaction then rewrote a whole store into its last level
    * (3.4 s of compaction CPU per batch against 1.5 s with this rule, docs/benchmarks/scale-history.md).
    */
  def rewroteManyCopies(
      flushedBytes: Long,
      storeBytes: Long,
      liveBytes: Long,
      liveAtStartBytes: Long
  ): Boolean =
    storeBytes > 0 && flushedBytes - math.max(0L, liveBytes - liveAtStartBytes) >= 3 * storeBytes

  /** RocksDB's level base for a store of `storeBytes` compacting at `trigger`: `levelBase` where the flushes
    * hold few copies; at many copies, room for the store to grow to twice its size in the last level alone (a
    * power of two, so the value changes only when the store's size does by as much), at most
    * [[MaxLevelBase]].
    */
  def levelBaseBytes(trigger: Int, storeBytes: Long, levelBase: Long = DefaultLevelBase): Long =
    if (trigger != ManyCopies) levelBase
    else {
      val wanted = math.max(levelBase, 2 * storeBytes)
      math.min(MaxLevelBase, java.lang.Long.highestOneBit(wanted - 1) << 1)
    }
}

/** What a snapshot interval did to a store, as [[CompactionTrigger.forInterval]] reads it: the bytes its
  * flushes wrote, the store's size at its end and at its start (RocksDB's estimate), and the L0 files live at
  * the freeze that ends it (0 within an interval: known only at its end).
  */
final case class IntervalShape(
    flushedBytes: Long,
    storeBytes: Long,
    storeAtStartBytes: Long,
    l0Bytes: Long = 0L
) {

  /** What the flushes rewrote of keys the store had: what they wrote less what the store grew by. */
  def rewrittenBytes: Long = math.max(0L, flushedBytes - math.max(0L, storeBytes - storeAtStartBytes))
}

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
  *     the keys), and each compaction rewrites the store to take in little: compacting at 8 instead of
  *     RocksDB's 4 halves those rewrites (the `default` preset's SST bytes per batch fell by a quarter) and
  *     the compaction threads' work (at 1 KiB values, 0.54 s per batch at 4 against 0.36 s at 8), and the
  *     intermediate levels RocksDB keeps spare the last level most of them; except where they add up to about
  *     one copy of a store larger than the level base, which compacts as for many copies ([[forInterval]]
  *     says why).
  * A margin between the two keeps a store near the boundary from switching at every freeze.
  */
object CompactionTrigger {
  val FewCopies = 8
  val ManyCopies = 4
  val Initial: Int = FewCopies

  /** RocksDB's `max_bytes_for_level_base` default: with dynamic level sizes, a store up to this size lives in
    * the last level alone.
    */
  val DefaultLevelBase: Long = 256L << 20

  /** The largest level base set: an L0 compaction into the last level rewrites all of it, and one compaction
    * is one thread's work while flushes go on (past 36 L0 files RocksDB stops writes).
    */
  val MaxLevelBase: Long = 1L << 30

  /** The trigger after an interval whose flushes rewrote `rewrittenBytes` of a store of `storeBytes` (what it
    * flushed less what the store grew by: a load adds keys, it does not copy them), given the `current`:
    *   - several copies of the store: many copies;
    *   - about one copy, into a store larger than RocksDB's level base: many copies too. At 8 such a store
    *     compacts L0 into an intermediate level, about once in an interval and a half, so nearly every flush
    *     is uploaded as an L0 file at the freeze after it and again inside that level when the next
    *     compaction rewrites it; at 4 with the store in its last level alone, an interval's flushes are
    *     mostly merged into the one copy its snapshot uploads (`10m-1m-100b`: 263.9 against 308.8 MiB per
    *     batch, the same CPU; docs/benchmarks.md). Not below the level base: there the store already lives in
    *     one level, and 4 only doubles the compactions for the same bytes (`1m-100k-1k`);
    *   - fewer: few copies, with a margin below each threshold (and below the level base) so that a store
    *     near one does not switch at every freeze.
    * `levelBase` is the level base the store runs with at few copies (RocksDB's; tests shrink it).
    */
  def forInterval(
      rewrittenBytes: Long,
      storeBytes: Long,
      current: Int,
      levelBase: Long = DefaultLevelBase
  ): Int =
    if (storeBytes <= 0) current
    else if (rewrittenBytes >= 3 * storeBytes) ManyCopies
    else if (storeBytes > levelBase && rewrittenBytes * 4 >= 3 * storeBytes) ManyCopies
    else if (
      rewrittenBytes * 2 <= 3 * storeBytes &&
      (storeBytes * 8 <= 7 * levelBase || rewrittenBytes * 8 <= 3 * storeBytes)
    ) FewCopies
    else current

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

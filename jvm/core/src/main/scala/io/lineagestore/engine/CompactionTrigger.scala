package io.lineagestore.engine

/** RocksDB's L0 compaction trigger for one store, chosen at each freeze from the bytes flushed in the
  * snapshot interval it ends, against the store's size. A compaction's rewritten SSTs are new files the next
  * snapshot uploads, and so are the L0 files a flush writes, unless a compaction merges them away first:
  *   - where an interval's flushes add up to several copies of the store (a million rows per batch, every key
  *     changed in every flush), compacting at 4 L0 files merges those copies before the snapshot uploads them
  *     all (the `1m-1m-100b` cell's SST bytes per batch fell from 43-48 to 35-37 MiB, under Spark's
  *     provider's 32 MiB plus its larger changelogs, docs/benchmarks.md);
  *   - otherwise the interval's flushes hold mostly different keys (small batches, or batches of a tenth of
  *     the keys), and each compaction rewrites the store to take in little: compacting at 8 instead of
  *     RocksDB's 4 halves those rewrites (the `default` preset's SST bytes per batch fell by a quarter) and
  *     the compaction threads' work (at 1 KiB values, 0.54 s per batch at 4 against 0.36 s at 8).
  * A margin between the two keeps a store near the boundary from switching at every freeze.
  */
object CompactionTrigger {
  val FewCopies = 8
  val ManyCopies = 4
  val Initial: Int = FewCopies

  /** The trigger after an interval that flushed `flushedBytes` into a store of `storeBytes`, given the
    * `current`.
    */
  def forInterval(flushedBytes: Long, storeBytes: Long, current: Int): Int =
    if (storeBytes <= 0) current
    else if (flushedBytes >= 3 * storeBytes) ManyCopies
    else if (flushedBytes * 2 <= 3 * storeBytes) FewCopies
    else current
}

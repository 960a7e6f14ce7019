package io.lineagestore.engine

import java.io.File
import java.nio.file.Files

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import org.rocksdb._

/** The executor-local RocksDB instance of one store, plus the batch in progress.
  *
  * Committed state lives in RocksDB; the batch in progress lives in [[PendingWrites]] (past its bound, partly
  * in [[SpilledEntries]] under `<dir>.spill/`) and reaches RocksDB only through a commit, written in chunks
  * ([[ChunkedWriteBatch]]) while reads look through the batch until the last chunk is in. Reads see the
  * committed state overlaid with the pending writes. The write-ahead log is off: the durable copy of every
  * commit is the delta file in the blob store, and after a crash the local directory is rebuilt from there.
  *
  * A commit may leave its write batch to a thread of `applyPool` ([[commitInBackground]]): until that write
  * is done, reads look through the batch it writes (the in-flight batch), and whatever needs RocksDB itself
  * to hold it (another commit, a scan, a flush or checkpoint, closing) waits for it first.
  *
  * Threads. One thread owns the store at a time (the task's: Spark's contract) and alone calls everything but
  * what follows: [[get]], [[exists]] and [[scan]] read the batch in progress, and [[get]] remembers each read
  * in it for the batch's later writes ([[PendingWrites.noteRead]]), state confined to that thread. The
  * in-flight batch is set and cleared by the owning thread only; the apply thread reads the batch handed to
  * it and writes it to RocksDB, nothing else (the owner's reads of that batch only read it too). Snapshot
  * creation by maintenance only reads. [[readCommitted]], [[readCommittedMany]] and [[scanCommitted]] are for
  * readers that share the store (the tasks of an executor reading an adjunct table's replica): they read
  * RocksDB only, whose gets and iterators are thread-safe, and change nothing of this object but the set of
  * open iterators (guarded by its own monitor), so any number of threads may call them at once, and with the
  * owner's writes to the batch in progress, which they never see; never with a load, commit or close (which
  * reopen or write RocksDB under them: the caller's lock keeps those apart), and only with no batch in
  * flight. The fields they read (`db`, `behind`) are published to them by that lock; `inFlight` is volatile.
  * [[approximateMemoryBytes]] may be read from any thread (metrics), a batch behind.
  *
  * `openLog` opens each batch's [[BatchLog]] (see [[PendingWrites]]); a commit discards a log not taken.
  */
final class LocalRocksDb(
    val dir: File,
    tuning: RocksDbTuning,
    pendingLimitBytes: Long,
    pendingLimitKey: String,
    applyPool: java.util.concurrent.Executor = SharedApplyPool.pool,
    openLog: () => BatchLog = BatchLog.None,
    backlog: ApplyBacklog = null
) extends AutoCloseable {
  // committed batches not yet written, bounded executor-wide (the store's own bound by default)
  private val applyBacklog = Option(backlog).getOrElse(SharedApplyPool.backlog(pendingLimitBytes))
  RocksDB.loadLibrary()

  private val (cache, writeBufferManager) = SharedRocksDbMemory(tuning.memoryBytes)
  // RocksDB's counters (tickers only: no histograms or timers), read for the bytes flushed since the last
  // freeze; and the L0 compaction trigger and level base chosen from them ([[CompactionTrigger]]), read and
  // set by whichever thread writes RocksDB, one at a time (see the class comment). Counters, not an event
  // listener: a listener's JNI callback from a flush thread aborts the process when it races the JVM's exit.
  private val statistics = new Statistics(java.util.EnumSet.allOf(classOf[HistogramType]))
  private var l0Trigger = CompactionTrigger.Initial
  private var levelBase = tuning.levelBaseBytes
  private var flushedAtLastLook = 0L // the interval's flushed bytes when adaptWithinInterval last looked
  private var storeAtIntervalStart = 0L // the store's size at the last freeze or open
  private var liveAtIntervalStart = 0L // the bytes of its live SST files then, L0 included
  private val bloom = new BloomFilter(10)
  private val tableConfig =
    new BlockBasedTableConfig().setBlockCache(cache).setFilterPolicy(bloom)
  private val options = new Options()
    .setCreateIfMissing(true)
    .setWriteBufferSize(tuning.writeBufferBytes)
    .setWriteBufferManager(writeBufferManager)
    .setCompressionType(RocksDbTuning.compressionType(tuning.sstCompression))
    .setTableFormatConfig(tableConfig)
    .setMaxOpenFiles(256)
    .setLevel0FileNumCompactionTrigger(CompactionTrigger.Initial)
    .setLevel0SlowdownWritesTrigger(CompactionTrigger.SlowdownWritesAt)
    .setLevel0StopWritesTrigger(CompactionTrigger.StopWritesAt)
    .setMaxBytesForLevelBase(tuning.levelBaseBytes)
    .setStatistics(statistics)
    // A whole-key Bloom filter per memtable (a fiftieth of its size): most lookups of a batch are of keys the
    // memtables do not hold (written more than a memtable ago), and each searched every memtable's skip
    // list first: a fifth of the task threads' RocksDB lookups at 1 KiB values (docs/benchmarks.md).
    .setMemtablePrefixBloomSizeRatio(RocksDbTuning.MemtableBloomRatio)
    .setMemtableWholeKeyFiltering(true)
  private val writeOptions = new WriteOptions().setDisableWAL(true)
  private val readOptions = new ReadOptions()
  private var db: RocksDB = _
  private val openIterators = mutable.Set.empty[RocksIterator]

  // Batches that outgrow pendingLimitBytes spill here, each to a directory of its own (a batch in flight may
  // still be read back by its apply thread while the next one spills); whatever is here at open was left by
  // a process that died mid-batch, and is deleted.
  private val spillRoot = new File(dir.getParentFile, dir.getName + ".spill")
  private val spills = new java.util.concurrent.atomic.AtomicLong
  private def newBatch() =
    new PendingWrites(
      pendingLimitBytes,
      pendingLimitKey,
      openLog,
      () => new SpilledEntries(new File(spillRoot, s"batch-${spills.incrementAndGet()}"))
    )
  private var current = newBatch()

  /** The batch in progress. */
  def pending: PendingWrites = current

  // The last commit's batch while an apply thread writes it to RocksDB (null: none). Volatile only for
  // approximateMemoryBytes, which metrics may call from another thread.
  @volatile private var inFlight: InFlight = null
  // why a committed batch never reached RocksDB (null: none did): every use fails until a reload replaces
  // the directory (closeForReplace)
  private var behind: Throwable = null

  // lookups of committed state in RocksDB, task thread only (tests: a write after a read of its key makes
  // none)
  private[lineagestore] var committedLookups = 0L

  open()

  private def open(): Unit = {
    LocalFiles.deleteRecursively(spillRoot)
    Files.createDirectories(dir.toPath)
    db = RocksDB.open(options, dir.getAbsolutePath)
    l0Trigger = CompactionTrigger.Initial
    levelBase = tuning.levelBaseBytes
    flushedAtLastLook = 0L
    storeAtIntervalStart = db.getLongProperty("rocksdb.estimate-live-data-size")
    liveAtIntervalStart = levelSizes.values.sum
    statistics.getAndResetTickerCount(TickerType.FLUSH_WRITE_BYTES)
  }

  /** Closes RocksDB so the caller may replace the directory's files, then [[reopen]]. */
  def closeForReplace(): Unit = {
    settleInFlight(rethrow = false) // the directory is being replaced: a failed write no longer matters
    behind = null
    pending.clear()
    closeIterators()
    if (db != null) { db.close(); db = null }
  }

  def reopen(): Unit = { require(db == null, "reopen without closeForReplace"); open() }

  /** The key's value, the batch in progress included. The caller must not modify `key` afterwards. */
  def get(key: Array[Byte]): Array[Byte] = pending.find(key) match {
    case null =>
      val value = committed(key)
      pending.noteRead(key, value != null)
      value
    case read if PendingWrites.isRead(read) => committed(key)
    case entry                              => PendingWrites.resolve(entry, committed(key))
  }

  /** Whether the key has a value, the batch in progress included; answered without a lookup of committed
    * state when the batch read the key before (Spark's operators read a key's state before writing it:
    * [[PendingWrites.noteRead]]).
    */
  def exists(key: Array[Byte]): Boolean = pending.find(key) match {
    case null                               => committedExists(key)
    case read if PendingWrites.isRead(read) => PendingWrites.readExists(read)
    case entry                              => PendingWrites.existsAfter(entry)
  }

  /** The committed value only, ignoring the batch in progress (the in-flight batch, if any, is committed). */
  def getCommitted(key: Array[Byte]): Array[Byte] = committed(key)

  /** The committed value of `key` as RocksDB holds it, for threads that share the store (see the class
    * comment): the batch in progress is neither read nor told of the read, and nothing of this object
    * changes. Fails if a committed batch is still in flight (RocksDB may not hold it yet: [[awaitApplied]]
    * first) or never reached RocksDB.
    */
  def readCommitted(key: Array[Byte]): Array[Byte] = {
    requireSettled()
    db.get(readOptions, key)
  }

  /** The committed values of `keys` (null where absent), in their order, in one RocksDB `MultiGet`: one JNI
    * call for the lot instead of one per key, and RocksDB reads the keys of one block or file together. For
    * threads that share the store, as [[readCommitted]].
    */
  def readCommittedMany(keys: java.util.List[Array[Byte]]): java.util.List[Array[Byte]] = {
    requireSettled()
    if (keys.isEmpty) java.util.Collections.emptyList() else db.multiGetAsList(readOptions, keys)
  }

  /** Keys in [from, until) in bytewise order as RocksDB holds them (the batch in progress not overlaid), for
    * threads that share the store, as [[readCommitted]]; each iterator is its caller's alone.
    */
  def scanCommitted(from: Array[Byte], until: Array[Byte]): CloseableIterator[(Array[Byte], Array[Byte])] = {
    requireSettled()
    committedRange(from, until)
  }

  // what readCommitted and scanCommitted require, checked without waiting or settling anything
  private def requireSettled(): Unit = {
    if (inFlight != null)
      throw new IllegalStateException(
        s"the local RocksDB in $dir is still writing a committed batch: a read of committed state shared " +
          "between threads needs it written first (awaitApplied, by the store's owner)"
      )
    if (behind != null) throw new LocalApplyFailed(dir, behind)
  }

  private def committed(key: Array[Byte]): Array[Byte] = {
    committedLookups += 1
    val f = inFlight
    if (f == null) {
      if (behind != null) throw new LocalApplyFailed(dir, behind)
      db.get(readOptions, key)
    } else if (f.written.isDone) { settleInFlight(rethrow = true); db.get(readOptions, key) }
    else {
      val writes = f.writes // null once RocksDB holds them all
      if (writes == null) db.get(readOptions, key)
      else
        writes.lookup(key) match {
          case null =>
            // not in the batch, or in what it spilled, deleted once the write ended: if that write failed,
            // RocksDB lacks the batch (failure is recorded before the spill goes: see commitInBackground)
            if (f.written.isCompletedExceptionally) settleInFlight(rethrow = true)
            db.get(readOptions, key)
          // a change that appends to the value before it: that value is RocksDB's only until the write
          // lands, after which RocksDB holds the appended one; wait, rather than read it mid-way
          case entry if PendingWrites.needsCommitted(entry) =>
            settleInFlight(rethrow = true); db.get(readOptions, key)
          case entry => PendingWrites.resolve(entry, null)
        }
    }
  }

  /** Whether `key` has a committed value, without reading it: a list's value is as long as the list, and
    * every append checks existence (key counts), so reading the value made an append cost the list's length
    * (twice: a second append to a key in one batch re-read the committed list to fold the first into it).
    * RocksDB reads into a buffer of no bytes, answering only the value's length; a batch in flight answers
    * from its entry, which never depends on the committed value for existence.
    */
  private def committedExists(key: Array[Byte]): Boolean = {
    committedLookups += 1
    val f = inFlight
    if (f == null) {
      if (behind != null) throw new LocalApplyFailed(dir, behind)
      rocksDbHas(key)
    } else if (f.written.isDone) { settleInFlight(rethrow = true); rocksDbHas(key) }
    else {
      val writes = f.writes // null once RocksDB holds them all
      if (writes == null) rocksDbHas(key)
      else
        writes.lookup(key) match {
          case null =>
            if (f.written.isCompletedExceptionally) settleInFlight(rethrow = true) // as in committed()
            rocksDbHas(key)
          case entry => PendingWrites.existsAfter(entry)
        }
    }
  }

  private def rocksDbHas(key: Array[Byte]): Boolean =
    db.get(readOptions, key, LocalRocksDb.NoValueBytes) != RocksDB.NOT_FOUND

  /** `everyChange`: keep this change beside the key's earlier ones in this batch (see [[PendingWrites]]). */
  def put(key: Array[Byte], value: Array[Byte], everyChange: Boolean = false): Unit = {
    pending.put(key, value, everyChange)
  }

  def delete(key: Array[Byte], everyChange: Boolean = false): Unit = {
    pending.delete(key, everyChange)
  }

  /** Appends `elements` to the key's value ([[ListMerge]]). */
  def merge(key: Array[Byte], elements: Array[Byte]): Unit = {
    pending.merge(key, elements)
  }

  /** Keys in [from, until) in bytewise order, committed state overlaid with the batch in progress. The caller
    * may write to this store while iterating; writes behind the cursor are not seen.
    */
  def scan(from: Array[Byte], until: Array[Byte]): CloseableIterator[(Array[Byte], Array[Byte])] = {
    settleInFlight(rethrow = true)
    val base = committedRange(from, until)
    val batch = pending.range(from, until)
    new MergedIterator(base, batch, () => { batch.close(); base.close() })
  }

  // RocksDB's keys in [from, until): an iterator of its own, closed when exhausted, by the caller, or with
  // RocksDB
  private def committedRange(
      from: Array[Byte],
      until: Array[Byte]
  ): CloseableIterator[(Array[Byte], Array[Byte])] = {
    val it = db.newIterator(readOptions)
    openIterators.synchronized(openIterators += it)
    it.seek(from)
    new CloseableIterator[(Array[Byte], Array[Byte])] {
      override def hasNext: Boolean = {
        val more =
          it.isOwningHandle && it.isValid && (until == null || PendingWrites.Order.compare(
            it.key(),
            until
          ) < 0)
        if (!more) close()
        more
      }
      override def next(): (Array[Byte], Array[Byte]) = {
        val kv = (it.key(), it.value()); it.next(); kv
      }
      override def close(): Unit = closeIterator(it)
    }
  }

  /** Applies the batch in progress to RocksDB and clears it, waiting until it is written (a failed write
    * leaves RocksDB behind: [[LocalApplyFailed]] until a reload).
    */
  def commit(): Unit = {
    commitInBackground()
    settleInFlight(rethrow = true)
  }

  /** Commits like [[commit]], but leaves building and writing the write batch to a thread of the apply pool,
    * then `after` (on that thread, once written: a background flush, say). Returns at once; reads see the
    * batch from now on. A failed write fails whatever next waits for it ([[LocalApplyFailed]]): RocksDB then
    * lacks a committed batch, and only a reload from the blob store ([[closeForReplace]]) mends it. A failed
    * `after` fails only the returned future: the batch is in RocksDB.
    */
  def commitInBackground(after: () => Unit = () => ()): java.util.concurrent.CompletableFuture[Unit] = {
    settleInFlight(rethrow = true)
    val held = applyBacklog.acquire(current.sizeBytes)
    val writes = current
    current = newBatch()
    Option(writes.takeLog()).foreach(_.discard()) // a caller that wanted the batch's log took it before
    val f = new InFlight(writes, new java.util.concurrent.CompletableFuture[Unit])
    inFlight = f
    val afterDone = new java.util.concurrent.CompletableFuture[Unit]
    val apply: Runnable = { () =>
      // `written` completes only once `after` has run: whatever waits for the batch (the next commit) also
      // waits for what `after` does with it (a checkpoint of exactly this batch's state, say)
      try {
        writeBatch(writes)
        // what the batch spilled is in RocksDB now: deleted before the batch counts as written, so nothing
        // the next use of the store does (a reopen deletes the spill directory) meets it half-deleted
        writes.releaseSpill()
        adaptWithinInterval()
        // RocksDB holds the batch: reads need it no more, and its memory is free before the store's next use
        f.writes = null
        try { after(); afterDone.complete(()) }
        catch { case t: Throwable => afterDone.completeExceptionally(t) }
        f.written.complete(())
      } catch {
        case t: Throwable =>
          afterDone.completeExceptionally(t)
          // failed first, then the spill deleted: a read of the batch in flight that finds the spill gone
          // sees the failure (committed()) and never reads a RocksDB that lacks the batch
          f.written.completeExceptionally(t)
          writes.releaseSpill()
      } finally {
        f.writes = null
        applyBacklog.release(held)
      }
    }
    try applyPool.execute(apply)
    catch {
      case t: Throwable => // never started (a pool shut down): nothing holds the backlog's bytes
        applyBacklog.release(held)
        writes.releaseSpill()
        f.written.completeExceptionally(t)
        throw t
    }
    afterDone
  }

  /** Commits like [[commitInBackground]], then freezes the committed state into `target` as [[checkpointTo]]
    * does, on the same apply thread and before any later batch reaches RocksDB. The future completes once the
    * checkpoint is complete in `target`, and fails if the write or the checkpoint failed (only a failed write
    * leaves RocksDB behind the commit).
    */
  def commitAndCheckpointInBackground(target: File): java.util.concurrent.CompletableFuture[Unit] =
    commitInBackground(() => checkpointWritten(target))

  /** Waits until the in-flight batch, if any, is in RocksDB. */
  def awaitApplied(): Unit = settleInFlight(rethrow = true)

  /** Why a committed batch never reached RocksDB, if one did not (waiting for the in-flight one first): until
    * [[closeForReplace]], the local state is behind the commit and every use fails.
    */
  def applyFailed(): Option[Throwable] = { settleInFlight(rethrow = false); Option(behind) }

  // uninterruptibly: forgetting a batch still being written would let the next use close RocksDB under it,
  // or read a RocksDB that lacks it without knowing (Uninterruptibly)
  private def settleInFlight(rethrow: Boolean): Unit = {
    val f = inFlight
    if (f != null) {
      try Uninterruptibly.get(f.written)
      catch { case e: java.util.concurrent.ExecutionException => behind = e.getCause }
      finally inFlight = null
    }
    if (rethrow && behind != null) throw new LocalApplyFailed(dir, behind)
  }

  /** Writes a committed batch into RocksDB, in chunks ([[ChunkedWriteBatch]]). */
  private def writeBatch(writes: PendingWrites): Unit = {
    val records = chunked()
    writes.writeInto(records)(k => db.get(readOptions, k))
    records.finish()
  }

  /** Writes what `fill` stages straight into RocksDB, in chunks (replaying a verified delta). */
  def applyCommitted(fill: ChunkedWriteBatch => Unit): Unit = {
    settleInFlight(rethrow = true)
    pending.forgetReads()
    val records = chunked()
    fill(records)
    records.finish()
    adaptWithinInterval()
  }

  // RocksDB switches to a new memtable between chunks once one is full, so a chunk is at most a quarter of a
  // memtable; and at most 512 KiB: each chunk's serialized form is copied once more to be handed over, and
  // arrays past half a G1 region (1 MiB in a 4 GiB heap) are humongous objects (with 16 MiB chunks, the
  // commits of a million rows per batch made GC ten times Spark's provider's, docs/benchmarks.md)
  private def chunked() =
    new ChunkedWriteBatch(math.max(1L << 16, math.min(tuning.writeBufferBytes / 4, 1L << 19)).toInt, write)

  private def write(records: SerializedWriteBatch): Unit = if (!records.isEmpty) {
    val batch = records.toWriteBatch
    try db.write(writeOptions, batch)
    finally batch.close()
  }

  def abort(): Unit = pending.clear()

  /** A writer of sorted SST files for this RocksDB, in this RocksDB's own table format and compression,
    * buffering and spilling its runs under `scratch` (see [[SortedRunWriter]]); its files go in by
    * [[ingest]].
    */
  def sortedRunWriter(
      scratch: File,
      bufferBytes: Long = SortedRunWriter.DefaultBufferBytes
  ): SortedRunWriter = new SortedRunWriter(scratch, options, bufferBytes)

  /** Moves `files` (sorted, non-overlapping SSTs written with this RocksDB's options: [[sortedRunWriter]])
    * into this RocksDB, which must hold nothing yet and have no batch in progress or in flight: they become
    * its whole committed state, in the bottom level with sequence number 0. Global sequence numbers are
    * refused, so a file RocksDB would have to renumber (this RocksDB not empty, files overlapping) fails the
    * ingestion instead of being rewritten behind the caller's back.
    */
  def ingest(files: Seq[File]): Unit = {
    settleInFlight(rethrow = true)
    if (!pending.isEmpty)
      throw new IllegalStateException(s"ingest into $dir with a batch in progress: commit or abort it first")
    val it = db.newIterator(readOptions)
    val empty =
      try { it.seekToFirst(); !it.isValid }
      finally it.close()
    if (!empty)
      throw new IllegalStateException(
        s"ingest into $dir, which already holds state: ingested files are a fresh start's whole state"
      )
    if (files.nonEmpty) {
      val ingest = new IngestExternalFileOptions()
        .setMoveFiles(true)
        .setAllowGlobalSeqNo(false)
        .setAllowBlockingFlush(false)
        .setSnapshotConsistency(false)
      try db.ingestExternalFile(files.map(_.getAbsolutePath).asJava, ingest)
      finally ingest.close()
    }
  }

  /** Freezes the current committed state into `target` as a RocksDB checkpoint (hard links to the immutable
    * SST files plus copies of the small files), waiting for the batch in flight first. A commit's own freeze
    * runs on the apply thread instead ([[commitAndCheckpointInBackground]]).
    */
  def checkpointTo(target: File): Unit = {
    settleInFlight(rethrow = true)
    checkpointWritten(target)
  }

  // the checkpoint of what RocksDB holds, on whichever thread wrote the last batch (no batch is in flight
  // but, on an apply thread, the one it just wrote)
  private def checkpointWritten(target: File): Unit = {
    flushWritten() // the WAL is off: a checkpoint holds only what is in SST files
    val cp = Checkpoint.create(db)
    try cp.createCheckpoint(target.getAbsolutePath)
    finally cp.close()
    adaptCompaction(statistics.getAndResetTickerCount(TickerType.FLUSH_WRITE_BYTES))
    flushedAtLastLook = 0L
  }

  private def adaptCompaction(flushedBytes: Long): Unit = {
    // RocksDB's estimate of the store's size: the largest set of SSTs whose key ranges do not overlap, so
    // each key counted about once however many L0 copies hold it
    val storeBytes = db.getLongProperty("rocksdb.estimate-live-data-size")
    val levels = levelSizes
    setCompaction(triggerAfter(flushedBytes, storeBytes, levels.getOrElse(0, 0L)), storeBytes)
    storeAtIntervalStart = storeBytes
    liveAtIntervalStart = levels.values.sum
  }

  // the trigger for an interval that has flushed `flushedBytes` so far into a store of `storeBytes`, with
  // `l0Bytes` in L0 at its freeze (0 before)
  private def triggerAfter(flushedBytes: Long, storeBytes: Long, l0Bytes: Long = 0L): Int = {
    lastInterval = IntervalShape(flushedBytes, storeBytes, storeAtIntervalStart, l0Bytes)
    CompactionTrigger.forInterval(lastInterval, l0Trigger, tuning.levelBaseBytes)
  }

  /** What the trigger was last chosen from (tests). */
  private[engine] var lastInterval = IntervalShape(0L, 0L, 0L)

  // The interval's flushes so far already hold several copies of the store (the one rule that can say so
  // before the freeze: [[CompactionTrigger.forInterval]]): compact as for many copies now, not at the
  // freeze, so the snapshot ending this interval (the first after every open, hence every scheduled run's)
  // uploads what that shape leaves. Only upward: fewer copies is known only once the interval is over. The
  // store's size is its largest level below L0 (each a sorted run a compaction made: one copy of the keys it
  // holds, and the last level holds most of them), never the L0 files alone: flushes of keys in random order
  // overlap, and before any compaction RocksDB's estimate counts one L0 file (a load batch of one copy would
  // look like four). And the flushes count as copies only where they rewrote keys, not where the live files
  // grew by them ([[CompactionTrigger.rewroteManyCopies]]): a load whose compactions lag behind its flushes
  // has a small sorted level beside many L0 files.
  private def adaptWithinInterval(): Unit = if (l0Trigger != CompactionTrigger.ManyCopies) {
    val flushedBytes = statistics.getTickerCount(TickerType.FLUSH_WRITE_BYTES)
    if (flushedBytes > flushedAtLastLook) {
      flushedAtLastLook = flushedBytes
      def manyCopies(storeBytes: Long) =
        triggerAfter(flushedBytes, storeBytes) == CompactionTrigger.ManyCopies
      val estimate = db.getLongProperty("rocksdb.estimate-live-data-size")
      if (manyCopies(estimate)) { // cheap first: the levels' sizes only once the estimate says so
        val levels = levelSizes
        val sorted = levels.collect { case (level, bytes) if level > 0 => bytes }.maxOption
        val storeBytes = math.max(estimate, sorted.getOrElse(0L))
        if (
          sorted.exists(_ > 0) && manyCopies(storeBytes) &&
          CompactionTrigger.rewroteManyCopies(
            flushedBytes,
            storeBytes,
            levels.values.sum,
            liveAtIntervalStart
          )
        ) setCompaction(CompactionTrigger.ManyCopies, storeBytes)
      }
    }
  }

  private def setCompaction(wanted: Int, storeBytes: Long): Unit = {
    val base = CompactionTrigger.levelBaseBytes(wanted, storeBytes, tuning.levelBaseBytes)
    if (wanted != l0Trigger || base != levelBase) {
      db.setOptions(
        MutableColumnFamilyOptions
          .builder()
          .setLevel0FileNumCompactionTrigger(wanted)
          .setMaxBytesForLevelBase(base)
          .build()
      )
      l0Trigger = wanted
      levelBase = base
    }
  }

  /** Compacts the committed state into one sorted level when [[ReadCompaction.due]] says a store that is only
    * read gains by it (memtables flushed first, the compaction waited for); returns whether it ran. Only for
    * a store no batch is written to: the caller holds it alone.
    */
  def compactForReads(): Boolean = {
    settleInFlight(rethrow = true)
    val levels = db.getColumnFamilyMetaData.levels.asScala
    def entries(level: LevelMetaData) = level.files().asScala.map(_.numEntries()).sum
    val memtables =
      db.getLongProperty("rocksdb.num-entries-active-mem-table") +
        db.getLongProperty("rocksdb.num-entries-imm-mem-tables")
    val unsorted = memtables + levels.filter(_.level() == 0).map(entries).sum
    val sorted = levels.filter(_.level() > 0).map(entries).sum
    val due = ReadCompaction.due(unsorted, sorted)
    if (due) {
      flushWritten()
      val options = new CompactRangeOptions()
        .setBottommostLevelCompaction(CompactRangeOptions.BottommostLevelCompaction.kForceOptimized)
      try db.compactRange(db.getDefaultColumnFamily, null, null, options)
      finally options.close()
    }
    due
  }

  /** Bytes of SST files per level now, levels with none left out. */
  private[engine] def levelSizes: Map[Int, Long] =
    db.getColumnFamilyMetaData.levels.asScala.filter(_.size() > 0).map(l => l.level() -> l.size()).toMap

  /** The number of SST files in L0 now (tests). */
  private[engine] def l0Files: Int =
    db.getColumnFamilyMetaData.levels.asScala.find(_.level() == 0).fold(0)(_.files().size())

  /** Whether RocksDB has a compaction running or due (tests wait for none). */
  private[engine] def compacting: Boolean =
    db.getLongProperty("rocksdb.num-running-compactions") > 0 || db.getLongProperty(
      "rocksdb.compaction-pending"
    ) > 0

  /** RocksDB's L0 compaction trigger now (tests). */
  private[engine] def l0CompactionTrigger: Int = db.getOptions().level0FileNumCompactionTrigger()

  /** Writes every memtable to SST files (the WAL is off: unflushed committed data lives only in memory). */
  def flush(): Unit = {
    settleInFlight(rethrow = true)
    flushWritten()
  }

  private def flushWritten(): Unit = {
    val flush = new FlushOptions().setWaitForFlush(true)
    try db.flush(flush)
    finally flush.close()
  }

  /** Live SST files and their sizes. */
  def liveSstSizes: Map[String, Long] =
    db.getLiveFilesMetaData.asScala.map(m => m.fileName().stripPrefix("/") -> m.size()).toMap

  /** Each live SST file's table properties (its compression, entries, sizes), by file name (tests). */
  private[lineagestore] def sstTableProperties: Map[String, TableProperties] =
    db.getPropertiesOfAllTables.asScala.map { case (f, p) => new File(f).getName -> p }.toMap

  /** Names of the files of the live database (for metrics and tests). */
  def liveFileNames: Seq[String] = db.getLiveFilesMetaData.asScala.map(_.fileName().stripPrefix("/")).toSeq

  /** Bytes of the last committed batch while an apply thread still holds it (0 once RocksDB does). */
  def inFlightBytes: Long = Option(inFlight).flatMap(f => Option(f.writes)).map(_.sizeBytes).getOrElse(0L)

  def approximateMemoryBytes: Long =
    scala.util.Try(db.getLongProperty("rocksdb.cur-size-all-mem-tables")).getOrElse(0L) + pending.sizeBytes +
      inFlightBytes

  private def closeIterator(it: RocksIterator): Unit = openIterators.synchronized {
    if (openIterators.remove(it)) it.close()
  }

  private def closeIterators(): Unit = openIterators.synchronized {
    openIterators.foreach(_.close())
    openIterators.clear()
  }

  override def close(): Unit = {
    closeForReplace()
    LocalFiles.deleteRecursively(spillRoot)
    writeOptions.close(); readOptions.close(); options.close(); bloom.close(); statistics.close()
  }
}

object LocalRocksDb {

  /** The buffer an existence check reads a value into: none of its bytes are copied, only its length told. */
  private val NoValueBytes = new Array[Byte](0)
}

package io.lineagestore.engine

import java.util.{Arrays, Comparator}
import java.util.concurrent.ConcurrentSkipListMap

/** Thrown when one batch's uncommitted writes exceed the configured bound. */
class PendingWritesLimitException(message: String, cause: Throwable = null)
    extends IllegalStateException(message, cause)

/** The writes of the batch in progress, kept out of RocksDB until commit, so abort (and a failed or duplicate
  * task) costs nothing and leaves no trace in the committed state.
  *
  * A key's entry is its net change (the last put, or a delete), except for keys written with `everyChange`
  * and keys merged into: their entry keeps every change in order, as Spark's change feed reports each for a
  * multi-valued key (list state). Only changes the feed cannot tell apart are folded: a merge following a put
  * or a merge joins it (a put's and a merge's values are reported element by element anyway).
  *
  * Two views of the same entries. Point reads and writes use a hash table ([[KeyTable]]): Spark's operators
  * read every key they write (and the store checks existence on write), so a batch does several lookups per
  * key, and a skip list's pointer chase per lookup was the largest cost of a batch at a million keys
  * (docs/benchmarks.md, the scale profile). Key order, needed to merge with a RocksDB iterator (ordered like
  * RocksDB's bytewise comparator) and to write a delta, is built only when asked for: the first [[range]] of
  * a batch creates a concurrent skip list of the entries, kept in step with every later write of the batch
  * (concurrent because Spark's operators remove keys while iterating, as in watermark eviction: its iterators
  * are weakly consistent and never throw on modification); a batch that never scans sorts its keys once, at
  * commit.
  *
  * Confined to the thread of the task using the store (Spark's contract: one task per store at a time);
  * [[sizeBytes]] alone may be read from another thread (metrics), and may then be a batch behind. Threads
  * that share a store's reads (an adjunct table's replica, read by an executor's tasks at once) never reach
  * it: they read RocksDB only ([[LocalRocksDb.readCommitted]]), since a read here is remembered
  * ([[noteRead]]), a write to this table. Once a batch is committed and handed to the apply thread, it and
  * the task thread both only read it.
  *
  * A key's first value in the batch is copied into the batch's [[ValueArena]] (the table keeps its position),
  * so the values of a large batch are a few region-sized arrays the garbage collector never copies; later
  * values of the same key, and values written once a scan has ordered the batch, stay arrays of their own.
  * Entries handed out ([[lookup]], [[find]], [[range]], [[foreachEntry]]) hold copies.
  *
  * Memory is bounded by `limitBytes` of keys and values (a value replaced in the arena stays counted: the
  * arena keeps its bytes until the batch ends). Past it, the batch spills to local disk when `openSpill` is
  * given: its entries (a key's last value, its delete, or the changes it keeps one by one, encoded) are
  * sorted and written as one run into the batch's [[SpilledEntries]] (opened at the first spill), and the
  * table, the arena and the remembered reads start afresh. Every view then looks in the table first and in
  * the runs after it, the newest first: a table entry shadows a spilled one of the same key (a key changed
  * again after it spilled starts from its spilled entry), and a key written after it spilled is a rewrite,
  * not a first change (the log is discarded). Without `openSpill`, a write past the bound fails with an error
  * naming `limitKey`.
  *
  * `openLog` opens a [[BatchLog]] at a batch's first change (null: none); it sees every change while each is
  * its key's first, and is discarded at the first that is not ([[takeLog]] hands over a complete one).
  *
  * The same map remembers, for keys the batch read but has not written, whether each has a committed value
  * ([[noteRead]], [[find]]): a write's existence check (key counts) then needs no lookup of its own. Spark's
  * streaming aggregation reads every group's state (StateStoreRestoreExec) before it writes any
  * (StateStoreSaveExec, after a hash aggregation), so the memory must span the batch; keeping it in the entry
  * the write then replaces holds one slot per key where a map of reads beside the writes held two entries,
  * all live through the batch's young collections (GC at a million rows per batch, docs/benchmarks.md). A
  * read's answer is committed existence, which nothing changes within a batch; whatever changes the committed
  * state forgets it ([[forgetReads]], or the batch ends). Reads not yet written are remembered within a
  * budget of memory, [[ReadBudgetShare]] of `limitBytes` (later ones are not, and their writes look up; a
  * read the batch then writes is a write, counted in [[sizeBytes]], and leaves the budget). Reads are
  * invisible to every other method: not entries, not counted in [[size]] or [[sizeBytes]], not in the delta
  * or the batch applied.
  */
final class PendingWrites(
    limitBytes: Long,
    limitKey: String,
    openLog: () => BatchLog = BatchLog.None,
    openSpill: () => SpilledEntries = null
) {
  import PendingWrites._

  // values: Array[Byte] (the key's new value), InArena (the key's new value, in `arena` at the slot's
  // number), Tombstone (deleted), a ChangeList (every change, in order), or a Read (not written: whether the key
  // has a committed value)
  private var byKey = new KeyTable
  private var arena = new ValueArena
  private var written = 0 // entries of byKey that are writes
  private var reads = 0 // entries of byKey that are Reads
  private var readBytes = 0L // their keys' memory, as accounted for writes
  private val readBudgetBytes = limitBytes / ReadBudgetShare
  private var ordered: ConcurrentSkipListMap[Array[Byte], AnyRef] = null // null until a range() of this batch
  private var bytes = 0L
  private var merged = false
  // the batch's log: null until its first change, or once it was discarded or handed over (logEnded)
  private var log: BatchLog = null
  private var logEnded = false
  private var refused = false
  // the batch's entries moved to disk (null: none yet); closed by clear() or, once the batch is applied, by
  // releaseSpill() on the apply thread
  private var spilled: SpilledEntries = null

  def put(key: Array[Byte], value: Array[Byte], everyChange: Boolean = false): Unit =
    if (everyChange) recordChange(key, Change.Put(value)) else record(key, value)

  def delete(key: Array[Byte], everyChange: Boolean = false): Unit =
    if (everyChange) recordChange(key, Change.Delete) else record(key, Tombstone)

  /** Appends `elements` to the key's value (see [[ListMerge]]); always kept as a change of its own. */
  def merge(key: Array[Byte], elements: Array[Byte]): Unit = {
    merged = true
    recordChange(key, Change.Merge(elements))
  }

  /** The pending entry of `key` (null: not written by this batch); read it with [[PendingWrites.resolve]]. */
  def lookup(key: Array[Byte]): Entry = entryOf(key) match {
    case _: Read => null
    case e       => e
  }

  /** What this batch knows of `key`, in one lookup: its pending entry, a remembered read
    * ([[PendingWrites.isRead]]) or null (nothing).
    */
  def find(key: Array[Byte]): AnyRef = entryOf(key)

  // the key's entry, an arena value copied out (null: nothing)
  private def entryOf(key: Array[Byte]): AnyRef = {
    val slot = byKey.slot(key)
    if (slot < 0) { if (spilled == null) null else decode(spilled.get(key)) }
    else {
      val e = byKey.entryAt(slot)
      if (e eq InArena) arena.copyOf(byKey.numberAt(slot)) else e
    }
  }

  /** Remembers that `key` (not written by this batch, and not modified by the caller afterwards) has a
    * committed value, or not: see the class comment.
    */
  def noteRead(key: Array[Byte], exists: Boolean): Unit =
    if (
      readBytes + key.length + EntryOverhead <= readBudgetBytes &&
      byKey.putIfAbsent(key, if (exists) ReadPresent else ReadAbsent) == null
    ) {
      reads += 1
      readBytes += key.length + EntryOverhead
    }

  /** Forgets every remembered read (the committed state changed under the batch). */
  def forgetReads(): Unit =
    if (reads > 0) {
      byKey = if (written == 0) new KeyTable else byKey.filtered(!_.isInstanceOf[Read])
      reads = 0
      readBytes = 0L
    }

  /** Whether this batch merged into any key (its delta then holds merge records). */
  def hasMerges: Boolean = merged

  def isEmpty: Boolean = written == 0 && spilledRuns == 0

  /** Entries of the batch (a key both in memory and spilled, or spilled twice, counts more than once). */
  def size: Long = written + (if (spilled == null) 0L else spilled.entryCount)

  /** Bytes of the batch held in memory (not what it spilled). */
  def sizeBytes: Long = bytes

  /** Runs the batch spilled to disk. */
  def spilledRuns: Int = if (spilled == null) 0 else spilled.runCount

  /** Bytes of the runs the batch spilled. */
  def spilledBytes: Long = if (spilled == null) 0L else spilled.bytesOnDisk

  /** Entries with keys in [from, until) (until null = unbounded), in key order; writes made while iterating
    * may or may not be seen (never an error).
    */
  def range(from: Array[Byte], until: Array[Byte]): CloseableIterator[(Array[Byte], Entry)] = {
    val inMemory = tableRange(from, until)
    if (spilled == null) CloseableIterator.of(inMemory)
    else {
      val runs = spilled.range(from, until)
      CloseableIterator.of(Shadowing(inMemory, runs.map { case (k, raw) => (k, decode(raw)) }), runs.close())
    }
  }

  // the table's entries in [from, until), in key order
  private def tableRange(from: Array[Byte], until: Array[Byte]): Iterator[(Array[Byte], Entry)] = {
    import scala.jdk.CollectionConverters._
    // nothing pending: no order to build (a load's registry scan would otherwise build an empty skip list
    // that every write of the batch then keeps up to date for nothing)
    if (ordered == null && written == 0) return Iterator.empty
    if (ordered == null) {
      ordered = new ConcurrentSkipListMap[Array[Byte], AnyRef](Order)
      foreachTableEntry((k, v) => ordered.put(k, v))
    }
    val sub = if (until == null) ordered.tailMap(from, true) else ordered.subMap(from, true, until, false)
    sub.entrySet().iterator().asScala.map(e => (e.getKey, e.getValue))
  }

  /** Every entry once, in no particular order (applying the batch needs no order). */
  def foreachEntry(f: (Array[Byte], Entry) => Unit): Unit = {
    foreachSpilled((k, raw) => f(k, decode(raw)))
    foreachTableEntry(f)
  }

  private def foreachTableEntry(f: (Array[Byte], Entry) => Unit): Unit =
    byKey.foreachSlot { (k, v, n) =>
      if (v eq InArena) f(k, arena.copyOf(n)) else if (!v.isInstanceOf[Read]) f(k, v)
    }

  // the spilled entries no table entry shadows, in key order, tagged
  private def foreachSpilled(f: (Array[Byte], Array[Byte]) => Unit): Unit =
    if (spilled != null) spilled.foreach((k, raw) => if (byKey.slot(k) < 0) f(k, raw))

  /** Stages every write of the batch into `records`, each key's value after the batch (`committed` gives a
    * key's committed value where that depends on it); arena values are copied straight from the arena, and
    * spilled ones as they are read back, before the table's (whose entries shadow them: skipped).
    */
  def writeInto(records: ChunkedWriteBatch)(committed: Array[Byte] => Array[Byte]): Unit = {
    // each key once: a spilled change list that appends to the committed value reads it before any write of
    // this batch reaches it
    foreachSpilled { (k, raw) =>
      raw(0) match {
        case SpilledEntries.DeletedTag => records.delete(k)
        case SpilledEntries.ValueTag   => records.put(k, raw, 1, raw.length - 1)
        case _                         =>
          val value = resolve(decode(raw), committed(k))
          if (value == null) records.delete(k) else records.put(k, value)
      }
    }
    byKey.foreachSlot { (k, v, n) =>
      if (v eq InArena) records.put(k, arena.chunkOf(n), arena.offsetOf(n), arena.lengthOf(n))
      else if (!v.isInstanceOf[Read]) {
        val value = resolve(v, committed(k))
        if (value == null) records.delete(k) else records.put(k, value)
      }
    }
  }

  /** Every change of the batch, a key's changes adjacent and in order of happening; keys in ascending order
    * when `inKeyOrder` (a delta with merge records needs it), else in no particular order (sorting a hundred
    * thousand keys scattered over the heap cost more than the rest of a commit).
    */
  def foreachChange(inKeyOrder: Boolean)(f: (Array[Byte], Change) => Unit): Unit = {
    def changesOf(k: Array[Byte], e: AnyRef): Unit = e match {
      case c: ChangeList       => c.list.foreach(f(k, _))
      case t if t eq Tombstone => f(k, Change.Delete)
      case v: Array[Byte]      => f(k, Change.Put(v))
      case other               => throw new IllegalStateException(s"pending entry $other")
    }
    if (!inKeyOrder) foreachEntry(changesOf)
    else if (spilled == null) sortedEntries.foreach { case (k, e) => changesOf(k, e) }
    else {
      val runs = spilled.range(Array.emptyByteArray, null)
      try
        Shadowing(sortedEntries, runs.map { case (k, raw) => (k, decode(raw)) }).foreach { case (k, e) =>
          changesOf(k, e)
        }
      finally runs.close()
    }
  }

  /** The entries in key order: the skip list when a scan built one, else the keys sorted once. */
  private def sortedEntries: Iterator[(Array[Byte], Entry)] =
    if (ordered != null) tableRange(Array.emptyByteArray, null)
    else {
      val keys = new Array[Array[Byte]](written)
      var i = 0
      byKey.foreachSlot((k, v, _) => if (!v.isInstanceOf[Read]) { keys(i) = k; i += 1 }) // no value copied
      Arrays.sort(keys, Order)
      keys.iterator.map(k => (k, entryOf(k)))
    }

  /** Closes the batch's spilled runs (the batch is in RocksDB, or never will be): a later lookup finds
    * nothing there. Safe from the apply thread while the task thread looks keys up in the batch in flight.
    */
  def releaseSpill(): Unit = if (spilled != null) spilled.close()

  /** The batch's log if it saw every change of the batch, each its key's first (null otherwise), handed over:
    * the caller writes or discards it, and this batch feeds it no more.
    */
  def takeLog(): BatchLog = { val l = log; log = null; logEnded = true; l }

  /** Whether this batch's log was discarded at a change it could not take. */
  def logRefused: Boolean = refused

  /** Forgets the batch. A new map rather than a cleared one: a cleared map keeps its largest table, and
    * iterating it costs its capacity, so one big batch (the first, loading the state) would slow every later
    * commit.
    */
  def clear(): Unit = {
    byKey = new KeyTable
    arena = new ValueArena
    written = 0
    reads = 0
    readBytes = 0L
    ordered = null
    bytes = 0L
    merged = false
    endLog()
    logEnded = false
    refused = false
    releaseSpill()
    spilled = null
  }

  /** Stores `entry` (and `number`) as the key's, returning the key's previous entry (null: none; a read is
    * none).
    */
  private def store(key: Array[Byte], entry: AnyRef, number: Long = 0L): AnyRef = {
    val previous = byKey.put(key, entry, number)
    if (ordered != null) ordered.put(key, entry) // never InArena: the arena takes no value once ordered
    previous match {
      case null    => written += 1; null
      case _: Read => written += 1; reads -= 1; readBytes -= key.length + EntryOverhead; null
      case e       => e
    }
  }

  private def record(key: Array[Byte], value: Array[Byte]): Unit = {
    val arenaFits = (value ne Tombstone) && ordered == null && value.length <= ValueArena.MaxValueBytes
    val looked = arenaFits || (spilled != null && !logEnded)
    val slot = if (looked) byKey.slot(key) else -1
    // a key the batch spilled is rewritten: its log would hold two changes of it. Only a key the table lacks
    // can be in a run: a remembered read was taken after the key was not found there, and a spill starts the
    // table afresh, reads included
    val rewritesSpilled = looked && slot < 0 && !logEnded && spilled != null && spilled.get(key) != null
    // the batch has not written the key (a remembered read is no write)
    val first = looked && (slot < 0 || byKey.entryAt(slot).isInstanceOf[Read])
    val previous = if (arenaFits && first) store(key, InArena, arena.add(value)) else store(key, value)
    account(key, previous, value.length)
    if (!logEnded) {
      if (previous != null || rewritesSpilled) refuseLog()
      else {
        if (log == null) {
          log = openLog()
          if (log == null) { logEnded = true; return }
        }
        if (value eq Tombstone) log.delete(key) else log.put(key, value)
      }
    }
  }

  /** Discards the batch's log (if open): the batch is forgotten. */
  private def endLog(): Unit = {
    if (log != null) log.discard()
    log = null
    logEnded = true
  }

  /** A change the log cannot take: discarded, and the batch's delta is written from its entries. */
  private def refuseLog(): Unit = if (!logEnded) { endLog(); refused = true }

  private def recordChange(key: Array[Byte], change: Change): Unit = {
    val before: Vector[Change] = lookup(key) match {
      case null                => Vector.empty
      case c: ChangeList       => c.list
      case t if t eq Tombstone => Vector(Change.Delete)
      case v: Array[Byte]      => Vector(Change.Put(v))
      case other               => throw new IllegalStateException(s"pending entry $other")
    }
    val after = (before.lastOption, change) match {
      case (Some(Change.Put(v)), Change.Merge(e))   => before.init :+ Change.Put(ListMerge(v, e))
      case (Some(Change.Merge(m)), Change.Merge(e)) => before.init :+ Change.Merge(ListMerge(m, e))
      case _                                        => before :+ change
    }
    val entry = new ChangeList(after)
    val previous = store(key, entry)
    refuseLog()
    account(key, previous, entry.valueBytes)
  }

  private def account(key: Array[Byte], previous: AnyRef, newBytes: Long): Unit = {
    bytes += newBytes + (if (previous == null) key.length + EntryOverhead else -entryBytes(previous))
    if (bytes > limitBytes) {
      if (openSpill != null) spill()
      else
        throw new PendingWritesLimitException(
          s"this batch's uncommitted state changes reached $bytes bytes, over the limit of $limitBytes bytes " +
            s"set by $limitKey (the changes of one batch of one partition are held in memory until commit). " +
            s"Raise $limitKey, with executor heap for it, or use more shuffle partitions so each partition " +
            "changes less per batch."
        )
    }
  }

  /** Moves the table's entries (not its remembered reads) to a new run of [[spilled]], in key order, and
    * starts the table, the arena, the reads and the key order afresh. A scan open meanwhile keeps the key
    * order it was reading (entries it has not reached may then be older than the batch's latest writes, which
    * a scan may or may not see).
    */
  private def spill(): Unit = {
    val keys = new Array[Array[Byte]](written)
    var n = 0
    byKey.foreachSlot((k, v, _) => if (!v.isInstanceOf[Read]) { keys(n) = k; n += 1 })
    if (n > 0) {
      val sorted = Arrays.copyOf(keys, n)
      Arrays.sort(sorted, Order)
      try {
        if (spilled == null) spilled = openSpill()
        spilled.writeRun(n) { run =>
          sorted.foreach { k =>
            val slot = byKey.slot(k)
            byKey.entryAt(slot) match {
              case e if e eq InArena =>
                val at = byKey.numberAt(slot)
                run.put(k, arena.chunkOf(at), arena.offsetOf(at), arena.lengthOf(at))
              case t if t eq Tombstone => run.delete(k)
              case v: Array[Byte]      => run.put(k, v, 0, v.length)
              case c: ChangeList       => run.changes(k, c.encoded)
              case other               => throw new IllegalStateException(s"pending entry $other")
            }
          }
        }
      } catch {
        case scala.util.control.NonFatal(e) =>
          val where = Option(spilled).map(_.dir.toString).getOrElse("the store's local directory")
          throw new PendingWritesLimitException(
            s"this batch's uncommitted state changes passed $limitBytes bytes in memory ($limitKey) and " +
              s"could not spill to local disk under $where: ${e.getMessage}. Free local disk there (the " +
              s"localDir setting chooses it), or raise $limitKey, with executor heap for it. Nothing " +
              "committed changed.",
            e
          )
      }
      byKey = new KeyTable
      arena = new ValueArena
      ordered = null
      written = 0
      reads = 0
      readBytes = 0L
      bytes = 0L
    }
  }
}

object PendingWrites {
  val Order: Comparator[Array[Byte]] = (a: Array[Byte], b: Array[Byte]) => Arrays.compareUnsigned(a, b)

  /** A key's pending entry: opaque outside this file except through [[resolve]] and [[needsCommitted]]. */
  type Entry = AnyRef

  private val Tombstone = new Array[Byte](0) // compared by reference: an empty value stays a value
  private val InArena = new Object // a value in the batch's arena, at its slot's number

  private val EntryOverhead = 64 // skip-list node and array headers, roughly

  /** The share of a batch's bound on writes that its remembered reads may take (reads not yet written): an
    * eighth, 128 MiB at the default bound (a million keys of about 60 bytes). Streaming aggregation reads
    * every updated key before writing it, so a bound below a batch's keys (it was 200,000 reads) made the
    * writes past it look each key up a second time (a million rows per batch over 4 stores,
    * docs/benchmarks.md).
    */
  val ReadBudgetShare = 8

  /** A key the batch read and has not written, and whether it has a committed value. */
  private final class Read(val exists: Boolean)
  private val ReadPresent = new Read(true)
  private val ReadAbsent = new Read(false)

  /** Whether what [[find]] returned is a remembered read (not null, not a pending entry). */
  def isRead(found: AnyRef): Boolean = found.isInstanceOf[Read]

  /** For a remembered read ([[isRead]]): whether the key has a committed value. */
  def readExists(read: AnyRef): Boolean = read.asInstanceOf[Read].exists

  // bytes a replaced entry gave back (an arena value gives back none: its bytes stay in the arena)
  private def entryBytes(e: AnyRef): Long = e match {
    case c: ChangeList  => c.valueBytes
    case v: Array[Byte] => v.length.toLong
    case _              => 0L
  }

  // a spilled entry as the table holds it (null: not spilled)
  private def decode(raw: Array[Byte]): AnyRef =
    if (raw == null) null
    else
      raw(0) match {
        case SpilledEntries.DeletedTag => Tombstone
        case SpilledEntries.ValueTag   => Arrays.copyOfRange(raw, 1, raw.length)
        case _                         => ChangeList.decode(raw, 1)
      }

  /** Whether the value after `entry` depends on the committed value (it starts with a merge). */
  def needsCommitted(entry: Entry): Boolean = entry match {
    case c: ChangeList => c.list.head.isInstanceOf[Change.Merge]
    case _             => false
  }

  /** Whether the key has a value after `entry`, whatever its committed value: only a delete as its last
    * change leaves none (an append to no value leaves the appended elements). Existence checks (key counts)
    * then never read a list's committed value.
    */
  def existsAfter(entry: Entry): Boolean = entry match {
    case c: ChangeList       => c.list.last != Change.Delete
    case t if t eq Tombstone => false
    case _: Array[Byte]      => true
    case other               => throw new IllegalStateException(s"pending entry $other")
  }

  /** The key's value after the batch (null: deleted), given its committed value (read only if needed). */
  def resolve(entry: Entry, committed: => Array[Byte]): Array[Byte] = entry match {
    case c: ChangeList       => ListMerge.applyAll(if (needsCommitted(c)) committed else null, c.list)
    case t if t eq Tombstone => null
    case v: Array[Byte]      => v
    case other               => throw new IllegalStateException(s"pending entry $other")
  }
}

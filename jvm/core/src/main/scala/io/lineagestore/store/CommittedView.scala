package io.lineagestore.store

import io.lineagestore.engine.{CloseableIterator, LocalRocksDb}
import io.lineagestore.format.FamilyKeys
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.store.LineageStoreState.LocalState

/** A read-only view of the checkpoint a [[LineageStore]] holds, for readers that share the store: the
  * concurrent tasks of an executor looking keys up in an adjunct table's replica. Taken after a load
  * ([[LineageStore.committedView]]).
  *
  * Threads: [[get]], [[getMany]] and [[scan]] may be called by any number of threads at once, and while the
  * store's owner writes to its batch in progress, which a view never sees. They read RocksDB, whose gets and
  * iterators are thread-safe, and no per-read state at all: a store's own `get` remembers each read in the
  * batch in progress for the batch's later writes (a write's existence check then needs no lookup), in a
  * table confined to the owning thread; two threads reading through it corrupted it (issue 52). Each scan's
  * iterator is its caller's alone. What a view reads is fixed when it is taken: one immutable [[LocalState]],
  * which the store replaces whole (an `AtomicReference`) whenever what its RocksDB holds changes.
  *
  * A view is valid until the store next loads, commits or closes. Those must not run while the view is read
  * (a load reopens RocksDB under its readers): the caller's lock keeps them apart (`AdjunctReplicas`'s gate).
  * Used after one, the view fails, naming the checkpoint it was taken at and the store's now, instead of
  * answering from another version.
  */
final class CommittedView private[store] (db: LocalRocksDb, taken: LocalState, current: () => LocalState) {

  /** The checkpoint this view reads. */
  val checkpoint: CheckpointId = taken.loaded.get

  /** The committed value of the key in family `cf` (null: none). */
  def get(cf: Int, key: Array[Byte]): Array[Byte] = {
    requireCurrent()
    db.readCommitted(FamilyKeys.fullKey(cf, key))
  }

  /** The committed values of family `cf`'s `keys` (null where absent), in their order, read together (one
    * RocksDB `MultiGet`): what a reader of many keys at once uses instead of one [[get]] per key.
    */
  def getMany(cf: Int, keys: java.util.List[Array[Byte]]): java.util.List[Array[Byte]] = {
    requireCurrent()
    val full = new java.util.ArrayList[Array[Byte]](keys.size)
    keys.forEach(k => full.add(FamilyKeys.fullKey(cf, k)))
    db.readCommittedMany(full)
  }

  /** Keys of family `cf` in [from, until) (user keys; until null = to the family's end), in bytewise order;
    * closed when exhausted or by the caller.
    */
  def scan(cf: Int, from: Array[Byte], until: Array[Byte]): CloseableIterator[(Array[Byte], Array[Byte])] = {
    requireCurrent()
    LineageStore.scanFamily(cf, from, until)(db.scanCommitted)
  }

  private def requireCurrent(): Unit = {
    val now = current()
    if (!(now eq taken))
      throw new IllegalStateException(
        s"a view of the committed state at checkpoint $checkpoint was read after its store moved on (it now " +
          s"holds ${now.loaded.fold("nothing known")(_.toString)}): take a new view after each load or commit"
      )
  }
}

package io.lineagestore.engine

/** Sees a batch's changes as they are made, while each is the first change of its key in the batch (a delta
  * encoded while the batch runs rather than at commit). [[PendingWrites]] feeds it plain puts and deletes,
  * and stops at the first change it cannot take (a key changed again in the batch, a change kept beside
  * others with `everyChange`, a merge): it then discards the log, and the batch's delta is written from its
  * entries at commit, as the net change of each key. Used by the batch's task thread only.
  */
trait BatchLog {
  def put(key: Array[Byte], value: Array[Byte]): Unit
  def delete(key: Array[Byte]): Unit

  /** Frees what the log holds; it is not used after. */
  def discard(): Unit
}

object BatchLog {

  /** Opens no log: the batch's delta is written at commit. */
  val None: () => BatchLog = () => null
}

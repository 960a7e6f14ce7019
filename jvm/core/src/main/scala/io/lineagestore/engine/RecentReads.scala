package io.lineagestore.engine

import java.util.Arrays

/** The last two keys read from a store, each with whether it has a value now (the batch's writes included): a
  * write's existence check (for key counts) then needs no lookup of its own. Two, because Spark's streaming
  * aggregation reads a group's key, then the next group's key (to see the first group end), and only then
  * writes the first. A write updates the entry of its key and adds none, so it never pushes out a read that a
  * neighbouring write will need; entries of other keys stay true, as a write changes only its own key. Task
  * thread only, like every write to the store.
  */
private[engine] final class RecentReads {
  import RecentReads._

  private var newest: Array[Byte] = null
  private var newestExists = false
  private var older: Array[Byte] = null
  private var olderExists = false

  def read(key: Array[Byte], exists: Boolean): Unit =
    if (newest != null && Arrays.equals(newest, key)) newestExists = exists
    else {
      older = newest; olderExists = newestExists
      newest = key; newestExists = exists
    }

  def wrote(key: Array[Byte], exists: Boolean): Unit =
    if (newest != null && Arrays.equals(newest, key)) newestExists = exists
    else if (older != null && Arrays.equals(older, key)) olderExists = exists

  /** Whether `key` has a value, if it is one of the two: [[Exists]], [[Absent]] or [[Unknown]] (no boxing on
    * the path of every write).
    */
  def existence(key: Array[Byte]): Int =
    if (newest != null && Arrays.equals(newest, key)) (if (newestExists) Exists else Absent)
    else if (older != null && Arrays.equals(older, key)) (if (olderExists) Exists else Absent)
    else Unknown

  def forget(): Unit = { newest = null; older = null }
}

private[engine] object RecentReads {
  val Exists = 1
  val Absent = 0
  val Unknown: Int = -1
}

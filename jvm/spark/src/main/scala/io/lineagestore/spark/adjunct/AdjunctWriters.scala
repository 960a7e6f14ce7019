package io.lineagestore.spark.adjunct

import scala.util.control.NonFatal

/** The partition stores this executor's maintain tasks opened, kept open between batches so partition p's
  * next task, placed here ([[MaintainTasks]]), finds its store at the parent and loads nothing: as the
  * provider keeps a query's loaded stores. At most [[MaxIdle]] idle stores per JVM; the least recently used
  * is closed first (its directory stays for `localRetentionMs`, so reopening it reuses its files).
  *
  * Threads: a store is used by one task at a time. [[withWriter]] takes the store out of the idle map (under
  * this object's monitor) for the task's use and puts it back after, so a second attempt of the same
  * partition running at once here finds none idle and opens its own copy (in a private directory: the first
  * holds the store's directory lease); when both are done, the second to return closes its copy.
  */
object AdjunctWriters {
  val MaxIdle = 32

  // store path -> its idle writer, least recently used first (guarded by this object's monitor)
  private val idle = new java.util.LinkedHashMap[String, AdjunctLocalStore](16, 0.75f, true)
  private val log = org.slf4j.LoggerFactory.getLogger(getClass)

  /** Runs `use` on this executor's writer of the store at `storePath` (partition `partition`), opened if none
    * is idle. A failure closes the writer (what it holds is then unknown); otherwise it is kept for the next
    * task.
    */
  def withWriter[T](storePath: String, confEntries: Map[String, String], retain: Int, partition: Int)(
      use: AdjunctLocalStore => T
  ): T = {
    val local = synchronized(Option(idle.remove(storePath)))
      .getOrElse(new AdjunctLocalStore(storePath, confEntries, "writer", retain, partition))
    val result =
      try use(local)
      catch {
        case t: Throwable =>
          closeQuietly(storePath, local)
          throw t
      }
    val evicted = synchronized {
      if (idle.containsKey(storePath)) Seq(storePath -> local) // another attempt's copy came back first
      else {
        idle.put(storePath, local)
        val out = Seq.newBuilder[(String, AdjunctLocalStore)]
        val it = idle.entrySet().iterator()
        while (idle.size > MaxIdle && it.hasNext) {
          val e = it.next(); out += e.getKey -> e.getValue; it.remove()
        }
        out.result()
      }
    }
    evicted.foreach { case (p, l) => closeQuietly(p, l) }
    result
  }

  /** Whether this JVM holds an idle writer of `storePath` (tests: the next task finds it warm). */
  def holds(storePath: String): Boolean = synchronized(idle.containsKey(storePath))

  private def closeQuietly(storePath: String, local: AdjunctLocalStore): Unit =
    try local.close()
    catch {
      case NonFatal(e) => log.warn(s"adjunct table store $storePath: closing a maintain copy failed: $e")
    }
}

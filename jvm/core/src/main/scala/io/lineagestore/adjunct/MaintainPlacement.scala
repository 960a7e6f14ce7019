package io.lineagestore.adjunct

/** Where each partition's maintain task of a batch is asked to run (a preferred location; Spark may still run
  * it elsewhere, which costs a load, never correctness): where the partition last committed, if that host
  * still runs an executor (its store is warm there), else on the host with the fewest partitions so far, so
  * the maintain work is split across executors from the first batch (without a preference every task would
  * follow the shuffle's map output to wherever the small batch was reduced). Pure; `last` and the result are
  * Spark location strings whose host is what [[hostOf]] reads.
  */
object MaintainPlacement {

  def place(partitions: Int, last: Map[Int, String], hosts: Seq[String]): Map[Int, String] =
    if (hosts.isEmpty) last
    else {
      val kept = last.filter { case (p, loc) => p < partitions && hosts.contains(hostOf(loc)) }
      val load = scala.collection.mutable.Map(hosts.map(_ -> 0): _*)
      kept.values.foreach(loc => load(hostOf(loc)) += 1)
      kept ++ (0 until partitions).filterNot(kept.contains).map { p =>
        val host = hosts.minBy(h => (load(h), hosts.indexOf(h)))
        load(host) += 1
        p -> host
      }
    }

  /** The host of a location: `executor_<host>_<executorId>` (an executor) or `<host>`. */
  def hostOf(location: String): String =
    if (location.startsWith("executor_")) location.stripPrefix("executor_").split("_", 2)(0) else location
}

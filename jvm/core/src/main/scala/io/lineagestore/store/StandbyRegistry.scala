package io.lineagestore.store

import java.net.{URLDecoder, URLEncoder}
import java.nio.charset.StandardCharsets

/** What the driver knows of the cluster's standby followers, so that an executor with no store of an operator
  * still follows it (an executor learns of operators only from its own providers otherwise: one that never
  * opened a store of a query, such as the replacement of a lost executor, would hold no copy of it).
  *
  * Each executor's follower reports, every poll, the operators it owns a store of and the settings it runs
  * with; the answer is every operator some executor reported recently and the settings to start a follower
  * with where none runs yet. A report that stops (the executor is gone, or owns no store of the operator any
  * more) ages out after `ageInPolls` of its sender's poll intervals, and at least `minAgeMs`, so a stopped
  * query stops being followed. Pure: the caller passes the clock; the Spark glue holds one per driver.
  *
  * Threads: the driver plugin's RPC handlers call [[report]] concurrently; the map is guarded by this
  * object's monitor.
  */
final class StandbyRegistry(minAgeMs: Long, ageInPolls: Long = 3) {
  import StandbyRegistry._

  private var reports = Map.empty[String, (Report, Long)] // by executor -> (its last report, when it expires)

  def report(r: Report, now: Long): Directory = synchronized {
    val pollMs = r.settings.get(PollMsKey).flatMap(_.toLongOption).getOrElse(0L)
    val expires = now + math.max(minAgeMs, ageInPolls * pollMs)
    reports = reports.filter { case (_, (_, until)) => now <= until } + (r.executor -> (r -> expires))
    val live = reports.values.map(_._1)
    Directory(
      live.flatMap(_.operators).toSet,
      live.find(_.settings.nonEmpty).map(_.settings).getOrElse(Map.empty)
    )
  }
}

object StandbyRegistry {

  /** An executor's report: the operators it owns a store of, and its follower's settings (lineagestore's
    * confs and the poll interval under [[PollMsKey]]; empty when no follower runs there).
    */
  final case class Report(executor: String, operators: Set[FollowedOperator], settings: Map[String, String]) {
    def encode: String =
      (Seq(field(executor)) ++ operators.toSeq.map(opLine) ++ settings.toSeq.map(settingLine)).mkString("\n")
  }

  /** The answer: the operators to follow, and settings to start a follower with (empty: none runs anywhere).
    */
  final case class Directory(operators: Set[FollowedOperator], settings: Map[String, String]) {
    def encode: String = (Seq("directory") ++ operators.toSeq.map(opLine) ++ settings.toSeq.map(settingLine))
      .mkString("\n")
  }

  val PollMsKey = "lineagestore.standby.pollMs"

  /* Messages travel between driver and executors as text: an RPC message is deserialized by Spark's network
   * threads with Spark's own class loader, which cannot see classes of a jar added with `spark.jars` (an
   * unknown class there fails the connection, and the executor exits). One line per item, each field
   * URL-encoded so no location or value can break a line. */

  def decodeReport(text: String): Report = {
    val lines = text.split("\n", -1).toSeq
    val (ops, settings) = items(lines.tail)
    Report(unfield(lines.head), ops, settings)
  }

  def decodeDirectory(text: String): Directory = {
    val (ops, settings) = items(text.split("\n", -1).toSeq.drop(1))
    Directory(ops, settings)
  }

  private def field(s: String) = URLEncoder.encode(s, StandardCharsets.UTF_8)
  private def unfield(s: String) = URLDecoder.decode(s, StandardCharsets.UTF_8)
  private def opLine(o: FollowedOperator) = s"op ${field(o.stateRoot)} ${o.operatorId} ${field(o.storeName)}"
  private def settingLine(kv: (String, String)) = s"set ${field(kv._1)} ${field(kv._2)}"

  private def items(lines: Seq[String]): (Set[FollowedOperator], Map[String, String]) = {
    val parsed = lines.filter(_.nonEmpty).map(_.split(" ", -1).toSeq)
    val ops = parsed.collect { case Seq("op", root, id, name) =>
      FollowedOperator(unfield(root), id.toLong, unfield(name))
    }
    val settings = parsed.collect { case Seq("set", k, v) => unfield(k) -> unfield(v) }
    (ops.toSet, settings.toMap)
  }
}

package io.lineagestore.spark.adjunct

import org.apache.spark.sql.{classic, DataFrame, Row}
import org.apache.spark.sql.catalyst.expressions.{Attribute, Expression}
import org.apache.spark.sql.catalyst.plans.physical.{
  HashPartitioning,
  Partitioning,
  PartitioningCollection,
  UnknownPartitioning
}
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec

/** How a DataFrame's rows are partitioned when it runs, read from its physical plan's `outputPartitioning`
  * (what Spark's planner itself uses to decide whether a shuffle is needed; public developer API, so it lives
  * in the glue, not the shim). For the partitioned adjunct lookup, which reads partition p's store in the
  * task of partition p.
  */
object PlanPartitioning {

  /** What the plan says about how `df`'s rows are partitioned, against hash partitioning on exactly `columns`
    * (in this order: the hash is over them in order) into `n` partitions.
    */
  sealed trait Verdict

  /** Hash-partitioned on those columns into `n`: after `repartition(n, columns)` or a stateful operator's
    * shuffle on them (also in a foreachBatch DataFrame of a stateful query, whose plan keeps it).
    */
  case object Matches extends Verdict

  /** The plan does not say: a foreachBatch DataFrame of a stateless streaming query (Spark wraps the batch's
    * rows in a `LogicalRDD` that keeps the partitioning of the batch's physical plan only when that plan is
    * not adaptive, and stateless micro-batches run adaptively), or rows from an RDD.
    */
  case object Unknown extends Verdict

  /** Partitioned otherwise, as `how` says. */
  final case class Differs(how: String) extends Verdict

  def verdict(df: DataFrame, columns: Seq[String], n: Int): Verdict = {
    val plan = df.asInstanceOf[classic.Dataset[Row]].queryExecution.executedPlan match {
      // AQE's root reports no partitioning; its current plan does (before it runs: the plan with the
      // exchanges EnsureRequirements added; a coalesced shuffle is caught by the partition count after)
      case a: AdaptiveSparkPlanExec => a.executedPlan
      case p                        => p
    }
    val wanted = columns.map(c => plan.output.find(_.name == c))
    // a foreachBatch DataFrame's LogicalRDD keeps the partitioning of the batch's plan, whose attributes have
    // the IDs of that plan, not of the LogicalRDD's output: an attribute outside the output is matched by
    // name (a wrong match would only move the error from here to the per-event check)
    def same(e: Expression, a: Attribute): Boolean = e.semanticEquals(a) || (e match {
      case x: Attribute => !plan.output.exists(_.exprId == x.exprId) && x.name == a.name
      case _            => false
    })
    def matches(p: Partitioning): Boolean = p match {
      case h: HashPartitioning =>
        h.numPartitions == n && h.expressions.length == wanted.length &&
        h.expressions.zip(wanted).forall { case (e, a) => a.exists(same(e, _)) }
      case PartitioningCollection(ps) => ps.exists(matches)
      case _                          => false
    }
    def unknown(p: Partitioning): Boolean = p match {
      case _: UnknownPartitioning     => true
      case PartitioningCollection(ps) => ps.forall(unknown)
      case _                          => false
    }
    val p = plan.outputPartitioning
    if (matches(p)) Matches else if (unknown(p)) Unknown else Differs(describe(p))
  }

  private def describe(p: Partitioning): String = p match {
    case h: HashPartitioning =>
      s"hash-partitioned on (${h.expressions.map(nameOf).mkString(", ")}) into ${h.numPartitions} partitions"
    case PartitioningCollection(ps) => ps.map(describe).mkString(" and ")
    case other                      =>
      s"not hash-partitioned on columns (${other.getClass.getSimpleName.stripSuffix("$")}, " +
        s"${other.numPartitions} partitions)"
  }

  private def nameOf(e: Expression): String = e match {
    case a: Attribute => a.name
    case other        => other.sql
  }
}

package io.lineagestore.spark

import io.lineagestore.config.LineageConf
import org.apache.spark.sql.SparkSessionExtensions
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.{ColumnarRule, SparkPlan}
import org.apache.spark.sql.execution.streaming.operators.stateful.StatefulOperator
import org.apache.spark.sql.execution.streaming.state.lineagestore.LineageTws

/** `spark.sql.extensions=io.lineagestore.spark.LineageSessionExtensions`: lets transformWithState run on
  * lineagestore.
  *
  * Spark 4.3 refuses transformWithState on any provider whose class name is not its own RocksDB provider's
  * (`TransformWithStateExecBase.validateStateStoreProvider`, a fixed set of names checked first in
  * `doExecute`). This extension replaces, in the physical plan of a streaming query whose provider is
  * lineagestore's, Spark's two transformWithState nodes with subclasses whose check also accepts
  * lineagestore; every other plan is left untouched. It is a columnar rule because that is the one hook that
  * runs on streaming plans after the operator's state info is filled in and before whole-stage codegen
  * (planner strategies run after Spark's own TWS strategy and are undone by the state rule's `copy`).
  *
  * The same rule checks the session's lineagestore settings ([[LineageConfCheck]]) on the driver when a
  * stateful streaming query is planned, before its first batch runs any task. A check rule
  * ([[PythonStateCheck]]) makes a transformWithStateInPandas call fail at once, naming the missing module and
  * the extra, when the Python its workers will run lacks what they import.
  *
  * It also holds the real-time helper's provider check ([[RealTimeProviderGuard]], [[RealTimeQuery]]).
  *
  * The subclasses depend on the exact constructor of Spark's nodes, which changes between minor versions, so
  * the session refuses to start on a Spark whose nodes have another shape ([[TwsShape]]).
  */
class LineageSessionExtensions extends (SparkSessionExtensions => Unit) {
  override def apply(extensions: SparkSessionExtensions): Unit = {
    TwsShape.checkRunningSpark()
    extensions.injectColumnar(_ => LineageTwsColumnarRule)
    extensions.injectCheckRule(_ => PythonStateCheck(_))
  }
}

private[spark] object LineageTwsColumnarRule extends ColumnarRule {
  private val replace: Rule[SparkPlan] = new Rule[SparkPlan] {
    override val ruleName: String = "LineageTransformWithState"
    override def apply(plan: SparkPlan): SparkPlan = {
      LineageConfCheck(plan)
      RealTimeProviderGuard(plan)
      LineageTws.replaceNodes(plan)
    }
  }
  override def preColumnarTransitions: Rule[SparkPlan] = replace
}

/** The driver's check of the `spark.sql.streaming.stateStore.lineagestore.*` keys, with the executors' own
  * validation ([[LineageConf.validate]]), so a misspelt key or a bad value fails the query on the driver as
  * it starts (naming the key and the nearest known one) instead of in the first stateful task's executor log.
  * Only plans of a stateful operator on lineagestore are checked: they are the ones whose stores read the
  * keys.
  */
private[spark] object LineageConfCheck {
  def apply(plan: SparkPlan): Unit =
    if (LineageTws.isLineageProvider(plan.conf) && plan.exists(_.isInstanceOf[StatefulOperator])) {
      LineageConf.validate(plan.conf.getAllConfs.filter { case (k, _) => k.startsWith(LineageConf.Prefix) })
    }
}

/** Raised at session start when Spark's transformWithState nodes are not the shape the extension was built
  * for.
  */
class TwsShapeMismatchException(message: String) extends IllegalStateException(message)

/** The shape of Spark's classes the extension's subclasses depend on: the erased parameter types of each
  * node's constructor, and the method overridden. Checked by reflection only, so a mismatch is reported
  * before any subclass is loaded (loading one against another Spark would fail later, mid-query).
  */
object TwsShape {
  val BuiltForSpark: String = "4.3.0"

  private val TwsBase =
    "org.apache.spark.sql.execution.streaming.operators.stateful.transformwithstate.TransformWithStateExecBase"
  private val E = "org.apache.spark.sql.catalyst.expressions.Expression"
  private val S = "scala.collection.immutable.Seq"
  private val O = "scala.Option"
  private val P = "org.apache.spark.sql.execution.SparkPlan"
  private val Out = "org.apache.spark.sql.streaming.OutputMode"
  private val Time = "org.apache.spark.sql.streaming.TimeMode"
  private val B = "boolean"

  /** (what, expected parameter types): a constructor by class name, or `Class#method`. */
  val Expected: Seq[(String, Seq[String])] = Seq(
    "org.apache.spark.sql.execution.streaming.operators.stateful.transformwithstate.TransformWithStateExec" -> (
      Seq(E, E, S, S, "org.apache.spark.sql.streaming.StatefulProcessor", Time, Out) ++
        Seq("org.apache.spark.sql.catalyst.encoders.ExpressionEncoder") ++
        Seq("org.apache.spark.sql.catalyst.expressions.Attribute", O, O, O, O, O, P, B, B, B, S, S, E, P)
    ),
    "org.apache.spark.sql.execution.python.streaming.TransformWithStateInPySparkExec" -> (
      Seq(E, S, S, Out, Time, O, O, O, O, O, "scala.Enumeration$Value", P, B, B, P, S) ++
        Seq("org.apache.spark.sql.types.StructType")
    ),
    s"$TwsBase#validateStateStoreProvider" -> Seq(B)
  )

  /** The parameter lists found for `what` in this JVM (every public constructor, or every method of that
    * name); empty when the class or method does not exist.
    */
  def found(what: String, loader: ClassLoader): Seq[Seq[String]] = {
    val (className, method) = what.split('#') match {
      case Array(c, m) => (c, Some(m))
      case Array(c)    => (c, None)
    }
    val cls =
      try Class.forName(className, false, loader)
      catch { case _: ClassNotFoundException | _: LinkageError => return Seq.empty }
    val executables = method match {
      case Some(m) => cls.getMethods.toSeq.filter(_.getName == m)
      case None    => cls.getConstructors.toSeq
    }
    executables.map(_.getParameterTypes.toSeq.map(_.getName))
  }

  /** Fails unless every expected parameter list is among those found. */
  def check(foundShapes: Map[String, Seq[Seq[String]]], sparkVersion: String): Unit = {
    val problems = Expected.flatMap { case (what, expected) =>
      val lists = foundShapes.getOrElse(what, Seq.empty)
      if (lists.contains(expected)) None
      else if (lists.isEmpty) Some(s"$what does not exist")
      else
        Some(
          s"$what takes (${lists.map(_.mkString(", ")).mkString(" | ")}), " +
            s"built for ${expected.size} parameters (${expected.mkString(", ")})"
        )
    }
    if (problems.nonEmpty) {
      throw new TwsShapeMismatchException(
        s"io.lineagestore.spark.LineageSessionExtensions was built for Spark $BuiltForSpark, but this is " +
          s"Spark $sparkVersion, whose transformWithState operators differ: ${problems.mkString("; ")}. " +
          s"Use the lineagestore release built for Spark $sparkVersion, or remove " +
          "io.lineagestore.spark.LineageSessionExtensions from spark.sql.extensions (lineagestore then runs " +
          "every operator except transformWithState, which Spark allows only on its own RocksDB provider)."
      )
    }
  }

  def checkRunningSpark(): Unit = {
    val loader = Option(Thread.currentThread.getContextClassLoader).getOrElse(getClass.getClassLoader)
    check(
      Expected.map { case (what, _) => what -> found(what, loader) }.toMap,
      org.apache.spark.SPARK_VERSION
    )
  }
}

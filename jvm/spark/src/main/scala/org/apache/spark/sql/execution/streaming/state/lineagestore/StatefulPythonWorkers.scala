package org.apache.spark.sql.execution.streaming.state.lineagestore

import scala.jdk.CollectionConverters._

import org.apache.spark.api.python.PythonUtils
import org.apache.spark.sql.catalyst.expressions.PythonUDF
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, TransformWithStateInPySpark}

/** Thin shim: the Python a plan's transformWithStateInPandas / row-based `transformWithState` workers run
  * (`PythonFunction.pythonExec`, `private[spark]`) and the environment Spark's worker factory gives it: the
  * function's variables, and `PYTHONPATH` as PySpark's own path, then the function's, then the JVM's.
  */
case class PythonWorker(exec: String, env: Map[String, String])

object StatefulPythonWorkers {
  def of(plan: LogicalPlan): Seq[PythonWorker] =
    plan
      .collect { case t: TransformWithStateInPySpark => t.functionExpr }
      .collect { case udf: PythonUDF => udf.func }
      .map { func =>
        val vars = func.envVars.asScala.toMap
        val path = PythonUtils.mergePythonPaths(
          PythonUtils.sparkPythonPath,
          vars.getOrElse("PYTHONPATH", ""),
          sys.env.getOrElse("PYTHONPATH", "")
        )
        PythonWorker(func.pythonExec, vars + ("PYTHONPATH" -> path))
      }
      .distinct
}

package io.lineagestore.spark

import java.io.IOException
import java.nio.charset.StandardCharsets
import java.util.concurrent.{ConcurrentHashMap, TimeUnit}

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.AnalysisException
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.execution.streaming.state.lineagestore.{LineageTws, StatefulPythonWorkers}
import org.apache.spark.sql.internal.SQLConf

/** Raised when the Python that transformWithStateInPandas (or the row-based `transformWithState`) would run
  * its StatefulProcessor in cannot import what those workers import. An `AnalysisException`, so PySpark
  * raises it as `pyspark.errors.AnalysisException` at the user's `transformWithStateInPandas(...)` call.
  */
class MissingPythonPackageException(message: String)
    extends AnalysisException(message, None, None, None, None, Map.empty[String, String], Array.empty)

/** transformWithStateInPandas and the row-based Python `transformWithState` run the user's StatefulProcessor
  * in Python workers that talk to the JVM in protobuf (PySpark's generated `StateMessage_pb2`) and exchange
  * rows as Arrow (and pandas). Without protobuf, Spark's driver worker dies at the first batch with only
  * "TransformWithStateInPySpark driver worker exited unexpectedly (crashed)"; the cause (`cannot import name
  * 'descriptor' from 'google.protobuf'`) is in the log.
  *
  * So when such a plan is analysed in a session on lineagestore (that is, at the user's
  * `groupBy(...).transformWithStateInPandas(...)` call), this check runs the very Python those workers will
  * run (the function's `pythonExec`, with its environment and PySpark's Python path, as Spark's worker
  * factory starts it) on the same imports, once per Python and environment per JVM, and fails the call naming
  * the module and the extra that brings it ([[Extra]], the one of pyproject.toml; test_extras checks they
  * agree). A Python that cannot be started or a check that does not finish is left to Spark to report.
  */
object PythonStateCheck {

  /** The user extra of the Python package with what PySpark's stateful Python APIs need. */
  val Extra = "python-state"

  /** (import, what to name when it fails): the imports of PySpark 4.3's stateful Python workers. Importing
    * `StateMessage_pb2` also runs protobuf's own check that its runtime suits the generated code.
    */
  private val Imports = Seq(
    // first, and without importing pyspark: the gap users meet, found in milliseconds
    "google.protobuf.descriptor" -> "google.protobuf",
    "pyspark.sql.streaming.proto.StateMessage_pb2" -> "google.protobuf",
    "pyarrow" -> "pyarrow",
    "pandas" -> "pandas"
  )
  private val Marker = "lineagestore-missing\t"
  private val Script =
    s"""import importlib, sys
       |for module, label in zip(sys.argv[1::2], sys.argv[2::2]):
       |    try:
       |        importlib.import_module(module)
       |    except Exception as e:
       |        print("$Marker" + label + "\\t" + type(e).__name__ + ": " + str(e).replace("\\n", " "))
       |        sys.exit(3)
       |""".stripMargin
  private val TimeoutSeconds = 120L

  /** (pythonExec, environment) -> what the workers' Python lacks (None: nothing). */
  private val checked = new ConcurrentHashMap[(String, Map[String, String]), Option[String]]()

  def apply(plan: LogicalPlan): Unit =
    if (LineageTws.isLineageProvider(SQLConf.get)) {
      for (worker <- StatefulPythonWorkers.of(plan)) {
        val gap = checked.computeIfAbsent((worker.exec, worker.env), _ => missing(worker.exec, worker.env))
        gap.foreach(what => throw new MissingPythonPackageException(message(worker.exec, what)))
      }
    }

  def message(exec: String, what: String): String = {
    val (label, error) = what.split("\t", 2) match {
      case Array(l, e) => (l, e)
      case _           => (what, "")
    }
    s"transformWithStateInPandas and the row-based transformWithState run the StatefulProcessor in Python " +
      s"workers, and their Python ($exec) cannot import $label ($error). PySpark " +
      s"${org.apache.spark.SPARK_VERSION}'s stateful Python APIs need pandas, pyarrow and protobuf there: " +
      s"pip install 'lineagestore[$Extra]' into that Python (from a clone: pip install -e '.[$Extra]'); " +
      "see docs/transform-with-state.md, 'Python dependencies'."
  }

  /** Runs the imports in `exec`: Some(label TAB error) for the first that fails, None when all import or the
    * check itself cannot say (Python not startable, timed out, another exit).
    */
  private def missing(exec: String, env: Map[String, String]): Option[String] = {
    val command = Seq(exec, "-c", Script) ++ Imports.flatMap { case (m, l) => Seq(m, l) }
    val builder = new ProcessBuilder(command.asJava).redirectErrorStream(true)
    builder.environment().putAll(env.asJava)
    val process =
      try builder.start()
      catch { case _: IOException => return None }
    val output = new StringBuilder
    val reader = new Thread(() => {
      output.append(new String(process.getInputStream.readAllBytes(), StandardCharsets.UTF_8))
    })
    reader.setDaemon(true)
    reader.start()
    if (!process.waitFor(TimeoutSeconds, TimeUnit.SECONDS)) {
      process.destroyForcibly()
      return None
    }
    reader.join(TimeUnit.SECONDS.toMillis(10))
    if (process.exitValue() != 3) None
    else output.toString.linesIterator.find(_.startsWith(Marker)).map(_.stripPrefix(Marker))
  }
}

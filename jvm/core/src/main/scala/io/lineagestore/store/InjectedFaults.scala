package io.lineagestore.store

import java.io.File

import io.lineagestore.config.InvalidConfigException

/** Thrown by [[InjectedFaults]] at a named step; a test's deliberate failure, never a real one. */
class InjectedFault(message: String) extends RuntimeException(message)

/** Test-only faults driven by Spark confs, for end-to-end tests of the provider in a real query (the Python
  * helpers in lineagestore.testing.faults set them). The keys live outside lineagestore's own key space, so
  * they are not options, are not documented as such and are never validated as such:
  *
  *   - `spark.sql.streaming.stateStore.lineagestoreTest.failOnceAt`: step names of [[CrashPoints.Known]] (a
  *     store's, or an adjunct maintain's), comma-separated (e.g. `commit.after-delta`,
  *     `snapshot.after-blobs`);
  *   - `spark.sql.streaming.stateStore.lineagestoreTest.markerDir`: a directory on the executors' local disk.
  *
  * The first store of any task that reaches a named step creates `<markerDir>/<step>` (atomically) and throws
  * [[InjectedFault]]; once that marker exists the step passes. So each step fails exactly once per marker
  * directory, across task retries, query restarts and stores; deleting the marker re-arms it. Spark forwards
  * every `spark.sql.streaming.stateStore.*` SQL conf to providers, so a test sets them on its session.
  */
object InjectedFaults {
  val Prefix = "spark.sql.streaming.stateStore.lineagestoreTest."
  val FailOnceAtKey: String = Prefix + "failOnceAt"
  val MarkerDirKey: String = Prefix + "markerDir"

  def fromConfs(confs: Map[String, String]): CrashPoints =
    confs.get(FailOnceAtKey).map(_.split(',').map(_.trim).filter(_.nonEmpty).toSeq) match {
      case None | Some(Seq()) => CrashPoints.None
      case Some(names)        =>
        val known = CrashPoints.Known.map(_.name)
        names.filterNot(known.contains).headOption.foreach { n =>
          throw new InvalidConfigException(
            s"$FailOnceAtKey='${confs(FailOnceAtKey)}': unknown step '$n'. Steps: ${known.mkString(", ")}."
          )
        }
        val dir = confs
          .get(MarkerDirKey)
          .filter(_.trim.nonEmpty)
          .getOrElse(
            throw new InvalidConfigException(
              s"$FailOnceAtKey is set but $MarkerDirKey (a local directory) is not"
            )
          )
        failOnce(names.toSet, new File(dir))
    }

  def failOnce(steps: Set[String], markerDir: File): CrashPoints = (step: CrashPoints.Step) =>
    if (steps.contains(step.name)) {
      markerDir.mkdirs()
      if (new File(markerDir, step.name).createNewFile())
        throw new InjectedFault(s"lineagestore test fault injected at ${step.name} ($FailOnceAtKey)")
    }
}

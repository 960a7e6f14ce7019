package io.lineagestore.spark

import java.util.{Collections, Map => JMap}
import java.util.concurrent.{Executors, ScheduledExecutorService, TimeUnit}

import scala.util.control.NonFatal

import org.apache.hadoop.conf.Configuration
import org.apache.spark.SparkContext
import org.apache.spark.api.plugin.{DriverPlugin, ExecutorPlugin, PluginContext, SparkPlugin}
import org.apache.spark.internal.Logging

import io.lineagestore.config.LineageConf
import io.lineagestore.engine.DaemonThreads
import io.lineagestore.store.{LocalDirectories, StandbyRegistry}

/** Spark's plugin API (`spark.plugins`, which `lineagestore.configure` sets) carrying the standby followers'
  * reports to the driver's [[StandbyRegistry]] and its answer back, so that every executor follows every
  * operator a store of which is open somewhere: without it an executor learns of operators only from its own
  * providers, and one that never opened a store of a query (a lost executor's replacement, or one the first
  * batch's tasks missed) holds no copy of it. Nothing else runs through it; with `standbyReplicas` = 0
  * nothing is reported, and an executor with no follower asks one small RPC per [[ColdAskMs]] in case a query
  * with standbys starts later.
  *
  * Spark's public plugin API, so no Spark internals: executors `ask` (the only direction the API has), the
  * driver answers from `receive`.
  */
class StandbyPlugin extends SparkPlugin {
  override def driverPlugin(): DriverPlugin = new StandbyPlugin.Driver
  override def executorPlugin(): ExecutorPlugin = new StandbyPlugin.Executor
}

object StandbyPlugin extends Logging {

  /** How often an executor with no follower asks whether one should run. */
  val ColdAskMs = 5000L

  /** A report is dropped after three of its sender's poll intervals, and at least this: its executor is gone
    * or stopped following.
    */
  private val MinAgeMs = 30000L

  final class Driver extends DriverPlugin {
    private val registry = new StandbyRegistry(MinAgeMs)

    override def init(sc: SparkContext, ctx: PluginContext): JMap[String, String] = Collections.emptyMap()

    override def receive(message: Any): AnyRef = message match {
      case text: String =>
        registry.report(StandbyRegistry.decodeReport(text), System.currentTimeMillis()).encode
      case other => throw new IllegalArgumentException(s"lineagestore standby plugin: unknown message $other")
    }
  }

  /** Connects the executor's follower to the driver ([[StandbyFollowers.connect]]) and, while no follower
    * runs here, asks every [[ColdAskMs]] whether one runs elsewhere; if so, starts this executor's with the
    * settings the driver relays (storage through Hadoop with the executor's `spark.hadoop.*` settings).
    */
  final class Executor extends ExecutorPlugin {
    private var cold: Option[ScheduledExecutorService] = None

    override def init(ctx: PluginContext, extraConf: JMap[String, String]): Unit = {
      StandbyFollowers.connect(ctx)
      val s = Executors.newSingleThreadScheduledExecutor(DaemonThreads.factory("lineagestore-standby-cold"))
      s.scheduleWithFixedDelay(() => askWhileCold(ctx, s), ColdAskMs, ColdAskMs, TimeUnit.MILLISECONDS)
      cold = Some(s)
    }

    private def askWhileCold(ctx: PluginContext, self: ScheduledExecutorService): Unit =
      try {
        if (StandbyFollowers.running.isDefined) self.shutdown()
        else
          ask(ctx, StandbyRegistry.Report(ctx.executorID(), Set.empty, Map.empty)) match {
            case d if d.settings.nonEmpty && d.operators.nonEmpty =>
              val pollMs = d.settings.get(StandbyRegistry.PollMsKey).flatMap(_.toLongOption).getOrElse(60000L)
              val confs = d.settings - StandbyRegistry.PollMsKey
              if (LineageConf.StandbyReplicas.from(confs) != 0) {
                StandbyFollowers.get(confs, hadoopConf(ctx), pollMs, LocalDirectories.configured(confs))
                logInfo(
                  s"lineagestore: standby follower started on a cold executor for ${d.operators.size} operators"
                )
                self.shutdown()
              }
            case _ => ()
          }
      } catch {
        case NonFatal(e) => logDebug("lineagestore: asking the driver for standby operators failed", e)
      }

    override def shutdown(): Unit = cold.foreach(_.shutdownNow())
  }

  /** One round trip to the driver's registry (messages as text: [[StandbyRegistry]] says why). */
  def ask(ctx: PluginContext, report: StandbyRegistry.Report): StandbyRegistry.Directory =
    ctx.ask(report.encode) match {
      case text: String => StandbyRegistry.decodeDirectory(text)
      case other => throw new IllegalStateException(s"lineagestore standby plugin: unknown answer $other")
    }

  /** Hadoop's configuration with the executor's `spark.hadoop.*` settings, as Spark builds its own. */
  private def hadoopConf(ctx: PluginContext): Configuration = {
    val conf = new Configuration()
    ctx.conf().getAll.foreach { case (k, v) =>
      if (k.startsWith("spark.hadoop.")) conf.set(k.stripPrefix("spark.hadoop."), v)
    }
    conf
  }
}

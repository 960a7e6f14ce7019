package io.lineagestore.spark

import java.util.concurrent.{Executors, TimeUnit}

import scala.util.control.NonFatal

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.apache.spark.SparkEnv
import org.apache.spark.api.plugin.PluginContext
import org.apache.spark.internal.Logging
import org.apache.spark.sql.execution.streaming.state.StateStoreId
import org.apache.spark.sql.execution.streaming.state.lineagestore.SparkInternals

import io.lineagestore.config.LineageConf
import io.lineagestore.engine.DaemonThreads
import io.lineagestore.format.StoreIdentity
import io.lineagestore.storage.{BlobStore, HadoopBlobStore}
import io.lineagestore.store.{
  FollowedOperator,
  FollowedStore,
  LocalDirectories,
  StandbyFollower,
  StandbyRegistry,
  StandbySource
}

/** The executor's one [[StandbyFollower]] (with `standbyReplicas` not 0), started by the first provider that
  * asks, and its polling thread: every `maintenanceInterval` (Spark's, the first provider's) it refreshes the
  * standbys this executor follows. Membership comes from Spark's block manager (the shim), stores from
  * listing the operators' state directories, storage through Hadoop with the first provider's configuration.
  * The follower, its pool and its thread live as long as the JVM (daemons), as the transfer pool does.
  *
  * With [[StandbyPlugin]] loaded (`spark.plugins`), each poll also reports the operators this executor owns a
  * store of to the driver and follows every operator the driver knows of ([[StandbySource.cluster]]); without
  * it, only the operators this executor's own providers named.
  *
  * Threads: `current` and `plugin` are set once and read by providers' task threads and the plugin's thread,
  * under this object's monitor (`plugin` volatile, read by the poll thread).
  */
private[spark] object StandbyFollowers extends Logging {
  private var current: Option[StandbyFollower] = None
  @volatile private var plugin: Option[PluginContext] = None

  /** The executor side of [[StandbyPlugin]]: the way to the driver's registry. */
  def connect(ctx: PluginContext): Unit = plugin = Some(ctx)

  def get(
      confs: Map[String, String],
      hadoopConf: Configuration,
      pollMs: Long,
      dirs: LocalDirectories
  ): StandbyFollower = synchronized {
    current.getOrElse {
      val partBytes = LineageConf.DeltaUploadPartBytes.from(confs)
      // what a cold executor needs to start a follower like this one (StandbyPlugin relays it)
      val settings =
        confs.filter(_._1.startsWith(LineageConf.Prefix)) + (StandbyRegistry.PollMsKey -> pollMs.toString)
      val source = new StandbySource {
        def self: String = SparkEnv.get.executorId
        def executors(): Set[String] = SparkInternals.executorIds()
        def stores(op: FollowedOperator): Seq[FollowedStore] = {
          val dir = new Path(op.stateRoot, op.operatorId.toString)
          val fs = dir.getFileSystem(hadoopConf)
          fs.listStatus(dir).toSeq.filter(_.isDirectory).flatMap(s => s.getPath.getName.toIntOption).map {
            p =>
              val id = StateStoreId(op.stateRoot, op.operatorId, p, op.storeName)
              FollowedStore(
                id.storeCheckpointLocation().toString,
                StoreIdentity(op.operatorId, p, op.storeName)
              )
          }
        }
        def blobsOf(s: FollowedStore): BlobStore =
          new HadoopBlobStore(new Path(s.location), hadoopConf, partBytes)
        override def cluster(own: Set[FollowedOperator]): Set[FollowedOperator] = plugin match {
          case Some(ctx) => StandbyPlugin.ask(ctx, StandbyRegistry.Report(self, own, settings)).operators
          case None      => Set.empty
        }
      }
      val pool = DaemonThreads.pool(LineageConf.StandbyThreads.from(confs), "lineagestore-standby")
      val follower = new StandbyFollower(
        dirs,
        source,
        LineageConf.StandbyReplicas.from(confs),
        LineageConf.StandbyMaxBytes.from(confs),
        math.max(100L, pollMs),
        pool
      )
      val poller =
        Executors.newSingleThreadScheduledExecutor(DaemonThreads.factory("lineagestore-standby-poll"))
      poller.scheduleWithFixedDelay(
        () =>
          try follower.poll(math.max(dirs.retentionMs, pollMs))
          catch {
            case NonFatal(e) => logWarning("lineagestore: a standby poll failed; the next one retries", e)
          },
        pollMs,
        math.max(100L, pollMs),
        TimeUnit.MILLISECONDS
      )
      current = Some(follower)
      follower
    }
  }

  /** The follower, if one runs on this executor. */
  def running: Option[StandbyFollower] = synchronized(current)
}

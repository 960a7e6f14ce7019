package io.lineagestore.spark

import java.util.concurrent.{Executors, TimeUnit}

import scala.util.control.NonFatal

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.apache.spark.SparkEnv
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
  StandbySource
}

/** The executor's one [[StandbyFollower]] (with `standbyReplicas` not 0), started by the first provider that
  * asks, and its polling thread: every `maintenanceInterval` (Spark's, the first provider's) it refreshes the
  * standbys this executor follows. Membership comes from Spark's block manager (the shim), stores from
  * listing the operators' state directories, storage through Hadoop with the first provider's configuration.
  * The follower, its pool and its thread live as long as the JVM (daemons), as the transfer pool does.
  */
private[spark] object StandbyFollowers extends Logging {
  private var current: Option[StandbyFollower] = None

  def get(
      confs: Map[String, String],
      hadoopConf: Configuration,
      pollMs: Long,
      dirs: LocalDirectories
  ): StandbyFollower = synchronized {
    current.getOrElse {
      val partBytes = LineageConf.DeltaUploadPartBytes.from(confs)
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

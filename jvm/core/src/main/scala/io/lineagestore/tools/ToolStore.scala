package io.lineagestore.tools

import java.util.concurrent.{ExecutorService, Executors, ThreadFactory}

import scala.collection.mutable
import scala.util.{Failure, Success, Try}

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path

import io.lineagestore.format.StoreIdentity
import io.lineagestore.lineage.{CheckpointId, LineageSource}
import io.lineagestore.storage.HadoopBlobStore
import io.lineagestore.store.CheckpointFiles

/** The Hadoop configuration the tools use. Python may add settings (an s3a endpoint, credentials provider)
  * before its first call; each tool call reads it when it opens a filesystem.
  */
object ToolEnv {
  private val conf = new Configuration()

  def hadoopConf: Configuration = conf.synchronized(new Configuration(conf))

  def set(key: String, value: String): Unit = conf.synchronized(conf.set(key, value))
}

/** A store directory as Spark lays it out: `<checkpoint>/state/<operatorId>/<partitionId>[/<storeName>]`. */
final case class StoreRef(operatorId: Long, partitionId: Int, storeName: String, dir: String) {
  def identity: StoreIdentity = StoreIdentity(operatorId, partitionId, storeName)
  override def toString: String = s"$identity at $dir"
}

/** One batch's entry in Spark's commit log for one store: batch `batchId` committed checkpoint `id` (whose
  * version is batchId + 1).
  */
final case class CommitLogEntry(batchId: Long, id: CheckpointId)

object CommitLogEntry {

  /** Parses the text form Python passes: one `<batchId> <version> <uniqueId>` per line. */
  def parseLines(text: String): Seq[CommitLogEntry] =
    Option(text).getOrElse("").split("\n").toSeq.map(_.trim).filter(_.nonEmpty).map { line =>
      line.split(" ") match {
        case Array(b, v, id) => CommitLogEntry(b.toLong, CheckpointId(v.toLong, id))
        case _               =>
          throw new IllegalArgumentException(
            s"commit log line '$line' is not '<batchId> <version> <uniqueId>'"
          )
      }
    }
}

/** An open store directory for the tools: the store's [[CheckpointFiles]] over a [[HadoopBlobStore]], with a
  * small transfer pool of its own. Close it.
  */
final class ToolStore(val ref: StoreRef, conf: Configuration = ToolEnv.hadoopConf, threads: Int = 4)
    extends AutoCloseable {
  val blobs = new HadoopBlobStore(new Path(ref.dir), conf)
  private val pool: ExecutorService = Executors.newFixedThreadPool(
    threads,
    new ThreadFactory {
      override def newThread(r: Runnable): Thread = {
        val t = new Thread(r, s"lineagestore-tool-${ref.operatorId}-${ref.partitionId}")
        t.setDaemon(true)
        t
      }
    }
  )
  // the tools read rarely and must prove content, not only transfer: SHA-256 too (verify restores snapshots)
  val files = new CheckpointFiles(blobs, ref.identity, pool, checkSha256OnDownload = true)

  def locate(name: String): String = blobs.locate(name)

  override def close(): Unit = pool.shutdownNow()
}

object ToolStore {
  def using[T](ref: StoreRef)(body: ToolStore => T): T = {
    val s = new ToolStore(ref)
    try body(s)
    finally s.close()
  }
}

/** A store's committed lineage as far as it can be known: the unique IDs Spark's commit log recorded, plus
  * the ancestors the delta headers of the newest one list (which reach further back than the commit log after
  * Spark purged it). `conflicts` lists disagreements between the two; clean-up refuses to run on them.
  * `freshStart`: the newest committed checkpoint whose delta starts from the empty state (a repartition); the
  * versions below it that the commit log names belong to the lineage before it.
  */
final case class CommittedLineage(
    head: Option[CheckpointId],
    committed: Map[Long, String],
    batchOf: Map[Long, Long],
    conflicts: Seq[String],
    errors: Seq[String],
    freshStart: Option[CheckpointId] = None
) {
  def isCommitted(id: CheckpointId): Boolean = committed.get(id.version).contains(id.uniqueId)

  /** committed: on the chosen lineage; pending: newer than the last committed batch (a batch in progress or
    * one that failed before Spark committed it); orphan: another attempt of a committed version; unknown:
    * below what the commit log and the remaining delta headers tell.
    */
  def status(id: CheckpointId): String =
    if (isCommitted(id)) "committed"
    else if (head.forall(h => id.version > h.version)) "pending"
    else if (committed.contains(id.version)) "orphan"
    else "unknown"

  /** Committed checkpoints, newest first. */
  def path: Seq[CheckpointId] =
    committed.toSeq.sortBy(-_._1).map { case (v, id) => CheckpointId(v, id) }
}

object CommittedLineage {

  def resolve(source: LineageSource, log: Seq[CommitLogEntry]): CommittedLineage = {
    val committed = mutable.Map.empty[Long, String]
    val batchOf = mutable.Map.empty[Long, Long]
    val conflicts = mutable.ArrayBuffer.empty[String]
    val errors = mutable.ArrayBuffer.empty[String]
    log.sortBy(_.batchId).foreach { e =>
      committed.get(e.id.version) match {
        case Some(other) if other != e.id.uniqueId =>
          conflicts += s"commit log batches ${batchOf(e.id.version)} and ${e.batchId} both name version " +
            s"${e.id.version} (unique IDs $other and ${e.id.uniqueId})"
        case _ =>
          committed(e.id.version) = e.id.uniqueId
          batchOf(e.id.version) = e.batchId
      }
    }
    val head = log.map(_.id).sortBy(_.version).lastOption
    var cursor = head
    var freshStart = Option.empty[CheckpointId]
    while (cursor.isDefined) {
      val c = cursor.get
      cursor = None
      Try(source.lineageOf(c)) match {
        case Success(Some(lineage)) =>
          if (lineage.fromEmpty) freshStart = Some(c) // its ancestors are empty: the walk ends here
          val ancestors = lineage.ancestors
          ancestors.foreach { a =>
            committed.get(a.version) match {
              case Some(u) if u != a.uniqueId =>
                conflicts += s"the commit log says version ${a.version} committed $u, but the lineage in " +
                  s"${c.deltaFileName} names ${a.uniqueId}"
              case Some(_) =>
              case None    => committed(a.version) = a.uniqueId
            }
          }
          ancestors.lastOption.filter(o => o.version < c.version && !o.isEmptyState).foreach { o =>
            cursor = Some(o)
          }
        case Success(None) => // cleaned (or a snapshot without its delta): the lineage is known down to here
        case Failure(e)    => errors += Option(e.getMessage).getOrElse(e.toString)
      }
    }
    CommittedLineage(head, committed.toMap, batchOf.toMap, conflicts.toSeq, errors.toSeq, freshStart)
  }
}

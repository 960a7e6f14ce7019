package io.lineagestore.tools

import java.io.File
import java.nio.file.Files
import java.util.UUID

import io.lineagestore.lineage.CheckpointId
import io.lineagestore.store.{ColumnFamilies, CrashPoints, LineageStore, LocalDirectories, StoreSettings}

/** Decides which new partition a state key belongs to. It must be exactly the partition Spark's shuffle sends
  * the key's rows to, or the restarted query looks the key up in another partition and its state silently
  * vanishes; the implementation therefore lives in the Spark glue and evaluates Spark's own partitioning
  * expression (`io.lineagestore.spark.SparkKeyPlacement`). `key` is the store's user key as the provider
  * wrote it.
  */
trait KeyPlacement {
  def partitions: Int
  def partitionOf(key: Array[Byte]): Int
}

/** What one store name of one operator had in each old partition: the committed checkpoint to read. */
final case class RepartitionSource(partitionId: Int, dir: String, committed: CheckpointId)

/** Rewrites one store name of one operator from its old partitions into `placement.partitions` new ones.
  *
  * Every new store starts from the empty state standing at `emptyVersion` (the committed version of the last
  * batch) and commits once, as checkpoint `emptyVersion + 1` with a fresh unique ID, writing its whole state
  * as one delta that starts from the empty state, plus a snapshot (the provider's own `loadEmpty` path, see
  * [[LineageStore.loadEmpty]]). Nothing already written is touched or deleted: the new files have new unique
  * IDs, so until Spark's commit log names them they are unreferenced (a crash leaves orphans for `gc`, never
  * a changed lineage), and a re-run writes another set.
  *
  * Only the default column family is moved; a store with others (transformWithState) is refused by name.
  */
object StoreRepartitioner {

  final case class Result(uniqueIds: Seq[String], rowsRead: Long, rowsPerPartition: Seq[Long])

  /** `newDir(p)` is the directory of new partition `p` (Spark's layout, the same operator). `crash` reaches
    * the new stores' commit and upload steps (the steps between Spark's files are the caller's).
    */
  def run(
      operatorId: Long,
      storeName: String,
      sources: Seq[RepartitionSource],
      newDir: Int => String,
      emptyVersion: Long,
      placement: KeyPlacement,
      crash: CrashPoints = CrashPoints.None,
      scratchRoot: File = new File(System.getProperty("java.io.tmpdir"))
  ): Result =
    write(operatorId, storeName, placement.partitions, newDir, emptyVersion, crash, scratchRoot) {
      (scratch, put) =>
        sources.foreach { src =>
          ToolStore.using(StoreRef(operatorId, src.partitionId, storeName, src.dir)) { tool =>
            val oldDir = new File(scratch, s"old-${src.partitionId}")
            val old = new LineageStore(tool.files, oldDir, StoreSettings.Default)
            try {
              old.load(src.committed)
              val others = old.columnFamilies.names - ColumnFamilies.DefaultName
              if (others.nonEmpty)
                throw new UnsupportedOperationException(
                  s"${tool.ref} has column families ${others.toSeq.sorted.mkString(", ")} " +
                    "(transformWithState): repartition moves only stores with the default family; keep the " +
                    "partition count of this query"
                )
              val cf = old.columnFamilies.idOf(ColumnFamilies.DefaultName).get
              val it = old.scan(cf, Array.emptyByteArray, null)
              try it.foreach { case (k, v) => put(placement.partitionOf(k), k, v) }
              finally it.close()
            } finally old.close()
            LocalDirectories.deleteRecursively(oldDir)
          }
        }
    }

  /** Opens one empty store per new partition (standing at `emptyVersion`), lets `feed` put every row with its
    * partition (it gets a scratch directory and the put), then commits each store once and uploads its
    * snapshot. The rewrite of a lineagestore checkpoint and the migration of another provider's share it.
    */
  def write(
      operatorId: Long,
      storeName: String,
      n: Int,
      newDir: Int => String,
      emptyVersion: Long,
      crash: CrashPoints,
      scratchRoot: File
  )(feed: (File, (Int, Array[Byte], Array[Byte]) => Unit) => Unit): Result = {
    require(n > 0, s"the new partition count must be positive, got $n")
    val scratch = Files.createTempDirectory(scratchRoot.toPath, "lineagestore-repartition-").toFile
    val targets = (0 until n).map { p =>
      val tool = new ToolStore(StoreRef(operatorId, p, storeName, newDir(p)))
      val store = new LineageStore(tool.files, new File(scratch, s"new-$p"), StoreSettings.Default, crash)
      store.loadEmpty(emptyVersion)
      (tool, store)
    }
    try {
      val counts = Array.fill(n)(0L)
      val cf = ColumnFamilies.DefaultId
      feed(
        scratch,
        (p, k, v) => {
          if (p < 0 || p >= n)
            throw new IllegalStateException(
              s"placement put a key of operator $operatorId store $storeName in partition $p of $n"
            )
          targets(p)._2.put(cf, k, v)
          counts(p) += 1
        }
      )
      val ids = targets.map { case (_, store) =>
        val id = store.commit(UUID.randomUUID().toString)
        // the fresh start froze a snapshot: upload it now, the store has no maintenance thread
        store.uploadSnapshots()
        id.uniqueId
      }
      Result(ids, counts.sum, counts.toSeq)
    } finally {
      targets.foreach { case (tool, store) =>
        try store.close()
        finally tool.close()
      }
      LocalDirectories.deleteRecursively(scratch)
    }
  }
}

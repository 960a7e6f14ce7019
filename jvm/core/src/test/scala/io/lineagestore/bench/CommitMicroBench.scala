package io.lineagestore.bench

import java.io.File
import java.nio.file.Files
import java.util.concurrent.Executors

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path

import io.lineagestore.config.LineageConf
import io.lineagestore.format.StoreIdentity
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.store.{CheckpointFiles, ColumnFamilies, LineageStore, LocalDirectories, StoreSettings}
import io.lineagestore.storage.HadoopBlobStore

/** Commit latency of one store on the local filesystem, without Spark: `keys` keys, `updates` of them
  * rewritten per batch, a snapshot frozen every `minDeltas` commits. Prints p50/p95/max of commit and of the
  * freezing commits alone. A measuring tool, not a test:
  * {{{
  *   dev/sbt "core/Test/runMain io.lineagestore.bench.CommitMicroBench 100000 10000 5 60"
  * }}}
  */
object CommitMicroBench {
  def main(args: Array[String]): Unit = {
    val Array(keys, updates, minDeltas, batches) = args.take(4).map(_.toInt).padTo(4, 0) match {
      case a if a.forall(_ > 0) => a
      case _                    => Array(100000, 10000, 5, 60)
    }
    val tmp = Files.createTempDirectory("ls-commit-bench").toFile
    val pool = Executors.newFixedThreadPool(4)
    val files = new CheckpointFiles(
      new HadoopBlobStore(
        new Path(new File(tmp, "remote").toURI),
        new Configuration(),
        LineageConf.DeltaUploadPartBytes.default
      ),
      StoreIdentity(0, 0, "default"),
      pool
    )
    val store =
      new LineageStore(
        files,
        new File(tmp, "local"),
        StoreSettings.Default.copy(minDeltasForSnapshot = minDeltas)
      )
    val rnd = new scala.util.Random(1)
    def value() = { val v = new Array[Byte](64); rnd.nextBytes(v); v }
    def key(i: Int) = java.nio.ByteBuffer.allocate(8).putInt(i).putInt(i * 7).array()
    try {
      store.load(CheckpointId.Empty)
      (0 until keys).foreach(i => store.put(ColumnFamilies.DefaultId, key(i), value()))
      store.commit()
      store.uploadSnapshots()
      val times = (1 to batches).map { _ =>
        (0 until updates).foreach(_ => store.put(ColumnFamilies.DefaultId, key(rnd.nextInt(keys)), value()))
        val before = store.frozenCount
        val t0 = System.nanoTime()
        store.commit()
        val ms = (System.nanoTime() - t0) / 1e6
        val froze = store.frozenCount > before
        store.uploadSnapshots() // maintenance, outside the timed part
        (ms, froze)
      }
      def pct(xs: Seq[Double], p: Double) = { val s = xs.sorted; s(math.min(s.size - 1, (p * s.size).toInt)) }
      val all = times.map(_._1)
      val frozen = times.filter(_._2).map(_._1)
      val plain = times.filterNot(_._2).map(_._1)
      println(f"commit ms: p50 ${pct(all, 0.5)}%.1f p95 ${pct(all, 0.95)}%.1f max ${all.max}%.1f")
      println(
        f"  freezing commits (${frozen.size}): p50 ${pct(frozen, 0.5)}%.1f; others: p50 ${pct(plain, 0.5)}%.1f"
      )
    } finally {
      store.close()
      pool.shutdownNow()
      LocalDirectories.deleteRecursively(tmp)
    }
  }
}

package io.lineagestore.bench

import java.io.File
import java.lang.management.ManagementFactory
import java.nio.file.Files
import java.util.concurrent.Executors

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path

import io.lineagestore.config.LineageConf
import io.lineagestore.format.StoreIdentity
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.store.{CheckpointFiles, ColumnFamilies, HashCache, LineageStore, LocalDirectories}
import io.lineagestore.store.StoreSettings
import io.lineagestore.storage.HadoopBlobStore

/** A first snapshot's upload without Spark: writes `keys` keys of `valueBytes` incompressible bytes into a
  * store, closes it, then uploads its RocksDB directory as a snapshot with no base (every SST new) `rounds`
  * times, each to a fresh directory of the local filesystem, and prints each upload's wall time and the
  * process's CPU time during it, and their medians. What it measures is the snapshot path's own cost per byte
  * of new SSTs (reading, checksumming, identifying, writing), which the grid's cells pay on the transfer pool
  * beside their batches. A measuring tool, not a test:
  * {{{
  *   dev/sbt "core/Test/runMain io.lineagestore.bench.UploadMicroBench 500000 1024 7"
  * }}}
  */
object UploadMicroBench {
  def main(args: Array[String]): Unit = {
    val keys = args.lift(0).map(_.toInt).getOrElse(500000)
    val valueBytes = args.lift(1).map(_.toInt).getOrElse(1024)
    val rounds = args.lift(2).map(_.toInt).getOrElse(7)
    val tmp = Files.createTempDirectory("ls-upload-bench").toFile
    val pool = Executors.newFixedThreadPool(2)
    def files(remote: File) =
      new CheckpointFiles(
        new HadoopBlobStore(
          new Path(remote.toURI),
          new Configuration(),
          LineageConf.DeltaUploadPartBytes.default
        ),
        StoreIdentity(0, 0, "default"),
        pool
      )
    val local = new File(tmp, "writer")
    val writer = new LineageStore(files(new File(tmp, "first")), local, StoreSettings.Default)
    val rnd = new scala.util.Random(1)
    try {
      writer.load(CheckpointId.Empty)
      (0 until keys).foreach { i =>
        val v = new Array[Byte](valueBytes); rnd.nextBytes(v)
        writer.put(ColumnFamilies.DefaultId, java.nio.ByteBuffer.allocate(4).putInt(i).array(), v)
        if (i % 100000 == 99999) writer.load(writer.commit())
      }
      writer.commit()
    } finally writer.close()
    val db = new File(local, "db")
    val sstBytes = db.listFiles().filter(_.getName.endsWith(".sst")).map(_.length()).sum
    val os = ManagementFactory.getOperatingSystemMXBean.asInstanceOf[com.sun.management.OperatingSystemMXBean]
    val runs = (1 to rounds).map { r =>
      val remote = new File(tmp, s"remote-$r")
      val cpu0 = os.getProcessCpuTime
      val t0 = System.nanoTime()
      files(remote).uploadSnapshot(CheckpointId(1, s"r$r"), Nil, db, None, new HashCache)
      val wallMs = (System.nanoTime() - t0) / 1e6
      val cpuMs = (os.getProcessCpuTime - cpu0) / 1e6
      LocalDirectories.deleteRecursively(remote)
      println(f"round $r: upload $wallMs%.0f ms wall, $cpuMs%.0f ms CPU")
      (wallMs, cpuMs)
    }
    def median(xs: Seq[Double]) = xs.sorted.apply(xs.size / 2)
    // the first rounds warm the JIT (SHA-256's intrinsic among it): the medians are of the rest
    val steady = runs.drop(math.min(2, rounds - 1))
    val mib = sstBytes / (1 << 20).toDouble
    println(
      f"SSTs $mib%.1f MiB; median of rounds ${rounds - steady.size + 1}-$rounds: " +
        f"${median(steady.map(_._1))}%.0f ms wall, ${median(steady.map(_._2))}%.0f ms CPU " +
        f"(${median(steady.map(_._2)) / mib}%.2f ms CPU per MiB)"
    )
    pool.shutdown()
    LocalDirectories.deleteRecursively(tmp)
  }
}

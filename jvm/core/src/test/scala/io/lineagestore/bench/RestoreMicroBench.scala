package io.lineagestore.bench

import java.io.File
import java.nio.file.Files
import java.time.Duration
import java.util.concurrent.Executors

import jdk.jfr.Recording
import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path

import io.lineagestore.config.LineageConf
import io.lineagestore.format.StoreIdentity
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.store.{CheckpointFiles, ColumnFamilies, LineageStore, LocalDirectories, StoreSettings}
import io.lineagestore.storage.HadoopBlobStore
import io.lineagestore.testing.S3TestServer

/** Cold restore of one store without Spark: writes `keys` keys of `valueBytes` incompressible bytes, uploads
  * a snapshot, then restores it `rounds` times into fresh local directories and prints each time and the
  * median. On the S3 test server when one is up (`python -m lineagestore.testing.with_s3 ...`), else on the
  * local filesystem. With a JFR file name as 5th argument the restores are recorded (CPU samples) for
  * `jfr print --events jdk.ExecutionSample`. A measuring tool, not a test:
  * {{{
  *   python -m lineagestore.testing.with_s3 dev/sbt \
  *     "core/Test/runMain io.lineagestore.bench.RestoreMicroBench 250000 1024 5 8388608 /tmp/restore.jfr"
  * }}}
  */
object RestoreMicroBench {
  def main(args: Array[String]): Unit = {
    val keys = args.lift(0).map(_.toInt).getOrElse(250000)
    val valueBytes = args.lift(1).map(_.toInt).getOrElse(1024)
    val rounds = args.lift(2).map(_.toInt).getOrElse(5)
    val partBytes = args.lift(3).map(_.toLong).getOrElse(8L << 20)
    val jfr = args.lift(4).filter(_ != "-")
    val streamType =
      args.lift(5) // s3a's input stream: analytics (hadoop-aws 3.5's default), classic, prefetch
    val tmp = Files.createTempDirectory("ls-restore-bench").toFile
    val (remote, conf) = S3TestServer.server match {
      case Right(s) =>
        val c = s.configuration
        streamType.foreach(t => c.set(s"fs.s3a.bucket.${s.bucket}.input.stream.type", t))
        (s.freshUri("restore-bench"), c)
      case Left(_) => (new File(tmp, "remote").toURI.toString, new Configuration())
    }
    val pool = Executors.newFixedThreadPool(8)
    def files() = new CheckpointFiles(
      new HadoopBlobStore(new Path(remote), conf, LineageConf.DeltaUploadPartBytes.default),
      StoreIdentity(0, 0, "default"),
      pool,
      io.lineagestore.snapshot.RangedDownload.withPartBytes(partBytes)
    )
    val settings = StoreSettings.Default.copy(maxPendingBytes = 4L << 30)
    val writer = new LineageStore(files(), new File(tmp, "writer"), settings)
    val rnd = new scala.util.Random(1)
    val head =
      try {
        writer.load(CheckpointId.Empty)
        (0 until keys).foreach { i =>
          val v = new Array[Byte](valueBytes); rnd.nextBytes(v)
          writer.put(ColumnFamilies.DefaultId, java.nio.ByteBuffer.allocate(4).putInt(i).array(), v)
        }
        val id = writer.commit()
        writer.freezeNow()
        writer.uploadSnapshots()
        id
      } finally writer.close()
    println(s"snapshot of $keys keys x $valueBytes B on $remote")
    val recording = jfr.map { _ =>
      val r = new Recording()
      r.enable("jdk.ExecutionSample").withPeriod(Duration.ofMillis(10))
      r.enable("jdk.NativeMethodSample").withPeriod(Duration.ofMillis(10))
      r
    }
    val times = (1 to rounds).map { round =>
      val local = new File(tmp, s"restore-$round")
      val store = new LineageStore(files(), local, settings)
      try {
        recording.foreach(r => if (round == 2) r.start()) // the first round warms the JIT
        val t0 = System.nanoTime()
        store.load(head)
        val ms = (System.nanoTime() - t0) / 1e6
        val mb = store.counters.bytesDownloaded.get / 1e6
        println(f"round $round: $ms%.0f ms, $mb%.0f MB, ${mb / ms * 1000}%.0f MB/s")
        ms
      } finally { store.close(); LocalDirectories.deleteRecursively(local) }
    }
    recording.foreach { r => r.stop(); r.dump(new File(jfr.get).toPath); r.close() }
    val sorted = times.drop(1).sorted
    println(f"median of rounds 2..$rounds: ${sorted(sorted.size / 2)}%.0f ms")
    pool.shutdown()
    LocalDirectories.deleteRecursively(tmp)
  }
}

package io.lineagestore.bench

import java.io.File
import java.nio.file.Files

import scala.util.Random

import io.lineagestore.engine.{LocalFiles, LocalRocksDb, RocksDbTuning}

/** One store's large first batch with and without spilling, without Spark: `keys` new keys of `valueBytes`
  * incompressible bytes, each read then written (streaming aggregation's pattern), then committed and
  * applied; once with a bound the batch fits in, once with `spillBound` (the batch spills about batch / bound
  * runs), alternating, `rounds` times each. Prints the write phase (reads, writes, spills), the commit to
  * applied, and their medians. A measuring tool, not a test:
  * {{{
  *   dev/sbt "core/Test/runMain io.lineagestore.bench.SpillMicroBench 250000 1024 67108864 3"
  * }}}
  */
object SpillMicroBench {
  def main(args: Array[String]): Unit = {
    val keys = args.lift(0).map(_.toInt).getOrElse(250000)
    val valueBytes = args.lift(1).map(_.toInt).getOrElse(1024)
    val spillBound = args.lift(2).map(_.toLong).getOrElse(64L << 20)
    val rounds = args.lift(3).map(_.toInt).getOrElse(3)
    val reads = !args.lift(4).contains("no-reads") // "no-reads": writes only (the spill's own cost)
    val rnd = new Random(1)
    val keyBytes = (0 until keys).map(i => f"key-${rnd.nextInt()}%011d-$i%08d".getBytes).toArray
    val value = new Array[Byte](valueBytes)
    val results =
      scala.collection.mutable.Map.empty[String, Vector[(Long, Long)]].withDefaultValue(Vector.empty)
    for (round <- 1 to rounds; (name, bound) <- Seq("in memory" -> (4L << 30), "spilling" -> spillBound)) {
      val root = Files.createTempDirectory("ls-spill-bench").toFile
      val db =
        new LocalRocksDb(new File(root, "db"), RocksDbTuning(512L << 20, 64L << 20), bound, "maxPendingBytes")
      try {
        val t0 = System.nanoTime()
        keyBytes.foreach { k =>
          rnd.nextBytes(value)
          if (reads) db.get(k)
          db.put(k, value.clone())
        }
        val runs = db.pending.spilledRuns
        val t1 = System.nanoTime()
        db.commit()
        val t2 = System.nanoTime()
        val (write, apply) = ((t1 - t0) / 1000000, (t2 - t1) / 1000000)
        results(name) :+= (write -> apply)
        println(s"round $round $name: $runs runs, writes $write ms, commit to applied $apply ms")
      } finally { db.close(); LocalFiles.deleteRecursively(root) }
    }
    def median(xs: Seq[Long]) = xs.sorted.apply(xs.size / 2)
    results.foreach { case (name, rs) =>
      println(
        s"median $name: writes ${median(rs.map(_._1))} ms, commit to applied ${median(rs.map(_._2))} ms"
      )
    }
  }
}

package io.lineagestore.engine

import java.io.File
import java.nio.file.Files

import scala.util.Random

import org.rocksdb.{Options, ReadOptions, SstFileReader}
import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.format.FamilyKeys

/** The one SST writer ([[SortedRunWriter]], over [[SstRunFile]]) and [[LocalRocksDb.ingest]], on a real
  * RocksDB: puts in random order over many runs come out as sorted, non-overlapping files holding every entry
  * once; ingested, they are the store's committed state (every family's keys, point reads and scans); a key
  * put twice is refused by name; and ingestion refuses a RocksDB that already holds state.
  */
class SortedRunsSuite extends AnyFunSuite {

  private def withDb(body: (LocalRocksDb, File) => Unit): Unit = {
    val root = Files.createTempDirectory("lineagestore-sorted").toFile
    val db = new LocalRocksDb(new File(root, "db"), RocksDbTuning(64L << 20, 4L << 20), 64L << 20, "test")
    try body(db, root)
    finally { db.close(); LocalFiles.deleteRecursively(root) }
  }

  private def entriesOf(file: File): Vector[(Seq[Byte], Seq[Byte])] = {
    val options = new Options()
    val reader = new SstFileReader(options)
    val ro = new ReadOptions()
    try {
      reader.open(file.getAbsolutePath)
      val it = reader.newIterator(ro)
      try {
        it.seekToFirst()
        val out = Vector.newBuilder[(Seq[Byte], Seq[Byte])]
        while (it.isValid) { out += ((it.key().toSeq, it.value().toSeq)); it.next() }
        out.result()
      } finally it.close()
    } finally { reader.close(); ro.close(); options.close() }
  }

  private def order(a: Seq[Byte], b: Seq[Byte]) = java.util.Arrays.compareUnsigned(a.toArray, b.toArray)

  /** (family, user key, value): keys of three families in random order, values of varying length. */
  private def randomState(n: Int, seed: Int): Vector[(Int, Array[Byte], Array[Byte])] = {
    val rnd = new Random(seed)
    rnd.shuffle((0 until n).toVector).map { i =>
      val family = 1 + i % 3
      val value = Array.fill(rnd.nextInt(200))(rnd.nextInt(256).toByte)
      (family, s"key-${rnd.nextInt(1000)}-$i".getBytes("UTF-8"), value)
    }
  }

  test("unsorted puts over many runs end as sorted, non-overlapping files holding every entry once") {
    withDb { (db, root) =>
      val state = randomState(20000, 1)
      val writer = db.sortedRunWriter(new File(root, "scratch"), bufferBytes = 200L << 10)
      val files =
        try {
          state.foreach { case (f, k, v) => writer.put(FamilyKeys.fullKey(f, k), v) }
          assert(writer.runCount >= 10, s"the test must spill several runs, got ${writer.runCount}")
          writer.finish()
        } finally writer.close()
      assert(files.nonEmpty)
      val perFile = files.map(entriesOf)
      perFile.foreach(es =>
        es.sliding(2).foreach {
          case Seq(a, b) => assert(order(a._1, b._1) < 0)
          case _         =>
        }
      )
      perFile.sliding(2).foreach {
        case Seq(a, b) if a.nonEmpty && b.nonEmpty => assert(order(a.last._1, b.head._1) < 0)
        case _                                     =>
      }
      val expected = state.map { case (f, k, v) => (FamilyKeys.fullKey(f, k).toSeq, v.toSeq) }.toMap
      val written = perFile.flatten
      assert(written.size == expected.size)
      assert(written.toMap == expected)
      // the runs are gone; only the output files are left in the scratch directory
      assert(new File(root, "scratch").listFiles().map(_.getName).toSet == files.map(_.getName).toSet)
    }
  }

  test("ingested files are the store's committed state: every family, point reads and scans") {
    withDb { (db, root) =>
      val state = randomState(5000, 2)
      val writer = db.sortedRunWriter(new File(root, "scratch"), bufferBytes = 64L << 10)
      val files =
        try { state.foreach { case (f, k, v) => writer.put(FamilyKeys.fullKey(f, k), v) }; writer.finish() }
        finally writer.close()
      db.ingest(files)
      assert(files.forall(!_.exists()), "ingestion moves the files into the RocksDB")
      state.foreach { case (f, k, v) => assert(db.get(FamilyKeys.fullKey(f, k)).toSeq == v.toSeq) }
      for (family <- 1 to 3) {
        val it = db.scan(FamilyKeys.prefix(family), FamilyKeys.prefix(family + 1))
        val scanned =
          try it.map { case (k, v) => (FamilyKeys.userKey(k).toSeq, v.toSeq) }.toVector
          finally it.close()
        val expected = state
          .filter(_._1 == family)
          .map(e => (e._2.toSeq, e._3.toSeq))
          .sortWith((a, b) => order(a._1, b._1) < 0)
        assert(scanned == expected)
      }
      // a commit on top of the ingested state works as on any other
      db.put(FamilyKeys.fullKey(1, "new".getBytes("UTF-8")), Array[Byte](7))
      db.commit()
      assert(db.get(FamilyKeys.fullKey(1, "new".getBytes("UTF-8"))).toSeq == Seq[Byte](7))
      // and the store holds every ingested key still, across a flush and checkpoint
      val cp = new File(root, "cp")
      db.checkpointTo(cp)
      assert(db.liveSstSizes.nonEmpty)
    }
  }

  test("a key put twice is refused by name, within one run and across runs") {
    withDb { (db, root) =>
      for (buffer <- Seq(1L << 20, 1L << 10)) {
        val writer = db.sortedRunWriter(new File(root, s"scratch-$buffer"), bufferBytes = buffer)
        try {
          (0 until 100).foreach(i => writer.put(s"k$i".getBytes("UTF-8"), Array[Byte](1)))
          writer.put("k42".getBytes("UTF-8"), Array[Byte](2))
          val e = intercept[IllegalArgumentException](writer.finish())
          assert(e.getMessage.contains("6b3432"), e.getMessage) // "k42" in hex
          assert(e.getMessage.contains("put twice"))
        } finally writer.close()
        assert(new File(root, s"scratch-$buffer").listFiles().isEmpty, "a failed write leaves no file")
      }
    }
  }

  test("nothing put gives no files; ingesting none leaves the store empty") {
    withDb { (db, root) =>
      val writer = db.sortedRunWriter(new File(root, "scratch"))
      val files =
        try writer.finish()
        finally writer.close()
      assert(files.isEmpty)
      db.ingest(files)
      val it = db.scan(Array.emptyByteArray, null)
      try assert(!it.hasNext)
      finally it.close()
    }
  }

  test("ingestion refuses a RocksDB that holds state or a batch in progress") {
    withDb { (db, root) =>
      val writer = db.sortedRunWriter(new File(root, "scratch"))
      val files =
        try { writer.put("a".getBytes("UTF-8"), Array[Byte](1)); writer.finish() }
        finally writer.close()
      db.put("b".getBytes("UTF-8"), Array[Byte](2))
      assert(intercept[IllegalStateException](db.ingest(files)).getMessage.contains("batch in progress"))
      db.commit()
      assert(intercept[IllegalStateException](db.ingest(files)).getMessage.contains("already holds state"))
      assert(db.get("a".getBytes("UTF-8")) == null)
    }
  }
}

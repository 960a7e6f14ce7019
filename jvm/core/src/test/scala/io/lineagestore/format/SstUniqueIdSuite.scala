package io.lineagestore.format

import java.io.File
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files

import org.rocksdb.{BlockBasedTableConfig, EnvOptions, FlushOptions, Options, RocksDB, SstFileWriter}
import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.testing.TempDirs

/** The SST IDs read from files a real RocksDB writes, at the format version Spark's provider writes (5) and
  * RocksDB's default here (6), against what RocksDB itself knows of them: the file number in the name, the
  * DB's IDENTITY file, a new session at each open.
  */
class SstUniqueIdSuite extends AnyFunSuite {
  RocksDB.loadLibrary()

  private def sstFiles(dir: File): Seq[File] =
    dir.listFiles().filter(_.getName.endsWith(".sst")).sortBy(_.getName).toSeq

  /** Opens a DB in `dir` at `formatVersion` twice, flushing two files in the first open and one in the
    * second.
    */
  private def writeTwoSessions(dir: File, formatVersion: Int): Unit =
    for (open <- 1 to 2) {
      val options = new Options()
        .setCreateIfMissing(true)
        .setTableFormatConfig(new BlockBasedTableConfig().setFormatVersion(formatVersion))
      val db = RocksDB.open(options, dir.getPath)
      try
        for (flush <- 1 to (if (open == 1) 2 else 1)) {
          (0 until 500)
            .foreach(i => db.put(s"k-$open-$flush-$i".getBytes(UTF_8), ("v" * 100).getBytes(UTF_8)))
          val f = new FlushOptions().setWaitForFlush(true)
          try db.flush(f)
          finally f.close()
        }
      finally { db.close(); options.close() }
    }

  for (formatVersion <- Seq(5, 6)) {
    test(s"the ID of each file names its DB, its session and its number (format version $formatVersion)") {
      val dir = TempDirs.create("lineagestore-sst-id")
      writeTwoSessions(dir, formatVersion)
      val files = sstFiles(dir)
      assert(files.size == 3, files)
      val ids = files.map(f => SstUniqueId.read(f).getOrElse(fail(s"no ID read from ${f.getName}")))
      val identity = new String(Files.readAllBytes(new File(dir, "IDENTITY").toPath), UTF_8).trim
      assert(ids.forall(_.dbId == identity))
      assert(ids.map(_.fileNumber) == files.map(_.getName.stripSuffix(".sst").toLong))
      // two flushes of one open share its session; the second open has another
      assert(ids(0).sessionId == ids(1).sessionId && ids(1).sessionId != ids(2).sessionId, ids)
      // the same bytes elsewhere: the same ID
      val copy = new File(TempDirs.create("lineagestore-sst-copy"), "000099.sst")
      Files.copy(files.head.toPath, copy.toPath)
      assert(SstUniqueId.read(copy) == Some(ids.head))
    }
  }

  test("a damaged or cut tail gives no ID or the true one, never another; a file not an SST gives none") {
    val dir = TempDirs.create("lineagestore-sst-id")
    writeTwoSessions(dir, 6)
    val file = sstFiles(dir).head
    val good = Files.readAllBytes(file.toPath)
    val id = SstUniqueId.read(file).get
    def idOf(bytes: Array[Byte]): Option[SstUniqueId] =
      SstUniqueId.parse(bytes.length, (offset, length) => bytes.slice(offset.toInt, offset.toInt + length))
    assert(idOf(good) == Some(id))
    // every cut of the last 4 KiB (the footer moves onto other bytes)
    for (n <- good.length - 4096 until good.length)
      assert(idOf(good.take(n)).isEmpty, s"cut at $n")
    // every byte of the footer and of the metaindex block and its trailer before it (format version 6: the
    // footer gives the metaindex's size, little-endian at its byte 13)
    val footer = good.takeRight(53)
    val metaindexSize = (0 until 4).map(i => (footer(13 + i) & 0xff) << (8 * i)).sum
    for (i <- good.length - 53 - 5 - metaindexSize until good.length) {
      val bad = good.clone()
      bad(i) = (bad(i) ^ 0x5a).toByte
      val got = idOf(bad)
      assert(got.isEmpty || got.contains(id), s"byte $i: $got")
    }
    val delta = new File(dir, "not-an-sst")
    Files.write(delta.toPath, ("x" * 5000).getBytes(UTF_8))
    assert(SstUniqueId.read(delta).isEmpty)
    assert(idOf(Array.emptyByteArray).isEmpty)
  }

  test("files of an SstFileWriter, written outside a DB's numbering, give no ID or distinct ones") {
    val dir = TempDirs.create("lineagestore-sst-writer")
    val options = new Options()
    val env = new EnvOptions()
    val written = (1 to 2).map { n =>
      val f = new File(dir, s"ingest-$n.sst")
      val w = new SstFileWriter(env, options)
      try {
        w.open(f.getPath)
        (0 until 100).foreach(i => w.put(f"k-$i%04d".getBytes(UTF_8), s"v-$n".getBytes(UTF_8)))
        w.finish()
      } finally w.close()
      SstUniqueId.read(f)
    }
    env.close(); options.close()
    assert(written.flatten.distinct.size == written.flatten.size, written)
  }
}

package io.lineagestore.engine

import java.nio.charset.StandardCharsets.UTF_8

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.config.{InvalidConfigException, LineageConf}
import io.lineagestore.store.StoreSettings
import io.lineagestore.testing.TempDirs

/** `sstCompression` reaches the SST files a real RocksDB writes, and a change of it leaves the files written
  * before readable.
  */
class SstCompressionSuite extends AnyFunSuite {

  private def withDb[T](dir: java.io.File, compression: String)(body: LocalRocksDb => T): T = {
    val db = new LocalRocksDb(dir, RocksDbTuning(64L << 20, 1L << 20, compression), Long.MaxValue, "k")
    try body(db)
    finally db.close()
  }

  // compressible values, so that every codec but none compresses the blocks it writes
  private def value(i: Int): Array[Byte] = (s"value-$i-" * 20).getBytes(UTF_8)
  private def key(i: Int): Array[Byte] = f"k-$i%06d".getBytes(UTF_8)

  private def writeAndFlush(db: LocalRocksDb, keys: Range): Unit = {
    keys.foreach(i => db.put(key(i), value(i)))
    db.commit()
    db.flush()
  }

  /** The compression each live SST file records in its table properties. */
  private def compressions(db: LocalRocksDb): Set[String] =
    db.sstTableProperties.values.map(_.getCompressionName).toSet

  test("the default is Spark's provider's choice, LZ4, and settings take it from LineageConf") {
    assert(StoreSettings.Default.tuning.sstCompression == "lz4")
    assert(RocksDbTuning(64L << 20, 1L << 20).sstCompression == LineageConf.SstCompression.default)
    val chosen = StoreSettings.from(Map(LineageConf.SstCompression.key -> " ZSTD "))
    assert(chosen.tuning.sstCompression == "zstd")
  }

  test("a value it does not know is refused naming the key and the choices") {
    val e =
      intercept[InvalidConfigException](StoreSettings.from(Map(LineageConf.SstCompression.key -> "lzo")))
    assert(e.getMessage.contains(LineageConf.SstCompression.key))
    assert(e.getMessage.contains("lzo"))
    LineageConf.SstCompression.choices.foreach(n => assert(e.getMessage.contains(n)))
  }

  test("each choice the configuration declares is the compression of the SST files a flush writes") {
    val expected = Map("lz4" -> "LZ4", "snappy" -> "Snappy", "zstd" -> "ZSTD", "none" -> "NoCompression")
    assert(expected.keySet == LineageConf.SstCompression.choices.toSet)
    for ((name, recorded) <- expected) {
      val dir = TempDirs.create(s"lineagestore-sst-$name")
      withDb(dir, name) { db =>
        writeAndFlush(db, 0 until 2000)
        assert(compressions(db) == Set(recorded), name)
      }
    }
  }

  test(
    "files written under another compression stay readable after a change, and new files take the new one"
  ) {
    val dir = TempDirs.create("lineagestore-sst-change")
    withDb(dir, "snappy")(db => writeAndFlush(db, 0 until 1000))
    withDb(dir, "lz4") { db =>
      assert(compressions(db) == Set("Snappy"))
      writeAndFlush(db, 1000 until 2000)
      assert(compressions(db) == Set("Snappy", "LZ4"))
      (0 until 2000).foreach(i => assert(db.get(key(i)).sameElements(value(i)), s"key $i"))
    }
  }
}

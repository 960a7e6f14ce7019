package io.lineagestore.spark

import java.io.File

import org.apache.spark.sql.catalyst.expressions.{GenericInternalRow, UnsafeProjection}
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String

/** Regression tests for provider bugs found by the conformance work; each comment names the cause that was
  * fixed.
  */
class LineageStateStoreProviderRegressionSuite extends ProviderTestSupport {

  private def filesUnder(f: File): Seq[String] =
    Option(f.listFiles()).getOrElse(Array.empty[File]).toSeq.flatMap { c =>
      if (c.isDirectory) filesUnder(c) else Seq(c.getPath)
    }

  // Cause: LineageStore.close() closes RocksDB and deletes only <localRoot>/frozen; <localRoot>/db stays, and
  // LineageStateStoreProvider.close() did not delete localRoot (<localDir>/lineagestore/<uuid>). Every
  // provider got a fresh random localRoot, so nothing ever reused or removed it. Now a store's directory is
  // either kept for the next provider of the same store (bounded by localRetentionMs, evicted when idle) or,
  // with retention 0, deleted on close.
  test("with localRetentionMs=0, closing the provider removes its local RocksDB directory") {
    val p =
      newProvider(conf = storeConf("spark.sql.streaming.stateStore.lineagestore.localRetentionMs" -> "0"))
    val c = batch(p, Empty)(s => (1 to 100).foreach(i => put(s, s"k$i", i)))
    batch(p, c)(s => put(s, "a", 1))
    assert(filesUnder(localDir).nonEmpty)
    closeProvider(p)
    val left = filesUnder(localDir)
    assert(left.size === 0, s"files left behind after close, e.g. ${left.take(3).mkString(", ")}")
  }

  test("a closed provider's directory is reused by the next provider of the same store, which resumes warm") {
    val keep = storeConf(LocalRetentionKey -> "3600000")
    val p = newProvider(conf = keep)
    val c1 = batch(p, Empty)(s => (1 to 100).foreach(i => put(s, s"k$i", i)))
    val c2 = batch(p, c1)(s => put(s, "a", 1))
    val expected = readAt(p, c2)
    closeProvider(p)
    val dirs = new File(localDir, "lineagestore/stores").listFiles().filter(_.isDirectory)
    assert(dirs.length === 1, "one kept directory for the one store")
    val again = newProvider(conf = keep)
    assert(readAt(again, c2) === expected)
    val counters = again.lineageStore.counters
    assert(counters.bytesDownloaded.get === 0 && counters.deltasReplayed.get === 0, "resumed, nothing read")
    // a provider of the same store while this one is open gets a private directory (never shares one)
    val concurrent = newProvider(conf = keep)
    assert(readAt(concurrent, c2) === expected)
    assert(concurrent.lineageStore.counters.bytesDownloaded.get > 0)
  }

  // Cause: LineageStateStoreProvider.registerColumnFamily uses encoders.getOrElseUpdate(name, ...), and
  // LineageStateStore.removeColFamilyIfExists never drops the family's entry from `encoders`. A family removed
  // and created again with another schema keeps encoding and decoding with the first schema's encoders.
  test("a column family removed and created again uses the new value schema") {
    val p = newProvider(useColumnFamilies = true)
    val wide = new StructType().add("s", StringType).add("n", LongType)
    val wideProj = UnsafeProjection.create(wide)
    val c1 = batch(p, Empty) { s =>
      s.createColFamilyIfAbsent("cf", keySchema, valueSchema, noPrefix, false, false)
      put(s, "a", 1, cf = "cf")
    }
    batch(p, c1) { s =>
      s.createColFamilyIfAbsent("cf", keySchema, valueSchema, noPrefix, false, false)
      assert(s.removeColFamilyIfExists("cf"))
      s.createColFamilyIfAbsent("cf", keySchema, wide, noPrefix, false, false)
      s.put(
        keyRow("b"),
        wideProj(new GenericInternalRow(Array[Any](UTF8String.fromString("x"), 42L))).copy(),
        "cf"
      )
      val got = s.get(keyRow("b"), "cf")
      assert(got.numFields() === 2, "decoded with the removed family's one-field value schema")
      assert(got.getUTF8String(0).toString === "x")
      assert(got.getLong(1) === 42L)
    }
  }
}

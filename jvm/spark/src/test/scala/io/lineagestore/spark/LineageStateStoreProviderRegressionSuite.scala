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
  // LineageStateStoreProvider.close() does not delete localRoot (<localDir>/lineagestore/<uuid>). Every
  // provider gets a fresh random localRoot, so nothing ever reuses or removes it: each unload, query restart
  // or partition move leaves a full RocksDB copy on the executor's disk.
  test("closing the provider removes its local RocksDB directory") {
    val p = newProvider()
    val c = batch(p, Empty)(s => (1 to 100).foreach(i => put(s, s"k$i", i)))
    batch(p, c)(s => put(s, "a", 1))
    assert(filesUnder(localDir).nonEmpty)
    closeProvider(p)
    val left = filesUnder(localDir)
    assert(left.size === 0, s"files left behind after close, e.g. ${left.take(3).mkString(", ")}")
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

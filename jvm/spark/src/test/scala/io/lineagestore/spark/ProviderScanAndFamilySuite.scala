package io.lineagestore.spark

import java.io.{File, RandomAccessFile}
import java.util.UUID
import java.util.concurrent.atomic.AtomicReference
import java.util.zip.ZipFile

import scala.io.Source
import scala.util.Random

import org.apache.spark.sql.catalyst.expressions.{GenericInternalRow, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String

/** Conformance of [[LineageStateStoreProvider]] (continued): prefix and range scans, column families. */
class ProviderScanAndFamilySuite extends ProviderTestSupport {

  private val Default = StateStore.DEFAULT_COL_FAMILY_NAME

  // ---- prefix and range scans ----------------------------------------------------------------------------

  private val prefixSchema = new StructType().add("key", StringType)
  private val prefixProj = UnsafeProjection.create(prefixSchema)
  private def prefixRow(k: String): UnsafeRow =
    prefixProj(new GenericInternalRow(Array[Any](UTF8String.fromString(k)))).copy()
  private def scanned(it: StateStoreIterator[UnsafeRowPair]): Seq[((String, Int), Int)] =
    try it.map(p => keyOf(p.key) -> valueOf(p.value)).toList
    finally it.close()

  test("prefixScan returns exactly the keys with the prefix, committed and uncommitted") {
    val spec = PrefixKeyScanStateEncoderSpec(keySchema, 1)
    val p = newProvider(spec = spec)
    val c1 = batch(p, Empty) { s =>
      (0 until 5).foreach(i => put(s, "k1", i, p = i))
      (0 until 3).foreach(i => put(s, "k2", 10 + i, p = i))
      put(s, "k10", 100, p = 0) // longer string with the same leading characters
      put(s, "k", 200, p = 0)
    }
    val c2 = batch(p, c1) { s =>
      put(s, "k1", 50, p = 5) // uncommitted insert
      remove(s, "k1", p = 0) // uncommitted delete
      put(s, "k1", 51, p = 1) // uncommitted update
      assert(
        scanned(s.prefixScan(prefixRow("k1"), Default)).toMap ===
          Map(("k1", 1) -> 51, ("k1", 2) -> 2, ("k1", 3) -> 3, ("k1", 4) -> 4, ("k1", 5) -> 50)
      )
      assert(
        scanned(s.prefixScan(prefixRow("k2"), Default)).toMap === (0 until 3)
          .map(i => ("k2", i) -> (10 + i))
          .toMap
      )
      assert(scanned(s.prefixScan(prefixRow("k10"), Default)) === Seq(("k10", 0) -> 100))
      assert(scanned(s.prefixScan(prefixRow("nope"), Default)).isEmpty)
    }
    closeProvider(p)
    val q = newProvider(spec = spec)
    val r = q.getReadStore(c2.version, c2.id)
    try {
      assert(scanned(r.prefixScan(prefixRow("k1"), Default)).map(_._1._2).toSet === Set(1, 2, 3, 4, 5))
      assert(scanned(r.prefixScan(prefixRow("k"), Default)) === Seq(("k", 0) -> 200))
      assert(data(r).size === 5 + 3 + 2)
    } finally r.release()
  }

  private val intRangeSchema = new StructType().add("num", IntegerType).add("name", StringType)
  private val intRangeProj = UnsafeProjection.create(intRangeSchema)
  private def intKey(n: Int, name: String = "x"): UnsafeRow =
    intRangeProj(new GenericInternalRow(Array[Any](n, UTF8String.fromString(name)))).copy()

  test("rangeScan over an int ordering column, negatives included, matches Scala's ordering") {
    val spec = RangeKeyScanStateEncoderSpec(intRangeSchema, Seq(0))
    val rnd = new Random(11)
    val special =
      Seq(Int.MinValue, Int.MinValue + 1, -256, -255, -1, 0, 1, 255, 256, Int.MaxValue - 1, Int.MaxValue)
    val committed = (special ++ Seq.fill(150)(rnd.nextInt())).distinct
    val pending = Seq.fill(40)(rnd.nextInt(2000) - 1000).distinct.filterNot(committed.contains)
    val p = newProvider(spec = spec)
    val c1 = batch(p, Empty)(s => committed.foreach(n => s.put(intKey(n), valueRow(n / 2), Default)))
    def nums(it: StateStoreIterator[UnsafeRowPair]): Seq[Int] =
      try it.map(_.key.getInt(0)).toList
      finally it.close()

    val s = p.getStore(1, c1.id)
    pending.foreach(n => s.put(intKey(n), valueRow(n), Default))
    val removed = committed.take(10)
    removed.foreach(n => s.remove(intKey(n), Default))
    val all = ((committed ++ pending).toSet -- removed).toSeq.sorted
    assert(nums(s.iterator(Default)) === all)
    assert(nums(s.rangeScan(None, None, Default)) === all)
    assert(
      nums(s.rangeScan(Some(intKey(-100)), Some(intKey(100)), Default)) === all.filter(n =>
        n >= -100 && n < 100
      )
    )
    assert(nums(s.rangeScan(Some(intKey(0)), None, Default)) === all.filter(_ >= 0))
    assert(nums(s.rangeScan(None, Some(intKey(0)), Default)) === all.filter(_ < 0))
    s.commit()
    val c2 = Ckpt(2, s.getStateStoreCheckpointInfo().stateStoreCkptId)
    closeProvider(p)
    val r = newProvider(spec = spec).getReadStore(2, c2.id)
    try {
      assert(nums(r.iterator(Default)) === all)
      assert(
        nums(r.rangeScan(Some(intKey(-1)), Some(intKey(2)), Default)) === all.filter(n => n >= -1 && n < 2)
      )
    } finally r.release()
  }

  test("rangeScan over long and int ordering columns matches Scala's ordering of the tuples") {
    val schema = new StructType().add("ts", LongType).add("seq", IntegerType).add("name", StringType)
    val proj = UnsafeProjection.create(schema)
    def k(ts: Long, seq: Int, name: String = "n"): UnsafeRow =
      proj(new GenericInternalRow(Array[Any](ts, seq, UTF8String.fromString(name)))).copy()
    val spec = RangeKeyScanStateEncoderSpec(schema, Seq(0, 1))
    val rnd = new Random(13)
    val longs = Seq(Long.MinValue, Long.MinValue + 1, -1L << 40, -1L, 0L, 1L, 1L << 40, Long.MaxValue) ++
      Seq.fill(60)(rnd.nextLong()) ++ Seq.fill(30)(rnd.nextInt(100).toLong - 50)
    val keys = longs.flatMap(ts => Seq(-3, 0, 7).map(seq => (ts, seq))).distinct
    val p = newProvider(spec = spec)
    val c1 = batch(p, Empty) { s =>
      rnd.shuffle(keys).foreach { case (ts, seq) => s.put(k(ts, seq, s"$ts/$seq"), valueRow(seq), Default) }
    }
    val r = p.getReadStore(1, c1.id)
    try {
      def tuples(it: StateStoreIterator[UnsafeRowPair]): Seq[(Long, Int)] =
        try it.map(pr => (pr.key.getLong(0), pr.key.getInt(1))).toList
        finally it.close()
      assert(tuples(r.iterator(Default)) === keys.sorted)
      val out = tuples(r.rangeScan(Some(k(-50, 0)), Some(k(1, 0)), Default))
      assert(
        out === keys.sorted.filter(t =>
          Ordering[(Long, Int)].gteq(t, (-50L, 0)) && Ordering[(Long, Int)].lt(t, (1L, 0))
        )
      )
      // the non-ordering column decodes back intact
      val it = r.iterator(Default)
      try
        it.foreach(pr =>
          assert(pr.key.getUTF8String(2).toString === s"${pr.key.getLong(0)}/${pr.key.getInt(1)}")
        )
      finally it.close()
    } finally r.release()
  }

  test("deleteRange removes [begin, end) only, and the deletion is committed") {
    val spec = RangeKeyScanStateEncoderSpec(intRangeSchema, Seq(0))
    val p = newProvider(spec = spec)
    val nums = (-20 to 20).toList
    val c1 = batch(p, Empty)(s => nums.foreach(n => s.put(intKey(n), valueRow(n), Default)))
    val c2 = batch(p, c1) { s =>
      s.put(intKey(100), valueRow(100), Default) // uncommitted key outside the range
      s.put(intKey(3, "y"), valueRow(3), Default) // uncommitted key inside it
      s.deleteRange(intKey(-5), intKey(10), Default)
      val left = {
        val it = s.iterator(Default)
        try it.map(_.key.getInt(0)).toList
        finally it.close()
      }
      assert(left === nums.filter(n => n < -5 || n >= 10) :+ 100)
    }
    val r = p.getReadStore(1, c1.id)
    intercept[IllegalStateException](r.asInstanceOf[StateStore].deleteRange(intKey(0), intKey(1), Default))
    r.release()
    closeProvider(p)
    val t = newProvider(spec = spec).getReadStore(2, c2.id)
    val left = {
      val it = t.iterator(Default)
      try it.map(_.key.getInt(0)).toList
      finally it.close()
    }
    t.release()
    assert(left === nums.filter(n => n < -5 || n >= 10) :+ 100)
  }

  // ---- column families -----------------------------------------------------------------------------------

  test("column families: create, list, isolate data, survive reload, remove") {
    val p = newCfProvider()
    val c1 = batch(p, Empty) { s =>
      createCf(s, "cf1")
      createCf(s, "cf2")
      createCf(s, "cf1") // if absent: a second call is a no-op
      assert(s.allColumnFamilyNames === Set(Default, "cf1", "cf2"))
      put(s, "a", 1)
      put(s, "a", 10, cf = "cf1")
      put(s, "b", 20, cf = "cf1")
      put(s, "a", 100, cf = "cf2")
      remove(s, "a", cf = "cf2")
      assert(get(s, "a") === Some(1))
      assert(get(s, "a", cf = "cf1") === Some(10))
      assert(get(s, "a", cf = "cf2") === None)
      assert(data(s) === Map(("a", 0) -> 1))
      assert(data(s, "cf1") === Map(("a", 0) -> 10, ("b", 0) -> 20))
      assert(data(s, "cf2") === Map.empty)
    }
    val unknown = intercept[Exception](p.getStore(1, c1.id).get(keyRow("a"), "nope"))
    assert(unknown.getMessage.contains("nope"), unknown.getMessage)
    closeProvider(p)

    val q = newCfProvider()
    val c2 = batch(q, c1) { s =>
      assert(s.allColumnFamilyNames === Set(Default, "cf1", "cf2"))
      createCf(s, "cf1") // operators register their families on every batch
      createCf(s, "cf2")
      assert(data(s, "cf1") === Map(("a", 0) -> 10, ("b", 0) -> 20))
      put(s, "c", 30, cf = "cf2")
      intercept[Exception](s.removeColFamilyIfExists(Default))
      assert(s.removeColFamilyIfExists("cf1"))
      assert(!s.removeColFamilyIfExists("cf1"))
      assert(s.allColumnFamilyNames === Set(Default, "cf2"))
      assert(data(s) === Map(("a", 0) -> 1))
    }
    closeProvider(q)

    val r = newCfProvider()
    val c3 = batch(r, c2) { s =>
      assert(s.allColumnFamilyNames === Set(Default, "cf2"))
      createCf(s, "cf2")
      assert(data(s, "cf2") === Map(("c", 0) -> 30))
      createCf(s, "cf1") // the same name again: a new, empty family
      assert(data(s, "cf1") === Map.empty)
      assert(get(s, "a", cf = "cf1") === None)
      put(s, "z", 1, cf = "cf1")
    }
    assert(readAt(r, c1, "cf1") === Map(("a", 0) -> 10, ("b", 0) -> 20)) // old versions keep theirs
    closeProvider(r)
    val last = newCfProvider()
    val s = last.getReadStore(3, c3.id)
    try {
      s.registerColFamily("cf1", keySchema, valueSchema, noPrefix, false, false)
      assert(data(s, "cf1") === Map(("z", 0) -> 1))
    } finally s.release()
  }

  test("a family created in an aborted batch does not exist afterwards") {
    val p = newCfProvider()
    val c1 = batch(p, Empty)(s => createCf(s, "kept"))
    val s = p.getStore(1, c1.id)
    createCf(s, "dropped")
    put(s, "a", 1, cf = "dropped")
    s.abort()
    val c2 = batch(p, c1)(s => assert(s.allColumnFamilyNames === Set(Default, "kept")))
    closeProvider(p)
    val q = newCfProvider()
    val r = q.getReadStore(2, c2.id)
    try assert(r.allColumnFamilyNames === Set(Default, "kept"))
    finally r.release()
  }

  test("multiple values per key: merge, mergeList, putList, valuesIterator, iteratorWithMultiValues") {
    def values(s: ReadStateStore, k: String, cf: String = "list"): Seq[Int] =
      s.valuesIterator(keyRow(k), cf).map(valueOf).toList
    val p = newCfProvider()
    val c1 = batch(p, Empty) { s =>
      createCf(s, "list", multi = true)
      s.merge(keyRow("a"), valueRow(1), "list")
      s.merge(keyRow("a"), valueRow(2), "list")
      s.mergeList(keyRow("a"), Array(valueRow(3), valueRow(4)), "list")
      s.putList(keyRow("b"), Array(valueRow(7), valueRow(8)), "list")
      s.putList(keyRow("b"), Array(valueRow(9)), "list") // putList replaces
      s.mergeList(keyRow("c"), Array(valueRow(5)), "list")
      s.merge(keyRow("d"), valueRow(-1), "list")
      s.remove(keyRow("d"), "list")
      assert(values(s, "a") === Seq(1, 2, 3, 4))
      assert(values(s, "b") === Seq(9))
      assert(values(s, "c") === Seq(5))
      assert(values(s, "d").isEmpty)
      assert(values(s, "missing").isEmpty)
    }
    def pairs(s: ReadStateStore): Set[(String, Int)] = {
      val it = s.iteratorWithMultiValues("list")
      try it.map(pr => (keyOf(pr.key)._1, valueOf(pr.value))).toList.toSet
      finally it.close()
    }
    val expected = Set("a" -> 1, "a" -> 2, "a" -> 3, "a" -> 4, "b" -> 9, "c" -> 5)
    val c2 = batch(p, c1) { s =>
      createCf(s, "list", multi = true)
      assert(pairs(s) === expected)
      s.merge(keyRow("b"), valueRow(10), "list") // merging onto a committed list
    }
    closeProvider(p)
    val q = newCfProvider()
    val r = q.getReadStore(2, c2.id)
    try {
      r.registerColFamily("list", keySchema, valueSchema, noPrefix, true, false)
      assert(values(r, "a") === Seq(1, 2, 3, 4))
      assert(values(r, "b") === Seq(9, 10))
      assert(pairs(r) === expected + ("b" -> 10))
    } finally r.release()
  }

  test("prefixScanWithMultiValues on a multi-valued family with a prefix encoder") {
    val spec = PrefixKeyScanStateEncoderSpec(keySchema, 1)
    val p = newCfProvider()
    def create(s: ReadStateStore): Unit = s match {
      case w: StateStore => w.createColFamilyIfAbsent("plist", keySchema, valueSchema, spec, true, false)
      case r             => r.registerColFamily("plist", keySchema, valueSchema, spec, true, false)
    }
    def scan(s: ReadStateStore, prefix: String): Set[((String, Int), Int)] = {
      val it = s.prefixScanWithMultiValues(prefixRow(prefix), "plist")
      try it.map(pr => keyOf(pr.key) -> valueOf(pr.value)).toList.toSet
      finally it.close()
    }
    val c1 = batch(p, Empty) { s =>
      create(s)
      s.mergeList(keyRow("u1", 1), Array(valueRow(1), valueRow(2)), "plist")
      s.merge(keyRow("u1", 2), valueRow(3), "plist")
      s.merge(keyRow("u10", 1), valueRow(9), "plist")
      assert(scan(s, "u1") === Set(("u1", 1) -> 1, ("u1", 1) -> 2, ("u1", 2) -> 3))
    }
    closeProvider(p)
    val r = newCfProvider().getReadStore(1, c1.id)
    try {
      create(r)
      assert(scan(r, "u1") === Set(("u1", 1) -> 1, ("u1", 1) -> 2, ("u1", 2) -> 3))
      assert(scan(r, "u10") === Set(("u10", 1) -> 9))
    } finally r.release()
  }

  test("multiple values per key on the default family (provider initialised with it)") {
    val p = newProvider(multipleValues = true)
    val c1 = batch(p, Empty) { s =>
      s.merge(keyRow("a"), valueRow(1), Default)
      s.merge(keyRow("a"), valueRow(2), Default)
    }
    closeProvider(p)
    val r = newProvider(multipleValues = true).getReadStore(1, c1.id)
    try assert(r.valuesIterator(keyRow("a"), Default).map(valueOf).toList === List(1, 2))
    finally r.release()
  }

  test("merge on a family without multiple values fails") {
    val p = newCfProvider()
    val s = p.getStore(0, None)
    createCf(s, "single")
    intercept[UnsupportedOperationException](s.merge(keyRow("a"), valueRow(1), "single"))
    s.abort()
  }
}

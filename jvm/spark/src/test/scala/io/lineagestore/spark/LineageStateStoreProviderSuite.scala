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

/** Conformance of [[LineageStateStoreProvider]] to what Spark's operators and driver expect of a state store
  * provider with checkpoint format version 2; the behaviours Spark's own StateStoreSuiteBase and
  * RocksDBStateStoreSuite check, written against our provider.
  */
class LineageStateStoreProviderSuite extends ProviderTestSupport {

  private val Default = StateStore.DEFAULT_COL_FAMILY_NAME

  // ---- factory, configuration ---------------------------------------------------------------------------

  test("Spark's createAndInit builds and initialises the provider named by providerClass") {
    val p = StateStoreProvider.createAndInit(
      StateStoreProviderId(storeId(), UUID.randomUUID()),
      keySchema,
      valueSchema,
      noPrefix,
      false,
      storeConf(),
      hadoopConf(),
      false,
      None
    )
    try {
      assert(p.isInstanceOf[LineageStateStoreProvider])
      assert(p.stateStoreId === storeId())
      val c = batch(p, Empty)(s => put(s, "a", 1))
      assert(readAt(p, c) === Map(("a", 0) -> 1))
    } finally p.close()
  }

  test("checkpointFormatVersion=1 fails init with a message naming the key") {
    val p = new LineageStateStoreProvider
    val e = intercept[IllegalArgumentException] {
      p.init(
        storeId(),
        keySchema,
        valueSchema,
        noPrefix,
        false,
        storeConf(FormatVersionKey -> "1"),
        hadoopConf()
      )
    }
    assert(e.getMessage.contains("spark.sql.streaming.stateStore.checkpointFormatVersion"), e.getMessage)
  }

  test("a malformed lineagestore key fails init with the key in the message") {
    val key = "spark.sql.streaming.stateStore.lineagestore.transferThreads"
    val e = intercept[IllegalArgumentException] {
      new LineageStateStoreProvider()
        .init(storeId(), keySchema, valueSchema, noPrefix, false, storeConf(key -> "abc"), hadoopConf())
    }
    assert(e.getMessage.contains(key), e.getMessage)
    assert(e.getMessage.contains("abc"), e.getMessage)

    val out = intercept[IllegalArgumentException] {
      new LineageStateStoreProvider()
        .init(storeId(), keySchema, valueSchema, noPrefix, false, storeConf(key -> "0"), hadoopConf())
    }
    assert(out.getMessage.contains(key), out.getMessage)

    val unknown = "spark.sql.streaming.stateStore.lineagestore.transferThread"
    val u = intercept[IllegalArgumentException] {
      new LineageStateStoreProvider()
        .init(storeId(), keySchema, valueSchema, noPrefix, false, storeConf(unknown -> "4"), hadoopConf())
    }
    assert(u.getMessage.contains(unknown), u.getMessage)
  }

  // ---- basic operations ---------------------------------------------------------------------------------

  test("get, put, remove, keyExists, multiGet and iterator, within a batch and after commit") {
    val p = newProvider()
    val s = p.getStore(0, None)
    assert(s.version === 0)
    assert(s.get(keyRow("a"), Default) === null)
    assert(!s.keyExists(keyRow("a"), Default))
    assert(data(s).isEmpty)

    put(s, "a", 1)
    put(s, "b", 2)
    put(s, "b", 2, p = 1) // same string, another partition column: another key
    put(s, "c", 3)
    assert(get(s, "a") === Some(1))
    put(s, "b", 20) // overwrite an uncommitted value
    remove(s, "c")
    remove(s, "never-there") // removing a missing key is a no-op
    assert(get(s, "b") === Some(20))
    assert(get(s, "b", p = 1) === Some(2))
    assert(get(s, "c") === None)
    assert(s.keyExists(keyRow("a"), Default))
    assert(!s.keyExists(keyRow("c"), Default))
    assert(
      s.multiGet(Array(keyRow("a"), keyRow("c"), keyRow("b")), Default).map(Option(_).map(valueOf)).toSeq ===
        Seq(Some(1), None, Some(20))
    )
    assert(data(s) === Map(("a", 0) -> 1, ("b", 0) -> 20, ("b", 1) -> 2))
    assert(!s.hasCommitted)
    assert(s.commit() === 1)
    assert(s.hasCommitted)
    val c1 = Ckpt(1, s.getStateStoreCheckpointInfo().stateStoreCkptId)

    val c2 = batch(p, c1) { s =>
      assert(data(s) === Map(("a", 0) -> 1, ("b", 0) -> 20, ("b", 1) -> 2))
      remove(s, "a")
      put(s, "d", 4)
      put(s, "b", 21, p = 1)
      assert(data(s) === Map(("b", 0) -> 20, ("b", 1) -> 21, ("d", 0) -> 4))
    }
    assert(readAt(p, c2) === Map(("b", 0) -> 20, ("b", 1) -> 21, ("d", 0) -> 4))
    assert(readAt(p, c1) === Map(("a", 0) -> 1, ("b", 0) -> 20, ("b", 1) -> 2))
  }

  test("null keys and values are rejected") {
    val p = newProvider()
    val s = p.getStore(0, None)
    intercept[IllegalArgumentException](s.put(null, valueRow(1), Default))
    intercept[IllegalArgumentException](s.put(keyRow("a"), null, Default))
    intercept[IllegalArgumentException](s.get(null, Default))
    intercept[IllegalArgumentException](s.remove(null, Default))
    s.abort()
  }

  test("a commit without changes is a new version with the same state") {
    val p = newProvider()
    val c1 = batch(p, Empty)(s => put(s, "a", 1))
    val c2 = batch(p, c1)(_ => ())
    val c3 = batch(p, c2)(_ => ())
    assert(c3.version === 3)
    closeProvider(p)
    assert(readAt(newProvider(), c3) === Map(("a", 0) -> 1))
    assert(readAt(newProvider(), Empty) === Map.empty)
  }

  test("operations after commit or abort fail; abort after commit keeps the commit") {
    val p = newProvider()
    val s = p.getStore(0, None)
    put(s, "a", 1)
    s.commit()
    val c1 = Ckpt(1, s.getStateStoreCheckpointInfo().stateStoreCkptId)
    intercept[IllegalStateException](put(s, "b", 2))
    intercept[IllegalStateException](remove(s, "a"))
    intercept[IllegalStateException](s.commit())
    s.abort() // Spark's task completion listener aborts every store; a committed one stays committed
    s.release()
    assert(s.hasCommitted)
    assert(readAt(p, c1) === Map(("a", 0) -> 1))

    val t = p.getStore(1, c1.id)
    put(t, "b", 2)
    t.abort()
    assert(!t.hasCommitted)
    intercept[IllegalStateException](put(t, "c", 3))
    intercept[IllegalStateException](remove(t, "a"))
    intercept[IllegalStateException](t.commit())
    intercept[IllegalStateException](t.getStateStoreCheckpointInfo())
  }

  test("abort discards the batch; a retried task sees the committed state") {
    val p = newProvider()
    val c1 = batch(p, Empty) { s => put(s, "a", 1); put(s, "b", 2) }

    val s = p.getStore(1, c1.id)
    put(s, "x", 9)
    remove(s, "a")
    put(s, "b", 99)
    s.abort()
    assert(readAt(p, c1) === Map(("a", 0) -> 1, ("b", 0) -> 2))

    // a task that died without abort: the next getStore of the same version starts clean
    val dead = p.getStore(1, c1.id)
    put(dead, "y", 8)
    remove(dead, "b")
    val c2 = batch(p, c1)(s => put(s, "c", 3))
    assert(readAt(p, c2) === Map(("a", 0) -> 1, ("b", 0) -> 2, ("c", 0) -> 3))
    closeProvider(p)
    assert(readAt(newProvider(), c2) === Map(("a", 0) -> 1, ("b", 0) -> 2, ("c", 0) -> 3))
  }

  test("removing keys while iterating over committed and uncommitted keys") {
    val p = newProvider()
    val c1 = batch(p, Empty)(s => (1 to 20).foreach(i => put(s, s"k$i", i)))
    val c2 = batch(p, c1) { s =>
      (21 to 30).foreach(i => put(s, s"k$i", i))
      val it = s.iterator(Default)
      var seen = 0
      it.foreach { pair =>
        seen += 1
        if (valueOf(pair.value) % 2 == 0) s.remove(pair.key, Default)
      }
      assert(seen === 30)
      assert(data(s) === (1 to 30).filter(_ % 2 == 1).map(i => (s"k$i", 0) -> i).toMap)
    }
    closeProvider(p)
    assert(readAt(newProvider(), c2) === (1 to 30).filter(_ % 2 == 1).map(i => (s"k$i", 0) -> i).toMap)
  }

  test("read-only store serves reads and rejects writes; upgrade to a write store") {
    val p = newProvider()
    val c1 = batch(p, Empty) { s => put(s, "a", 1); put(s, "b", 2) }

    val r = p.getReadStore(1, c1.id)
    assert(r.version === 1)
    assert(get(r, "a") === Some(1))
    assert(data(r) === Map(("a", 0) -> 1, ("b", 0) -> 2))
    r match {
      case w: StateStore =>
        intercept[IllegalStateException](put(w, "c", 3))
        intercept[IllegalStateException](remove(w, "a"))
        intercept[IllegalStateException](w.commit())
      case _ => // not writable by type: nothing to check
    }

    val w = p.upgradeReadStoreToWriteStore(r, 1, c1.id)
    assert(w.version === 1)
    put(w, "c", 3)
    remove(w, "a")
    assert(w.commit() === 2)
    val info = w.getStateStoreCheckpointInfo()
    assert(info.baseStateStoreCkptId === c1.id)
    val c2 = Ckpt(2, info.stateStoreCkptId)
    r.release()
    assert(readAt(p, c2) === Map(("b", 0) -> 2, ("c", 0) -> 3))

    // read store, then the write store of the same version directly (Spark's aggregation does both)
    val r2 = p.getReadStore(2, c2.id)
    assert(get(r2, "c") === Some(3))
    r2.abort()
    val c3 = batch(p, c2)(s => put(s, "d", 4))
    closeProvider(p)
    assert(readAt(newProvider(), c3) === Map(("b", 0) -> 2, ("c", 0) -> 3, ("d", 0) -> 4))
  }

  test("getStateStoreCheckpointInfo: a fresh unique ID per commit, base is the loaded ID") {
    val p = newProvider(storeId(partition = 3))
    val s = p.getStore(0, None)
    intercept[IllegalStateException](s.getStateStoreCheckpointInfo())
    put(s, "a", 1)
    s.commit()
    val i1 = s.getStateStoreCheckpointInfo()
    assert(i1.partitionId === 3)
    assert(i1.batchVersion === 1)
    assert(i1.stateStoreCkptId.exists(_.nonEmpty))
    assert(i1.baseStateStoreCkptId === None)

    var c = Ckpt(1, i1.stateStoreCkptId)
    val ids = scala.collection.mutable.Set(c.id.get)
    val byVersion = scala.collection.mutable.Map(1L -> c)
    (2 to 6).foreach { v =>
      val s = p.getStore(c.version, c.id)
      put(s, "a", v)
      s.commit()
      val info = s.getStateStoreCheckpointInfo()
      assert(info.batchVersion === v)
      assert(info.baseStateStoreCkptId === c.id)
      assert(ids.add(info.stateStoreCkptId.get), "unique IDs must not repeat")
      c = Ckpt(v, info.stateStoreCkptId)
      byVersion(v.toLong) = c
    }
    // the retry of a version draws another ID; its base is the ID it was loaded with
    val again = batch(p, byVersion(5))(s => put(s, "a", 66))
    assert(again.version === 6)
    assert(again.id !== c.id)
    // through the read-store upgrade path too
    val r = p.getReadStore(6, c.id)
    val w = p.upgradeReadStoreToWriteStore(r, 6, c.id)
    put(w, "a", 7)
    w.commit()
    assert(w.getStateStoreCheckpointInfo().baseStateStoreCkptId === c.id)
    assert(ids.add(w.getStateStoreCheckpointInfo().stateStoreCkptId.get))
  }

  // ---- versions, reloads, attempts -----------------------------------------------------------------------

  test("every version reloads on a fresh provider, before and after an executor loss") {
    val rnd = new Random(7)
    var model = Map.empty[(String, Int), Int]
    val history = scala.collection.mutable.ArrayBuffer(Empty -> model)
    var p = newProvider()
    var c = Empty
    for (v <- 1 to 10) {
      if (v == 6) { closeProvider(p); p = newProvider() } // executor loss: a new provider continues
      c = batch(p, c) { s =>
        (1 to 6).foreach { _ =>
          val k = (s"k${rnd.nextInt(12)}", rnd.nextInt(2))
          if (rnd.nextInt(4) == 0) { s.remove(keyRow(k._1, k._2), Default); model -= k }
          else { val x = rnd.nextInt(1000) - 500; put(s, k._1, x, k._2); model += k -> x }
        }
      }
      history += c -> model
      if (v % 3 == 0) p.doMaintenance()
    }
    closeProvider(p)
    history.foreach { case (ck, expected) =>
      val fresh = newProvider()
      assert(readAt(fresh, ck) === expected, s"version ${ck.version}")
      closeProvider(fresh)
    }
    // one provider walking the versions in a shuffled order (local ancestors, other lineage points)
    val walker = newProvider()
    rnd.shuffle(history.toSeq).foreach { case (ck, expected) =>
      assert(readAt(walker, ck) === expected, s"version ${ck.version}")
    }
  }

  test("two attempts of one version: each loadable by its own ID, on the same and on fresh providers") {
    val p = newProvider()
    val c1 = batch(p, Empty) { s => put(s, "a", 1); put(s, "shared", 0) }
    val c2a = batch(p, c1) { s => put(s, "x", 1); remove(s, "a") }
    val c2b = batch(p, c1) { s => put(s, "x", 2); put(s, "b", 2) } // the retried batch
    assert(c2a.version === 2 && c2b.version === 2)
    assert(c2a.id !== c2b.id)
    val a = Map(("shared", 0) -> 0, ("x", 0) -> 1)
    val b = Map(("a", 0) -> 1, ("shared", 0) -> 0, ("x", 0) -> 2, ("b", 0) -> 2)
    assert(readAt(p, c2a) === a)
    assert(readAt(p, c2b) === b)
    assert(readAt(p, c2a) === a) // the provider holds 2b: load "the other attempt"

    // the driver recorded 2b; the next batch builds on it
    val c3 = batch(p, c2b)(s => put(s, "y", 3))
    assert(readAt(p, c3) === b + (("y", 0) -> 3))
    assert(readAt(p, c2a) === a) // holding 3 on b's lineage, load a's
    val c3a = batch(p, c2a)(s => put(s, "z", 4)) // a lineage on top of the other attempt stays separate
    assert(readAt(p, c3a) === a + (("z", 0) -> 4))
    assert(readAt(p, c3) === b + (("y", 0) -> 3))
    closeProvider(p)

    for ((ck, expected) <- Seq(c2a -> a, c2b -> b, c3 -> (b + (("y", 0) -> 3))))
      assert(readAt(newProvider(), ck) === expected, s"$ck")

    // without an ID, a version with two attempts is ambiguous; one with one attempt is not
    val q = newProvider()
    val e = intercept[IllegalStateException](q.getStore(2, None))
    assert(e.getMessage.contains(c2a.id.get) && e.getMessage.contains(c2b.id.get), e.getMessage)
    assert(readAt(q, Ckpt(1, None)) === Map(("a", 0) -> 1, ("shared", 0) -> 0))
  }

  test("a version or unique ID that does not exist fails the load; the provider stays usable") {
    val p = newProvider()
    val c1 = batch(p, Empty)(s => put(s, "a", 1))
    intercept[IllegalArgumentException](p.getStore(-1, None))
    intercept[IllegalStateException](p.getStore(5, None))
    val e = intercept[IllegalStateException](p.getStore(1, Some("no-such-attempt")))
    assert(e.getMessage.contains("1_no-such-attempt.delta"), e.getMessage)
    intercept[IllegalStateException](p.getStore(2, Some(UUID.randomUUID().toString)))
    assert(readAt(p, c1) === Map(("a", 0) -> 1))
    val c2 = batch(p, c1)(s => put(s, "b", 2))
    assert(readAt(p, c2) === Map(("a", 0) -> 1, ("b", 0) -> 2))
  }

  test("a second task on the same provider waits until the first commits or aborts") {
    val p = newProvider()
    val c1 = batch(p, Empty)(s => put(s, "a", 1))
    val first = p.getStore(1, c1.id)
    put(first, "x", 1)
    val second = new AtomicReference[Either[Throwable, Ckpt]]()
    val t = new Thread(() =>
      second.set(
        try Right(batch(p, c1)(s => put(s, "y", 2)))
        catch { case e: Throwable => Left(e) }
      )
    )
    t.start()
    Thread.sleep(300)
    assert(second.get() === null, "the second task must not use the store while the first owns it")
    first.abort()
    t.join(30000)
    val c2 = second.get() match {
      case Right(c) => c
      case other    => fail(s"second task: $other")
    }
    assert(readAt(p, c2) === Map(("a", 0) -> 1, ("y", 0) -> 2))
    intercept[IllegalStateException](first.commit())
  }

  test("random walk over lineages: extend, branch from older checkpoints, abort, lose executors") {
    val rnd = new Random(1234)
    val conf = storeConf(MinDeltasKey -> "2", MinBatchesKey -> "1000")
    val known = scala.collection.mutable.ArrayBuffer[(Ckpt, Data)](Empty -> Map.empty)
    var p = newProvider(conf = conf)
    for (step <- 1 to 80) {
      rnd.nextInt(20) match {
        case 0     => closeProvider(p); p = newProvider(conf = conf)
        case 1 | 2 => p.doMaintenance()
        case _     =>
          // mostly the newest checkpoint; sometimes an older one (a retried batch, another attempt's lineage)
          val (from, model) = if (rnd.nextInt(4) == 0) known(rnd.nextInt(known.size)) else known.last
          val s = p.getStore(from.version, from.id)
          assert(data(s) === model, s"step $step loading $from")
          var m = model
          (1 to rnd.nextInt(8)).foreach { _ =>
            val k = (s"k${rnd.nextInt(30)}", 0)
            if (rnd.nextInt(3) == 0) { remove(s, k._1); m -= k }
            else { val v = rnd.nextInt(); put(s, k._1, v); m += k -> v }
          }
          if (rnd.nextInt(8) == 0) s.abort()
          else {
            s.commit()
            known += Ckpt(s.version + 1, s.getStateStoreCheckpointInfo().stateStoreCkptId) -> m
          }
      }
    }
    closeProvider(p)
    val q = newProvider(conf = conf)
    rnd.shuffle(known.toSeq).take(30).foreach { case (c, m) => assert(readAt(q, c) === m, s"$c") }
  }

  test("a corrupted delta fails the load naming the file; other versions stay loadable") {
    val p = newProvider(conf = storeConf(MinDeltasKey -> "1000"))
    val c1 = batch(p, Empty)(s => put(s, "a", 1))
    val c2 = batch(p, c1)(s => put(s, "b", 2))
    val c3 = batch(p, c2)(s => put(s, "c", 3))
    closeProvider(p)
    val f = fileOf(c2, "delta")
    val raf = new RandomAccessFile(f, "rw")
    try { raf.seek(f.length() - 7); val b = raf.read(); raf.seek(f.length() - 7); raf.write(b ^ 0xff) }
    finally raf.close()
    new File(f.getParentFile, s".${f.getName}.crc").delete() // our own checksum must catch it, not Hadoop's
    val q = newProvider()
    val e = intercept[Exception](readAt(q, c3))
    assert(e.getMessage.contains(f.getName), e.getMessage)
    assert(readAt(q, c1) === Map(("a", 0) -> 1)) // the failed load left the provider usable
    assert(readAt(newProvider(), c1) === Map(("a", 0) -> 1))
  }

  // ---- metrics -------------------------------------------------------------------------------------------

  test("metrics: numKeys follows puts and removes, survives reload; custom metrics are lineagestore's") {
    val p = newCfProvider()
    val s = p.getStore(0, None)
    createCf(s, "cf1")
    (1 to 10).foreach(i => put(s, s"k$i", i))
    put(s, "k1", 100) // an overwrite is not a new key
    (1 to 3).foreach(i => remove(s, s"k$i"))
    remove(s, "never") // not there: no change
    put(s, "x", 1, cf = "cf1")
    put(s, "y", 1, cf = "cf1")
    s.commit()
    val m1 = s.metrics
    assert(m1.numKeys === 7 + 2)
    val c1 = Ckpt(1, s.getStateStoreCheckpointInfo().stateStoreCkptId)

    val names = p.supportedCustomMetrics.map(_.name)
    assert(names.nonEmpty)
    assert(names.forall(_.startsWith("lineagestore")), names)
    assert(m1.customMetrics.keySet.map(_.name) === names.toSet)
    assert(m1.memoryUsedBytes >= 0)

    val c2 = batch(p, c1) { s =>
      createCf(s, "cf1")
      remove(s, "k4")
      remove(s, "k5")
      put(s, "k20", 20)
      put(s, "k6", 60)
      remove(s, "x", cf = "cf1")
    }
    val s2 = p.getStore(2, c2.id)
    assert(s2.metrics.numKeys === 6 + 1)
    s2.abort()
    closeProvider(p)
    val q = newCfProvider()
    val s3 = q.getStore(2, c2.id)
    try assert(s3.metrics.numKeys === 6 + 1)
    finally s3.abort()
    val c3 = batch(q, c2) { s =>
      createCf(s, "cf1")
      assert(s.removeColFamilyIfExists("cf1"))
    }
    val s4 = q.getStore(3, c3.id)
    try assert(s4.metrics.numKeys === 6)
    finally s4.abort()
  }
}

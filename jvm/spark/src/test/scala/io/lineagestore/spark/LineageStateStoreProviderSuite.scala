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

  test("a batch over maxPendingBytes fails naming the key; the provider stays usable") {
    val key = "spark.sql.streaming.stateStore.lineagestore.maxPendingBytes"
    val p = newProvider(conf = storeConf(key -> "1m"))
    val s = p.getStore(0, None)
    val e = intercept[IllegalStateException]((1 to 100000).foreach(i => put(s, s"key-$i-" + ("x" * 50), i)))
    assert(e.getMessage.contains(key), e.getMessage)
    s.abort()
    val c1 = batch(p, Empty)(s => put(s, "a", 1))
    assert(readAt(p, c1) === Map(("a", 0) -> 1))
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

  // ---- snapshots and clean-up ----------------------------------------------------------------------------

  test("snapshots by doMaintenance; a fresh provider loads from the snapshot alone") {
    val p = newProvider() // minDeltasForSnapshot = 2
    var c = Empty
    val history = scala.collection.mutable.ArrayBuffer.empty[(Ckpt, Data)]
    for (v <- 1 to 7) {
      c = batch(p, c) { s => put(s, s"k$v", v); put(s, "last", v) }
      history += c -> ((1 to v).map(i => (s"k$i", 0) -> i).toMap + (("last", 0) -> v))
      if (v == 2) assert(snapshotFiles().isEmpty, "a snapshot is uploaded by maintenance, not by commit")
      p.doMaintenance()
    }
    val zips = snapshotFiles()
    assert(zips.nonEmpty)
    assert(storeFiles().exists(n => n.startsWith("shared/") && n.endsWith(".sst")), storeFiles())
    val newest = zips.map(fileVersion).max
    assert(newest >= 5, zips)
    closeProvider(p)

    // every delta below the newest snapshot can go: the snapshot alone rebuilds it and what follows
    val dir = new File(storeId().storeCheckpointLocation().toUri.getPath)
    deltaFiles().filter(fileVersion(_) < newest).foreach { n =>
      assert(new File(dir, n).delete())
      new File(dir, s".$n.crc").delete()
    }
    history.filter(_._1.version >= newest).foreach { case (ck, expected) =>
      val fresh = newProvider()
      val s = fresh.getStore(ck.version, ck.id)
      try {
        assert(data(s) === expected)
        if (ck.version == newest) {
          val replayed = s.metrics.customMetrics.collectFirst {
            case (m, n) if m.name == "lineagestoreDeltasReplayed" => n
          }
          assert(replayed === Some(0L))
        }
      } finally s.abort()
      closeProvider(fresh)
    }
  }

  test("forceSnapshotOnCommit makes the next maintenance upload that version's snapshot") {
    val p = newProvider(conf = storeConf(MinDeltasKey -> "1000"))
    val c1 = batch(p, Empty)(s => put(s, "a", 1))
    p.doMaintenance()
    assert(snapshotFiles().isEmpty)
    val s = p.getStore(1, c1.id, forceSnapshotOnCommit = true)
    put(s, "b", 2)
    s.commit()
    val c2 = Ckpt(2, s.getStateStoreCheckpointInfo().stateStoreCkptId)
    p.doMaintenance()
    assert(snapshotFiles() === Set(s"2_${c2.id.get}.zip"))
    closeProvider(p)
    assert(readAt(newProvider(), c2) === Map(("a", 0) -> 1, ("b", 0) -> 2))
  }

  /** Shared blobs each remaining snapshot's INDEX references. */
  private def referencedBlobs(zips: Set[String]): Map[String, Set[String]] = {
    val dir = new File(storeId().storeCheckpointLocation().toUri.getPath)
    zips.map { z =>
      val zip = new ZipFile(new File(dir, z))
      try {
        val index =
          Source.fromInputStream(zip.getInputStream(zip.getEntry("INDEX")), "UTF-8").getLines().toList
        z -> index.filter(_.startsWith("file ")).map(_.split(' ')(4)).filter(_ != "-").toSet
      } finally zip.close()
    }.toMap
  }

  test("clean-up keeps minBatchesToRetain versions loadable and deletes older files and blobs") {
    val conf = storeConf(MinBatchesKey -> "3", MinDeltasKey -> "2")
    val p = newProvider(conf = conf)
    var c = Empty
    val history = scala.collection.mutable.ArrayBuffer.empty[(Ckpt, Data)]
    var losing: Ckpt = null
    for (v <- 1 to 20) {
      if (v == 5) losing = batch(p, c)(s => put(s, "losing", 1)) // an attempt the driver did not record
      c = batch(p, c) { s =>
        put(s, s"k${v % 7}", v)
        if (v % 4 == 0) remove(s, s"k${(v + 3) % 7}")
      }
      val previous = history.lastOption.map(_._2).getOrElse(Map.empty)
      history += c -> {
        val m = previous + ((s"k${v % 7}", 0) -> v)
        if (v % 4 == 0) m - ((s"k${(v + 3) % 7}", 0)) else m
      }
      p.doMaintenance()
      if (v == 6) assert(fileOf(losing, "delta").exists(), "a losing attempt inside the window is kept")
    }
    // Spark loads the newest version at the next batch; maintenance after it
    p.getStore(c.version, c.id).abort()
    p.doMaintenance()

    val versions = storeFiles().filter(n => n.endsWith(".delta") || n.endsWith(".zip")).map(fileVersion)
    assert(
      versions.min >= 20 - 3 - 2,
      s"files older than the retained versions' snapshot remain: ${storeFiles()}"
    )
    assert(!fileOf(losing, "delta").exists(), "the losing attempt left the window and should be deleted")
    assert(!storeFiles().exists(_.startsWith("1_")))

    // blobs: exactly those the remaining snapshots reference
    val refs = referencedBlobs(snapshotFiles())
    val blobs = storeFiles().filter(_.startsWith("shared/")).map(_.stripPrefix("shared/"))
    assert(refs.values.flatten.toSet === blobs, s"indexes reference ${refs}, shared/ holds $blobs")
    closeProvider(p)

    history.filter(_._1.version >= 20 - 3 + 1).foreach { case (ck, expected) =>
      val fresh = newProvider(conf = conf)
      assert(readAt(fresh, ck) === expected, s"version ${ck.version}")
      closeProvider(fresh)
    }
  }

  test("clean-up by the provider that took over after an executor loss") {
    val conf = storeConf(MinBatchesKey -> "3", MinDeltasKey -> "3")
    val p = newProvider(conf = conf)
    var c = Empty
    for (v <- 1 to 10) c = batch(p, c)(s => put(s, "a", v))
    closeProvider(p) // no maintenance ran on this executor
    assert(deltaFiles().size === 10)

    val q = newProvider(conf = conf)
    for (v <- 11 to 16) {
      c = batch(q, c)(s => put(s, "a", v))
      q.doMaintenance()
    }
    q.getStore(c.version, c.id).abort()
    q.doMaintenance()
    val versions = (deltaFiles() ++ snapshotFiles()).map(fileVersion)
    assert(versions.min > 5, storeFiles())
    closeProvider(q)
    assert(readAt(newProvider(conf = conf), c) === Map(("a", 0) -> 16))
  }

  test("maintenance running concurrently with batches loses nothing") {
    val conf = storeConf(MinBatchesKey -> "4", MinDeltasKey -> "2")
    val p = newProvider(conf = conf)
    val failure = new AtomicReference[Throwable]()
    @volatile var running = true
    val maint = new Thread(() =>
      while (running) {
        try p.doMaintenance()
        catch { case t: Throwable => failure.compareAndSet(null, t) }
        Thread.sleep(2)
      }
    )
    maint.start()
    var c = Empty
    val history = scala.collection.mutable.ArrayBuffer.empty[(Ckpt, Data)]
    var model = Map.empty[(String, Int), Int]
    try {
      for (v <- 1 to 30) {
        c = batch(p, c) { s =>
          (0 until 20).foreach(i => put(s, s"k${(v * 7 + i) % 50}", v))
          remove(s, s"k${v % 50}")
        }
        model = model ++ (0 until 20).map(i => (s"k${(v * 7 + i) % 50}", 0) -> v) - ((s"k${v % 50}", 0))
        history += c -> model
      }
    } finally {
      running = false
      maint.join()
    }
    assert(failure.get() === null, s"maintenance failed: ${failure.get()}")
    p.doMaintenance()
    closeProvider(p)
    history.takeRight(4).foreach { case (ck, expected) =>
      val fresh = newProvider(conf = conf)
      assert(readAt(fresh, ck) === expected, s"version ${ck.version}")
      closeProvider(fresh)
    }
  }

  // ---- store names, partitions ---------------------------------------------------------------------------

  test("stores of other partitions and store names are isolated and laid out as Spark expects") {
    val left = storeId(opId = 1, partition = 0, storeName = "left-keyToNumValues")
    val other = storeId(opId = 1, partition = 1)
    val pl = newProvider(left)
    val po = newProvider(other)
    val cl = batch(pl, Empty)(s => put(s, "a", 1))
    val co = batch(po, Empty)(s => put(s, "a", 2))
    assert(new File(checkpointRoot, s"1/0/left-keyToNumValues/1_${cl.id.get}.delta").isFile)
    assert(new File(checkpointRoot, s"1/1/1_${co.id.get}.delta").isFile)
    closeProvider(pl)
    closeProvider(po)
    assert(readAt(newProvider(left), cl) === Map(("a", 0) -> 1))
    assert(readAt(newProvider(other), co) === Map(("a", 0) -> 2))
    // a checkpoint ID of another store is not found in this one
    intercept[Exception](readAt(newProvider(left), co))
  }

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

  private def newCfProvider(conf: StateStoreConf = null) = newProvider(useColumnFamilies = true, conf = conf)
  private def createCf(s: StateStore, name: String, multi: Boolean = false): Unit =
    s.createColFamilyIfAbsent(name, keySchema, valueSchema, noPrefix, multi, false)

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

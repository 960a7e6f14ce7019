package io.lineagestore.engine

import java.io.File
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files
import java.util.concurrent.{CountDownLatch, Executor}

import scala.collection.mutable
import scala.util.Random

import org.scalatest.funsuite.AnyFunSuite

/** A batch larger than its memory bound spills to local disk ([[SpilledEntries]]): on a real RocksDB, batches
  * of random puts, deletes, appends and rewrites many times the bound read right (point reads, existence,
  * scans) while pending, while in flight and once committed, against a model; an abort leaves nothing; the
  * streamed log holds every first change and is given up at a rewrite of a spilled key; the changes a delta
  * is written from include the spilled ones; and what cannot spill still fails naming the key.
  */
class SpillSuite extends AnyFunSuite {
  private val Limit = 256L << 10 // a bound a few thousand small values reach
  private def k(i: Int) = f"key-$i%05d".getBytes(UTF_8)
  private def str(b: Array[Byte]) = if (b == null) null else new String(b, UTF_8)

  private def withDb(
      limit: Long = Limit,
      applyPool: Executor = SharedApplyPool.pool,
      openLog: () => BatchLog = BatchLog.None
  )(body: (LocalRocksDb, File) => Unit): Unit = {
    val root = Files.createTempDirectory("lineagestore-spill").toFile
    val dir = new File(root, "db")
    val db =
      new LocalRocksDb(dir, RocksDbTuning(64L << 20, 4L << 20), limit, "maxPendingBytes", applyPool, openLog)
    try body(db, new File(root, "db.spill"))
    finally { db.close(); LocalFiles.deleteRecursively(root) }
  }

  private def spillDirs(spillRoot: File): Seq[String] =
    Option(spillRoot.list()).map(_.toSeq).getOrElse(Nil)

  private def contents(
      db: LocalRocksDb,
      from: Array[Byte] = Array.emptyByteArray,
      until: Array[Byte] = null
  ) = {
    val it = db.scan(from, until)
    try it.map { case (key, v) => str(key) -> str(v) }.toVector
    finally it.close()
  }

  test("batches many times the bound read right pending, in flight and committed, against a model") {
    val rnd = new Random(17)
    @volatile var release = new CountDownLatch(0)
    val held: Executor = r => { val gate = release; new Thread(() => { gate.await(); r.run() }).start() }
    withDb(applyPool = held) { (db, spillRoot) =>
      var committed = scala.collection.immutable.TreeMap.empty[String, String]
      def checkReads(model: scala.collection.immutable.TreeMap[String, String], what: String): Unit =
        (0 until 200).foreach { _ =>
          val i = rnd.nextInt(4000)
          assert(str(db.get(k(i))) == model.getOrElse(str(k(i)), null), s"$what: get ${str(k(i))}")
          assert(db.exists(k(i)) == model.contains(str(k(i))), s"$what: exists ${str(k(i))}")
        }
      def check(model: scala.collection.immutable.TreeMap[String, String], what: String): Unit = {
        checkReads(model, what)
        val (a, b) = {
          val x = rnd.nextInt(4000); val y = rnd.nextInt(4000); (math.min(x, y), math.max(x, y))
        }
        assert(contents(db, k(a), k(b)) == model.range(str(k(a)), str(k(b))).toVector, s"$what: scan $a-$b")
      }
      for (batch <- 1 to 5) {
        val aborted = batch == 3
        var model = committed
        var spilledSeen = 0
        (1 to 6000).foreach { step =>
          val i = rnd.nextInt(4000)
          val key = str(k(i))
          rnd.nextInt(20) match {
            case 0 | 1            => db.delete(k(i)); model -= key
            case 2 if i % 50 == 0 => // a list's key: every change kept in memory
              val e = s"e$step"
              db.merge(k(i), e.getBytes(UTF_8))
              model += key -> model.get(key).fold(e)(_ + "," + e)
            case 3 =>
              val v = s"v$batch-$step"; db.put(k(i), v.getBytes(UTF_8), everyChange = true); model += key -> v
            case _ =>
              val v = s"v$batch-$step-" + "x" * rnd.nextInt(400)
              db.put(k(i), v.getBytes(UTF_8)); model += key -> v
          }
          spilledSeen = math.max(spilledSeen, db.pending.spilledRuns)
          if (step % 1500 == 0) check(model, s"batch $batch step $step, pending")
        }
        assert(spilledSeen >= 3, s"batch $batch spilled $spilledSeen runs")
        assert(db.pending.sizeBytes <= Limit)
        assert(spillDirs(spillRoot).size == 1)
        if (aborted) {
          db.abort()
          assert(spillDirs(spillRoot).isEmpty)
          check(committed, s"batch $batch, aborted")
        } else {
          release = new CountDownLatch(1)
          db.commitInBackground()
          checkReads(model, s"batch $batch, in flight") // the apply thread waits: reads look through it
          release.countDown()
          db.awaitApplied()
          assert(spillDirs(spillRoot).isEmpty, "a written batch's runs are deleted")
          committed = model
          check(committed, s"batch $batch, committed")
          assert(contents(db) == committed.toVector)
        }
      }
    }
  }

  test("the streamed log takes every first change across spills and is given up at a spilled key's rewrite") {
    val logged = mutable.ArrayBuffer.empty[String]
    var discarded = 0
    val log: () => BatchLog = () =>
      new BatchLog {
        def put(key: Array[Byte], value: Array[Byte]): Unit = logged += s"put ${str(key)}"
        def delete(key: Array[Byte]): Unit = logged += s"delete ${str(key)}"
        def discard(): Unit = discarded += 1
      }
    withDb(openLog = log) { (db, _) =>
      val value = new Array[Byte](500)
      (0 until 2000).foreach(i => if (i % 7 == 0) db.delete(k(i)) else db.put(k(i), value))
      assert(db.pending.spilledRuns >= 2 && !db.pending.logRefused && discarded == 0)
      assert(logged.size == 2000 && logged.distinct.size == 2000)
      // keys still in memory are rewrites as before; a spilled one is too, though the table no longer has it
      db.put(k(1), value)
      assert(db.pending.logRefused && discarded == 1)
      db.abort()
    }
    logged.clear()
    discarded = 0
    withDb(openLog = log) { (db, _) =>
      val value = new Array[Byte](500)
      (0 until 2000).foreach(i => db.put(k(i), value))
      assert(db.pending.spilledRuns >= 2)
      db.put(k(2000), value) // a new key after spills: still a first change
      assert(db.get(k(2001)) == null) // read first (remembered: in no run), then written
      db.put(k(2001), value)
      assert(!db.pending.logRefused)
      assert(db.get(k(3)) != null) // spilled in the first run: found there, then written
      db.put(k(3), value)
      assert(db.pending.logRefused)
      db.abort()
    }
  }

  test(
    "the changes a delta is written from include the spilled entries, shadowed by later ones, in key order"
  ) {
    withDb() { (db, _) =>
      db.put(k(9999), "committed".getBytes(UTF_8))
      db.commit()
      val expected = mutable.TreeMap.empty[String, Vector[String]]
      (0 until 3000).foreach { i =>
        val v = s"v$i-" + "y" * 300
        db.put(k(i), v.getBytes(UTF_8)); expected(str(k(i))) = Vector(s"put $v")
      }
      assert(db.pending.spilledRuns >= 2)
      db.delete(k(5)); expected(str(k(5))) = Vector("delete")
      db.merge(k(6), "a".getBytes(UTF_8)); expected(str(k(6))) = Vector(s"put v6-${"y" * 300},a")
      db.merge(k(9999), "b".getBytes(UTF_8)); expected(str(k(9999))) = Vector("merge b")
      def changes(inKeyOrder: Boolean) = {
        val out = mutable.ArrayBuffer.empty[(String, String)]
        db.pending.foreachChange(inKeyOrder) { (key, c) =>
          out += str(key) -> (c match {
            case Change.Put(v)   => s"put ${str(v)}"
            case Change.Delete   => "delete"
            case Change.Merge(e) => s"merge ${str(e)}"
          })
        }
        out.toVector
      }
      val ordered = changes(inKeyOrder = true)
      assert(ordered.map(_._1) == expected.toVector.flatMap { case (key, cs) => cs.map(_ => key) })
      assert(ordered.groupMap(_._1)(_._2) == expected.toMap)
      assert(changes(inKeyOrder = false).groupMap(_._1)(_._2) == expected.toMap)
      db.commit()
      assert(str(db.get(k(9999))) == "committed,b" && db.get(k(5)) == null)
      assert(str(db.get(k(6))) == s"v6-${"y" * 300},a")
    }
  }

  test("list appends spill too, every change kept in order; without a spill the bound fails naming the key") {
    withDb() { (db, _) =>
      db.put(k(0), "base".getBytes(UTF_8))
      db.commit()
      val model = mutable.Map(str(k(0)) -> "base")
      val feed = mutable.Map.empty[String, Vector[String]].withDefaultValue(Vector.empty)
      (1 to 20000).foreach { i =>
        val key = k(i % 400)
        val e = s"e$i-" + "q" * 40
        if (i % 997 == 0) {
          db.delete(key, everyChange = true); model -= str(key); feed(str(key)) :+= "delete"
        } else {
          db.merge(key, e.getBytes(UTF_8))
          model(str(key)) = model.get(str(key)).fold(e)(_ + "," + e)
          feed(str(key)) = feed(str(key)) match { // a merge after a put or a merge joins it, as in memory
            case init :+ last if !last.startsWith("delete") => init :+ s"$last,$e"
            case earlier                                    => earlier :+ s"merge $e"
          }
        }
      }
      assert(db.pending.spilledRuns >= 3 && db.pending.sizeBytes <= Limit)
      val changes = mutable.Map.empty[String, Vector[String]].withDefaultValue(Vector.empty)
      db.pending.foreachChange(inKeyOrder = true) { (key, c) =>
        changes(str(key)) :+= (c match {
          case Change.Put(v)   => s"put ${str(v)}"
          case Change.Delete   => "delete"
          case Change.Merge(e) => s"merge ${str(e)}"
        })
      }
      assert(changes.toMap == feed.toMap) // each key's changes as the batch kept them, across spills
      assert(contents(db).toMap == model) // pending, through the runs
      db.commit()
      assert(contents(db).toMap == model)
    }
    val bounded = new PendingWrites(Limit, "maxPendingBytes") // no spill
    val e = intercept[PendingWritesLimitException](
      (0 until 4000).foreach(i => bounded.put(k(i), new Array[Byte](100)))
    )
    assert(e.getMessage.contains("maxPendingBytes"), e.getMessage)
  }

  test("a spill the local disk refuses fails naming the directory and the key; committed state is kept") {
    withDb() { (db, spillRoot) =>
      db.put(k(0), "kept".getBytes(UTF_8))
      db.commit()
      Files.write(spillRoot.toPath, Array[Byte](1)) // a file where the spill directory goes: no spill fits
      val e = intercept[PendingWritesLimitException] {
        (1 until 3000).foreach(i => db.put(k(i), new Array[Byte](300)))
      }
      assert(
        e.getMessage.contains("could not spill") && e.getMessage.contains(spillRoot.getPath),
        e.getMessage
      )
      assert(e.getMessage.contains("maxPendingBytes"))
      db.abort()
      assert(contents(db) == Vector(str(k(0)) -> "kept"))
      Files.delete(spillRoot.toPath)
      (1 until 3000).foreach(i => db.put(k(i), new Array[Byte](300)))
      assert(db.pending.spilledRuns >= 2)
      db.commit()
      assert(contents(db).size == 3000)
    }
  }

  test("a run's key filter never misses a key it holds and lets few others through") {
    val filter = new KeyFilter(100000)
    (0 until 100000).foreach(i => filter.add(k(i)))
    assert((0 until 100000).forall(i => filter.mightContain(k(i))))
    val falsePositives = (100000 until 200000).count(i => filter.mightContain(k(i)))
    assert(falsePositives < 2000, s"$falsePositives of 100,000 absent keys passed")
    assert(filter.heapBytes <= 100000 * 10 / 8 + 8)
  }

  test("a spill directory left by a process that died is deleted when the store opens") {
    val root = Files.createTempDirectory("lineagestore-spill-left").toFile
    val leftover = new File(root, "db.spill/batch-7/runs")
    Files.createDirectories(leftover.toPath)
    Files.write(new File(leftover, "run-0.sst").toPath, Array[Byte](1, 2, 3))
    val db =
      new LocalRocksDb(new File(root, "db"), RocksDbTuning(64L << 20, 4L << 20), Limit, "maxPendingBytes")
    try assert(!new File(root, "db.spill").exists())
    finally { db.close(); LocalFiles.deleteRecursively(root) }
  }
}

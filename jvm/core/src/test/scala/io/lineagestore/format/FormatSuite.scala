package io.lineagestore.format

import java.io.{ByteArrayInputStream, ByteArrayOutputStream}

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.config.LineageConf
import io.lineagestore.lineage.CheckpointId

class FormatSuite extends AnyFunSuite {
  private val store = StoreIdentity(3, 7, "left-keyToNumValues")
  private val id = CheckpointId(12, "abc-123")
  private val lineage = Seq(CheckpointId(11, "p11"), CheckpointId(10, "p10"))

  private def delta(
      records: Seq[(Array[Byte], Array[Byte])],
      codec: DeltaCodec = DeltaCodec.Default
  ): Array[Byte] = {
    val out = new ByteArrayOutputStream()
    val w = new DeltaFile.Writer(out, DeltaHeader(store, id, lineage), codec)
    records.foreach { case (k, v) => if (v == null) w.delete(k) else w.put(k, v) }
    w.close()
    out.toByteArray
  }

  private def readAll(bytes: Array[Byte], expectedId: CheckpointId = id) = {
    val got = Seq.newBuilder[(Seq[Byte], Option[Seq[Byte]])]
    val h = DeltaFile.read(new ByteArrayInputStream(bytes), "f.delta", store, expectedId) { (_, k, v) =>
      got += ((k.toSeq, Option(v).map(_.toSeq)))
    }
    (h, got.result())
  }

  private val sample = Seq[(Array[Byte], Array[Byte])](
    (Array[Byte](1, 2), Array[Byte](9)),
    (Array[Byte](3), null),
    (Array[Byte](4), Array.emptyByteArray)
  )

  private val codecs = Seq(DeltaCodec.Uncompressed, DeltaCodec.Zstd())

  test("each deltaCodec name the configuration declares maps to its codec, and every codec has its name") {
    val choices = LineageConf.DeltaCompression.choices
    for (name <- choices) assert(DeltaCodec.byName(name).map(_.name).contains(name), name)
    assert(codecs.map(_.name).toSet == choices.toSet)
    assert(DeltaCodec.byName(LineageConf.DeltaCompression.default).contains(DeltaCodec.Default))
    assert(DeltaCodec.byName("lz4").isEmpty)
  }

  for (codec <- codecs) {
    test(s"delta round trip keeps header, lineage, puts, deletes and empty values (${codec.name})") {
      val (h, records) = readAll(delta(sample, codec))
      assert(h == DeltaHeader(store, id, lineage))
      assert(
        records == Seq((Seq[Byte](1, 2), Some(Seq[Byte](9))), (Seq[Byte](3), None), (Seq[Byte](4), Some(Nil)))
      )
      val header = DeltaFile.readHeader(new ByteArrayInputStream(delta(sample, codec)), "f.delta", store, id)
      assert(header.ancestors == lineage)
    }

    test(s"every single-byte corruption and every truncation of a delta is detected (${codec.name})") {
      val good = delta(sample, codec)
      val reasons = for (i <- good.indices) yield {
        val bad = good.clone()
        bad(i) = (bad(i) ^ 0x5a).toByte
        i -> intercept[CorruptCheckpointFileException](readAll(bad)).detail
      }
      // damage is always named for what it is, bytes changed after they were written: in the header (past the
      // magic and format version) as header damage, never as what the damaged bytes happen to spell (an
      // invalid ID, another store), and past the header as a file checksum mismatch
      val headerEnd = reasons.filter(_._2.contains("header checksum")).map(_._1).max
      for ((i, reason) <- reasons if i >= DeltaFile.Magic.length && i <= headerEnd)
        assert(reason.contains("header") && reason.contains("checksum"), s"byte $i: $reason")
      for ((i, reason) <- reasons if i > headerEnd)
        assert(reason.startsWith("file checksum mismatch"), s"byte $i: $reason")
      for (n <- 0 until good.length) {
        val e = intercept[CorruptCheckpointFileException](readAll(good.take(n)))
        assert(e.getMessage.contains("f.delta"))
      }
      val e = intercept[CorruptCheckpointFileException](readAll(good ++ Array[Byte](0)))
      assert(e.getMessage.contains("f.delta"))
    }
  }

  test("a collection while a zstd delta's end is read leaves the stream open (the codec's stream dropped)") {
    // the reader drops the records' stream and goes on reading the stored bytes: the end and CRC of a good
    // delta, the rest of a damaged one. A source that collects garbage and runs finalizers before every read
    // and refuses reads once closed, as a blob store's stream does: zstd-jni's finalizing stream, once
    // unreachable, closed it under the reader, and the damaged delta was named for its records, not its CRC.
    final class CollectingSource(bytes: Array[Byte]) extends java.io.InputStream {
      private val in = new ByteArrayInputStream(bytes)
      @volatile private var closed = false
      private def collect(): Unit = {
        System.gc()
        System.runFinalization()
        if (closed) throw new java.io.IOException("read after close")
      }
      override def read(): Int = { collect(); in.read() }
      override def read(b: Array[Byte], off: Int, len: Int): Int = { collect(); in.read(b, off, len) }
      override def close(): Unit = closed = true
    }
    def readFrom(bytes: Array[Byte]): Int = {
      var n = 0
      DeltaFile.read(new CollectingSource(bytes), "f.delta", store, id)((_, _, _) => n += 1)
      n
    }
    val many = (0 until 2000).map(i => (s"key-$i".getBytes, Array.fill[Byte](64)((i % 7).toByte)))
    val good = delta(many, DeltaCodec.Zstd())
    assert(readFrom(good) == many.size)
    val bad = good.clone()
    bad(good.length / 2) = (bad(good.length / 2) ^ 0x5a).toByte
    val e = intercept[CorruptCheckpointFileException](readFrom(bad))
    assert(e.detail.startsWith("file checksum mismatch"), e.detail)
  }

  test("a large zstd delta round-trips and is several times smaller than the uncompressed one") {
    val rnd = new scala.util.Random(7)
    // state-like records: sequential keys, values with repeated structure and some entropy
    val many = (0 until 20000).map { i =>
      val v = new Array[Byte](48)
      java.nio.ByteBuffer.wrap(v).putLong(i.toLong).putLong(i.toLong * 31).putInt(rnd.nextInt(1000))
      (java.nio.ByteBuffer.allocate(12).putShort(1).putInt(0).putInt(i).array(), if (i % 10 == 0) null else v)
    }
    val plain = delta(many, DeltaCodec.Uncompressed)
    val zstd = delta(many, DeltaCodec.Zstd())
    assert(zstd.length * 3 < plain.length, s"zstd ${zstd.length} bytes vs uncompressed ${plain.length}")
    val (_, back) = readAll(zstd)
    assert(back.size == many.size)
    assert(back.zip(many).forall { case ((k, v), (k0, v0)) => k == k0.toSeq && v == Option(v0).map(_.toSeq) })
  }

  test("format version 1 deltas (uncompressed, no codec byte) are still read") {
    // version 1 = version 2 with codec none, minus the codec byte, with both checksums over its own bytes
    val v2 = delta(sample, DeltaCodec.Uncompressed)
    val headerEnd = DeltaFile.Magic.length + 8 + 4 + 2 + store.storeName.length + 8 + 2 + id.uniqueId.length +
      4 + lineage.map(a => 8 + 2 + a.uniqueId.length).sum
    assert(v2(headerEnd) == 0, "codec byte of an uncompressed delta")
    def crc(b: Array[Byte]) = { val c = new java.util.zip.CRC32C; c.update(b); c.getValue.toInt }
    def i32(v: Int) = java.nio.ByteBuffer.allocate(4).putInt(v).array()
    val head = v2.take(headerEnd).updated(7, 1.toByte)
    val records = v2.slice(headerEnd + 1 + 4, v2.length - 4)
    val withHeaderCrc = head ++ i32(crc(head)) ++ records
    val v1 = withHeaderCrc ++ i32(crc(withHeaderCrc))
    val (h, got) = readAll(v1)
    assert(h == DeltaHeader(store, id, lineage))
    assert(got.size == sample.size)
  }

  test("a delta of an unknown future format version is rejected naming the versions this build reads") {
    val future = delta(sample).updated(7, 9.toByte)
    val e = intercept[CorruptCheckpointFileException](readAll(future))
    assert(e.getMessage.contains("format version 9") && e.getMessage.contains("1, 2"))
  }

  private def mergeDelta(records: Seq[(DeltaRecordKind, String, String)], merges: Boolean = true) = {
    val out = new ByteArrayOutputStream()
    val w = new DeltaFile.Writer(out, DeltaHeader(store, id, lineage), DeltaCodec.Uncompressed, merges)
    records.foreach {
      case (DeltaRecordKind.Put, k, v)    => w.put(k.getBytes, v.getBytes)
      case (DeltaRecordKind.Delete, k, _) => w.delete(k.getBytes)
      case (DeltaRecordKind.Merge, k, v)  => w.merge(k.getBytes, v.getBytes)
    }
    w.close()
    out.toByteArray
  }

  private def readKinds(bytes: Array[Byte]): Seq[(DeltaRecordKind, String, String)] = {
    val got = Seq.newBuilder[(DeltaRecordKind, String, String)]
    DeltaFile.read(new ByteArrayInputStream(bytes), "f.delta", store, id) { (kind, k, v) =>
      got += ((kind, new String(k), Option(v).map(new String(_)).orNull))
    }
    got.result()
  }

  test("merge records round-trip in a version-4 delta; a delta without merges stays at version 2") {
    val records = Seq(
      (DeltaRecordKind.Delete, "a", null),
      (DeltaRecordKind.Merge, "a", "1"),
      (DeltaRecordKind.Put, "b", "x,y"),
      (DeltaRecordKind.Merge, "c", "2,3"),
      (DeltaRecordKind.Delete, "c", null)
    )
    val bytes = mergeDelta(records)
    assert(bytes(7) == 4, "a delta holding merge records is format version 4")
    assert(readKinds(bytes) == records)
    assert(DeltaFile.readHeader(new ByteArrayInputStream(bytes), "f.delta", store, id).ancestors == lineage)
    // the writers of deltas without merges keep the version every earlier build reads
    assert(delta(sample)(7) == 2)
    assert(mergeDelta(records.filter(_._1 != DeltaRecordKind.Merge), merges = false)(7) == 2)
    intercept[IllegalStateException](mergeDelta(records, merges = false))
  }

  test("a delta of a newer version is refused by its version before any record is read") {
    val bytes = mergeDelta(Seq((DeltaRecordKind.Merge, "a", "1")))
    // the message an older build (versions 1 to 3) gives, by the same check: the version, before any record
    val older = bytes.updated(7, 5.toByte)
    val e = intercept[CorruptCheckpointFileException](readKinds(older))
    assert(e.getMessage.contains("format version 5 is not supported") && e.getMessage.contains("1, 2, 3, 4"))
  }

  test("the records of a version-4 delta must be in key order (merges depend on it)") {
    val e = intercept[CorruptCheckpointFileException](
      readKinds(mergeDelta(Seq((DeltaRecordKind.Merge, "b", "1"), (DeltaRecordKind.Put, "a", "2"))))
    )
    assert(e.getMessage.contains("record 2 is out of key order"), e.getMessage)
  }

  test("a delta of another store or another checkpoint is rejected by name") {
    val e1 = intercept[CorruptCheckpointFileException] {
      DeltaFile.read(new ByteArrayInputStream(delta(sample)), "f.delta", store.copy(partitionId = 8), id)(
        (_, _, _) => ()
      )
    }
    assert(e1.getMessage.contains("partition 7"))
    val e2 = intercept[CorruptCheckpointFileException](readAll(delta(sample), CheckpointId(12, "other")))
    assert(e2.getMessage.contains("12_abc-123"))
  }

  test("a file that is not a delta at all is rejected") {
    val e = intercept[CorruptCheckpointFileException](readAll("PK\u0003\u0004 not a delta".getBytes))
    assert(e.getMessage.contains("bad magic"))
  }

  test("snapshot index round trip and corruption") {
    val index = SnapshotIndex(
      store,
      id,
      lineage,
      Seq(
        SnapshotFile("000012.sst", 100, "a" * 64, Some("1f2e.sst"), Some("0badf00d")),
        SnapshotFile("000013.sst", 100, "sst-" + "c" * 64, Some("2f2e.sst"), Some("0badf00e")),
        SnapshotFile("MANIFEST-000005", 50, "b" * 64, None, Some("12345678"))
      )
    )
    val bytes = SnapshotIndex.serialize(index)
    assert(new String(bytes).startsWith("lineagestore-snapshot-index 3\n"))
    assert(SnapshotIndex.parse(bytes, "x.zip") == index)
    val bad = bytes.clone()
    bad(40) = (bad(40) ^ 1).toByte
    intercept[CorruptCheckpointFileException](SnapshotIndex.parse(bad, "x.zip"))
    intercept[CorruptCheckpointFileException](SnapshotIndex.parse(bytes.take(bytes.length - 3), "x.zip"))
  }

  private def indexText(text: String): Array[Byte] = {
    val c = new java.util.zip.CRC32C
    c.update(text.getBytes)
    (text + f"end ${c.getValue}%08x\n").getBytes
  }

  test("an index of schema 1 (no CRC32C) is still read; one of an unknown schema is refused by name") {
    val v1 = "lineagestore-snapshot-index 1\nstore 3 7 s\ncheckpoint 12 abc\nfile 000012.sst 100 " +
      "a" * 64 + " 1f2e.sst\nfile CURRENT 16 " + "b" * 64 + " -\n"
    val index = SnapshotIndex.parse(indexText(v1), "x.zip")
    assert(
      index.files == Seq(
        SnapshotFile("000012.sst", 100, "a" * 64, Some("1f2e.sst"), None),
        SnapshotFile("CURRENT", 16, "b" * 64, None, None)
      )
    )
    // a schema-1 line under a schema-2 header (or the reverse) is unreadable, not misread
    val e1 = intercept[CorruptCheckpointFileException](
      SnapshotIndex.parse(indexText(v1.replace("index 1", "index 2")), "x.zip")
    )
    assert(e1.getMessage.contains("unreadable line 'file 000012.sst"))
    val e4 = intercept[CorruptCheckpointFileException](
      SnapshotIndex.parse(indexText(v1.replace("index 1", "index 4")), "x.zip")
    )
    assert(e4.getMessage.contains("schema version 4 is not supported (this build reads 1, 2, 3)"))
    intercept[IllegalArgumentException](SnapshotFile("x.sst", 1, "a" * 64, None, Some("XYZ")))
    // an SST's ID only from schema 3 on, and only with a CRC32C to check its downloads
    val v2 = "lineagestore-snapshot-index 2\nstore 3 7 s\ncheckpoint 12 abc\nfile 000012.sst 100 sst-" +
      "a" * 64 + " 0badf00d 1f2e.sst\n"
    val e2 = intercept[CorruptCheckpointFileException](SnapshotIndex.parse(indexText(v2), "x.zip"))
    assert(e2.getMessage.contains("an SST identity in an index of schema 2"), e2.getMessage)
    assert(
      SnapshotIndex.parse(indexText(v2.replace("index 2", "index 3")), "x.zip").files.head.identity ==
        "sst-" + "a" * 64
    )
    intercept[IllegalArgumentException](SnapshotFile("x.sst", 1, "sst-" + "a" * 64, Some("b.sst"), None))
    intercept[IllegalArgumentException](
      SnapshotFile("x.sst", 1, "sst-" + "A" * 64, Some("b.sst"), Some("0badf00d"))
    )
  }

  test("an index entry naming a path outside its store is refused") {
    intercept[IllegalArgumentException](SnapshotFile("../../etc/passwd", 1, "a" * 64, None))
    intercept[IllegalArgumentException](SnapshotFile("x.sst", 1, "a" * 64, Some("../other/1.sst")))
    val text =
      "lineagestore-snapshot-index 1\nstore 3 7 s\ncheckpoint 12 abc\nfile ../x 1 " + "a" * 64 + " -\n"
    val c = new java.util.zip.CRC32C
    c.update(text.getBytes)
    val withCrc = (text + f"end ${c.getValue}%08x\n").getBytes
    val e = intercept[CorruptCheckpointFileException](SnapshotIndex.parse(withCrc, "x.zip"))
    assert(e.getMessage.contains("unsafe file name"))
  }

  test("checkpoint file names parse back and reject foreign names") {
    assert(
      CheckpointId.parseFileName("23_689aa6bd.delta") == Some(
        (CheckpointId(23, "689aa6bd"), CheckpointId.Delta)
      )
    )
    assert(CheckpointId.parseFileName("23_689aa6bd.zip").map(_._2) == Some(CheckpointId.Snapshot))
    assert(CheckpointId.parseFileName("23.delta").isEmpty)
    assert(CheckpointId.parseFileName("23_a_b.delta").isEmpty)
    assert(CheckpointId.parseFileName(".23_abc.delta.crc").isEmpty)
    intercept[IllegalArgumentException](CheckpointId(3, "a/b"))
  }
}

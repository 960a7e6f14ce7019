package io.lineagestore.config

import java.nio.file.{Files, Paths}

import org.scalatest.funsuite.AnyFunSuite

class ConfigDocsSuite extends AnyFunSuite {

  private lazy val root = Iterator
    .iterate(Paths.get("").toAbsolutePath)(_.getParent)
    .takeWhile(_ != null)
    .find(p => Files.exists(p.resolve("VERSION")))
    .get

  for ((rel, content) <- GenerateDocs.files) {
    test(s"$rel is generated from the declarations and up to date") {
      val path = root.resolve(rel)
      assert(Files.exists(path), s"$rel is missing: run `${GenerateDocs.Command}`")
      val onDisk = new String(Files.readAllBytes(path), "UTF-8")
      assert(onDisk == content, s"$rel is stale: run `${GenerateDocs.Command}`")
    }
  }

  test("a malformed or out-of-range value names the key and what is allowed") {
    val threads = LineageConf.TransferThreads.key
    val e1 = intercept[InvalidConfigException](LineageConf.validate(Map(threads -> "lots")))
    assert(e1.getMessage.contains(threads) && e1.getMessage.contains("lots"))
    assert(e1.getMessage.contains("an integer between 1 and 256"))
    val e2 = intercept[InvalidConfigException](LineageConf.validate(Map(threads -> "0")))
    assert(e2.getMessage.contains("between 1 and 256"))
    val e3 = intercept[InvalidConfigException](
      LineageConf.validate(Map(LineageConf.Prefix + "maxPendingByte" -> "1"))
    )
    assert(e3.getMessage.contains("unknown configuration key"))
    assert(LineageConf.MaxPendingBytes.from(Map(LineageConf.MaxPendingBytes.key -> "64m")) == (64L << 20))
    val e4 = intercept[InvalidConfigException](LineageConf.validate(Map(LineageConf.MemoryBytes.key -> "1m")))
    assert(e4.getMessage.contains("must be at least 8388608"))
  }

  test("kinds parse as declared: sizes take Spark's byte suffixes, integers do not, overflow is rejected") {
    assert(ConfKind.Size.parse(" 12 K ").contains(12L << 10))
    assert(ConfKind.Size.parse("1g").contains(1L << 30))
    assert(ConfKind.Size.parse("1mb").contains(1L << 20)) // as Spark's byte settings (issue 49)
    assert(ConfKind.Size.parse("9999999999g").isEmpty)
    assert(ConfKind.Long.parse("5k").isEmpty)
    assert(ConfKind.Int.parse("+7").contains(7))
    assert(ConfKind.Int.parse("2147483648").isEmpty)
    assert(LineageConf.problemOf(LineageConf.TransferThreads.key, "8") == null)
    assert(LineageConf.problemOf(LineageConf.TransferThreads.key, "x").contains("transferThreads"))
  }

  test("bounds are declared data, and the check uses them") {
    for (e <- LineageConf.All; lo <- e.min) {
      val below = lo - 1
      if (below >= Int.MinValue || e.kind != ConfKind.Int)
        assert(LineageConf.problemOf(e.key, below.toString) != null, s"${e.key}=$below")
      assert(LineageConf.problemOf(e.key, lo.toString) == null, s"${e.key}=$lo")
    }
    assert(PythonOptions.fieldName("orphanSweepEveryCleanups") == "orphan_sweep_every_cleanups")
  }
}

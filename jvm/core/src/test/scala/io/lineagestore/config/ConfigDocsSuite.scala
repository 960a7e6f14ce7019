package io.lineagestore.config

import java.nio.file.{Files, Paths}

import org.scalatest.funsuite.AnyFunSuite

class ConfigDocsSuite extends AnyFunSuite {

  test("docs/configuration.md is generated from the declarations and up to date") {
    val root = Iterator
      .iterate(Paths.get("").toAbsolutePath)(_.getParent)
      .takeWhile(_ != null)
      .find(p => Files.exists(p.resolve("VERSION")))
      .get
    val onDisk = new String(Files.readAllBytes(root.resolve("docs/configuration.md")), "UTF-8")
    assert(
      onDisk == LineageConf.markdown,
      "docs/configuration.md is stale: run `dev/sbt \"core/runMain io.lineagestore.config.GenerateDocs\"`"
    )
  }

  test("a malformed or out-of-range value names the key and what is allowed") {
    val threads = LineageConf.TransferThreads.key
    val e1 = intercept[InvalidConfigException](LineageConf.validate(Map(threads -> "lots")))
    assert(e1.getMessage.contains(threads) && e1.getMessage.contains("lots"))
    val e2 = intercept[InvalidConfigException](LineageConf.validate(Map(threads -> "0")))
    assert(e2.getMessage.contains("between 1 and 256"))
    val e3 = intercept[InvalidConfigException](
      LineageConf.validate(Map(LineageConf.Prefix + "maxPendingByte" -> "1"))
    )
    assert(e3.getMessage.contains("unknown configuration key"))
    assert(LineageConf.MaxPendingBytes.from(Map(LineageConf.MaxPendingBytes.key -> "64m")) == (64L << 20))
  }
}

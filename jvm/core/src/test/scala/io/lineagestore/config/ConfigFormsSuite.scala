package io.lineagestore.config

import org.scalatest.funsuite.AnyFunSuite

/** Values in the forms Spark's own settings take, and the nearest-key hint for a misspelt key. */
class ConfigFormsSuite extends AnyFunSuite {

  test("sizes take every form of Spark's byte strings") {
    val forms = Seq(
      "256" -> 256L,
      "256b" -> 256L,
      "256k" -> (256L << 10),
      "256kb" -> (256L << 10),
      "256m" -> (256L << 20),
      "256MB" -> (256L << 20),
      "1g" -> (1L << 30),
      "1gb" -> (1L << 30),
      "2t" -> (2L << 40),
      "2tb" -> (2L << 40),
      "1p" -> (1L << 50),
      "1pb" -> (1L << 50)
    )
    for ((text, bytes) <- forms) assert(ConfKind.Size.parse(text).contains(bytes), text)
    for (bad <- Seq("1.5g", "1gib", "mb", "1 g b", "9999999p", ""))
      assert(ConfKind.Size.parse(bad).isEmpty, bad)
    assert(LineageConf.MaxPendingBytes.from(Map(LineageConf.MaxPendingBytes.key -> "256mb")) == (256L << 20))
  }

  test("durations take every form of Spark's time strings; a bare number is milliseconds") {
    val forms = Seq(
      "1500" -> 1500L,
      "1500ms" -> 1500L,
      "2500us" -> 2L,
      "30s" -> 30000L,
      "5m" -> 300000L,
      "5min" -> 300000L,
      "1h" -> 3600000L,
      "2d" -> (2L * 86400000),
      " 6 H " -> (6L * 3600000)
    )
    for ((text, ms) <- forms) assert(ConfKind.Duration.parse(text).contains(ms), text)
    for (bad <- Seq("1.5h", "30sec", "h", "9999999999999999d"))
      assert(ConfKind.Duration.parse(bad).isEmpty, bad)
    val grace = LineageConf.OrphanGracePeriodMs
    assert(grace.from(Map(grace.key -> "6h")) == 6L * 3600000)
    val e = intercept[InvalidConfigException](LineageConf.validate(Map(grace.key -> "-1s")))
    assert(e.getMessage.contains(grace.key) && e.getMessage.contains("must be at least 0"))
  }

  test("an unknown key names the nearest known key") {
    val typo = LineageConf.Prefix + "maxPendingByte"
    val e = intercept[InvalidConfigException](LineageConf.validate(Map(typo -> "64m")))
    assert(e.getMessage.contains(s"unknown configuration key $typo."))
    assert(e.getMessage.contains(s"Did you mean ${LineageConf.MaxPendingBytes.key}?"))
    assert(e.getMessage.contains("Known keys: "))
    assert(
      LineageConf.nearestKey(LineageConf.Prefix + "TRANSFERTHREAD").contains(LineageConf.TransferThreads.key)
    )
    assert(
      LineageConf.nearestKey(LineageConf.Prefix + "localRetention").contains(LineageConf.LocalRetentionMs.key)
    )
    val far = LineageConf.Prefix + "somethingElseEntirely"
    assert(LineageConf.nearestKey(far).isEmpty)
    val e2 = intercept[InvalidConfigException](LineageConf.validate(Map(far -> "1")))
    assert(!e2.getMessage.contains("Did you mean"))
  }
}

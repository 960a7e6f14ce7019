package io.lineagestore.spark

import java.nio.file.{Files, Paths}

import org.scalatest.funsuite.AnyFunSuite

/** docs/operations.md lists every custom metric with the description the provider reports. */
class MetricsDocsSuite extends AnyFunSuite {
  private lazy val operationsDoc = {
    val root = Iterator
      .iterate(Paths.get("").toAbsolutePath)(_.getParent)
      .takeWhile(_ != null)
      .find(p => Files.exists(p.resolve("VERSION")))
      .get
    new String(Files.readAllBytes(root.resolve("docs/operations.md")), "UTF-8")
  }

  test("every custom metric is in the metrics table of docs/operations.md, and nothing else is") {
    val rows = operationsDoc.linesIterator.collect {
      case l if l.startsWith("| `lineagestore") =>
        val cells = l.split('|').map(_.trim).filter(_.nonEmpty)
        cells(0).stripPrefix("`").stripSuffix("`") -> cells(1)
    }.toMap
    val declared = LineageMetrics.all.map(m => m.name -> m.desc).toMap
    assert(rows == declared, "update the table under `## Metrics` in docs/operations.md")
  }
}

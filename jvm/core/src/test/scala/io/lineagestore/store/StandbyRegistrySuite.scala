package io.lineagestore.store

import org.scalatest.funsuite.AnyFunSuite

/** The driver's registry of followed operators: a union of what executors report, aging out. */
class StandbyRegistrySuite extends AnyFunSuite {
  private val a = FollowedOperator("file:/q1/state", 0, "default")
  private val b = FollowedOperator("file:/q2/state", 1, "left-keyToNumValues")
  private def report(exec: String, ops: Set[FollowedOperator], settings: Map[String, String] = Map.empty) =
    StandbyRegistry.Report(exec, ops, settings)

  test("the answer is every operator any executor reported, with the settings of one that runs a follower") {
    val r = new StandbyRegistry(minAgeMs = 1000)
    assert(r.report(report("1", Set(a)), 0) == StandbyRegistry.Directory(Set(a), Map.empty))
    val d = r.report(report("2", Set(b), Map("replicas" -> "-1")), 10)
    assert(d.operators == Set(a, b) && d.settings == Map("replicas" -> "-1"))
    // a cold executor reports nothing and learns both, and settings to start a follower with
    assert(r.report(report("3", Set.empty), 20) == d)
  }

  test("an executor's newer report replaces its older one; a report that stops ages out") {
    val r = new StandbyRegistry(minAgeMs = 1000)
    r.report(report("1", Set(a, b)), 0)
    assert(r.report(report("1", Set(b)), 500).operators == Set(b), "executor 1 closed its store of a")
    r.report(report("2", Set(a)), 600)
    assert(r.report(report("3", Set.empty), 1400).operators == Set(a, b))
    assert(r.report(report("3", Set.empty), 1501).operators == Set(a), "executor 1 stopped reporting at 500")
    assert(r.report(report("3", Set.empty), 5000).operators.isEmpty)
  }

  test("a follower that polls rarely is kept for a few of its own intervals") {
    val r = new StandbyRegistry(minAgeMs = 1000, ageInPolls = 3)
    r.report(report("1", Set(a), Map(StandbyRegistry.PollMsKey -> "60000")), 0)
    assert(r.report(report("2", Set.empty), 179000).operators == Set(a))
    assert(r.report(report("2", Set.empty), 181000).operators.isEmpty)
  }

  test("reports and answers survive their text form, whatever a location or a value holds") {
    val odd = FollowedOperator("s3a://b/q 1/state\nx\ty", 7, "name with spaces")
    val r = report("exec 1", Set(a, odd), Map("k" -> "v w\n", StandbyRegistry.PollMsKey -> "1000"))
    assert(StandbyRegistry.decodeReport(r.encode) == r)
    assert(StandbyRegistry.decodeReport(report("2", Set.empty).encode) == report("2", Set.empty))
    val d = StandbyRegistry.Directory(Set(odd), Map("a" -> ""))
    assert(StandbyRegistry.decodeDirectory(d.encode) == d)
    assert(
      StandbyRegistry
        .decodeDirectory(StandbyRegistry.Directory(Set.empty, Map.empty).encode)
        .operators
        .isEmpty
    )
  }
}

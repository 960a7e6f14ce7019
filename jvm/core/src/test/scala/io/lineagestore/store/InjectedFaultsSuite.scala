package io.lineagestore.store

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.config.InvalidConfigException
import io.lineagestore.testing.TempDirs

class InjectedFaultsSuite extends AnyFunSuite {
  import InjectedFaults._

  test("no conf: no faults") {
    assert(fromConfs(Map.empty) eq CrashPoints.None)
    assert(fromConfs(Map(FailOnceAtKey -> " ")) eq CrashPoints.None)
  }

  test("each named step fails exactly once per marker directory; other steps pass") {
    val dir = TempDirs.create("faults")
    val faults = fromConfs(
      Map(FailOnceAtKey -> "commit.after-delta, snapshot.after-blobs", MarkerDirKey -> dir.getPath)
    )
    faults.at(CrashPoints.CommitBeforeDelta)
    val e = intercept[InjectedFault](faults.at(CrashPoints.CommitAfterDelta))
    assert(e.getMessage.contains("commit.after-delta"))
    faults.at(CrashPoints.CommitAfterDelta) // armed once
    intercept[InjectedFault](faults.at(CrashPoints.SnapshotAfterBlobs))
    // a second instance (another store, a restarted query) sees the markers
    fromConfs(Map(FailOnceAtKey -> "commit.after-delta", MarkerDirKey -> dir.getPath))
      .at(CrashPoints.CommitAfterDelta)
  }

  test("an unknown step or a missing marker directory is a clear error") {
    val e1 = intercept[InvalidConfigException](fromConfs(Map(FailOnceAtKey -> "commit.whenever")))
    assert(e1.getMessage.contains("commit.whenever") && e1.getMessage.contains("commit.after-delta"))
    val e2 = intercept[InvalidConfigException](fromConfs(Map(FailOnceAtKey -> "commit.after-delta")))
    assert(e2.getMessage.contains(MarkerDirKey))
  }
}

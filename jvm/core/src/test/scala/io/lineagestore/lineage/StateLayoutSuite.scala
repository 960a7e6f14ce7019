package io.lineagestore.lineage

import org.scalatest.funsuite.AnyFunSuite

/** Spark's layout of state stores under a checkpoint, as the tools, repartition and migrate name them. */
class StateLayoutSuite extends AnyFunSuite {

  test("the default store is the partition's directory; a named store is a directory under it") {
    assert(StateLayout.storeDir("s3a://b/cp", 0, 3, "default") == "s3a://b/cp/state/0/3")
    assert(
      StateLayout.storeDir(
        "s3a://b/cp/",
        2,
        0,
        "left-keyToNumValues"
      ) == "s3a://b/cp/state/2/0/left-keyToNumValues"
    )
    assert(StateLayout.storeDir("file:/tmp/cp/state/1", 4, "default") == "file:/tmp/cp/state/1/4")
    assert(StateLayout.storeDir("file:/tmp/cp/state/1/", 4, "right") == "file:/tmp/cp/state/1/4/right")
  }

  test("an empty checkpoint gives paths relative to it") {
    assert(StateLayout.stateRoot("") == "state")
    assert(StateLayout.operatorDir("", 5) == "state/5")
    assert(StateLayout.storeDir("", 5, 1, "default") == "state/5/1")
    assert(StateLayout.storeDir("", 5, 1, "x") == "state/5/1/x")
  }
}

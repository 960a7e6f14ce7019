package io.lineagestore.adjunct

import io.lineagestore.store.CrashPoints.Step

/** The named steps of an adjunct table's maintain (docs/adjunct-tables.md "Maintain"), for the same test hook
  * as a store's ([[io.lineagestore.store.InjectedFaults]]). Kept apart from the store's [[CrashPoints.All]]:
  * those are the steps every store reaches (the store crash suites iterate them), these only a maintain does.
  */
object MaintainCrashPoints {

  /** In a maintain task: its partition's checkpoint is committed (and its snapshots uploaded), its result not
    * yet returned: the task fails, Spark retries it, and the retry commits a second child of the same parent.
    */
  val AfterPartitionCommit: Step = Step("adjunct.after-partition-commit")

  /** On the driver: every partition's checkpoint is committed, the table record not written yet. */
  val BeforeRecord: Step = Step("adjunct.before-record")

  val All: Seq[Step] = Seq(AfterPartitionCommit, BeforeRecord)
}

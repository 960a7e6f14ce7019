package io.lineagestore.store

import java.nio.charset.StandardCharsets.UTF_8
import java.security.MessageDigest

import io.lineagestore.format.{SnapshotFile, SnapshotIndex}
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.snapshot.{LocalFile, SnapshotPlanner}

/** What a standby copy fetches, and where standbys live: pure functions of data, no I/O
  * (docs/architecture.md, "Recovery after executor loss and standby copies").
  */
object StandbyPlan {

  /** `standbyReplicas`' value for "one on every executor other than the owner". */
  val EveryExecutor: Int = -1

  /** The executors that hold standbys of the store `storeKey` (its [[LocalDirectories.keyOf]]), best first:
    * `replicas` of `executors` other than `owner` ([[EveryExecutor]]: all of them; fewer when fewer exist).
    *
    * Rendezvous hashing (highest random weight): each executor's weight for the store is a hash of the pair,
    * the heaviest hold the standbys. So every executor computes the same answer from the same set with no
    * coordination, the standbys do not move while the set and the owner stay (batch after batch), and an
    * executor joining or leaving moves only the standbys it wins or held, never the others'.
    */
  def holders(executors: Set[String], owner: Option[String], replicas: Int, storeKey: String): Seq[String] = {
    require(replicas >= EveryExecutor, s"standby replicas must be at least $EveryExecutor, got $replicas")
    val candidates = (executors -- owner).toSeq.sortBy(e => (-weight(storeKey, e), e))
    if (replicas == EveryExecutor) candidates else candidates.take(replicas)
  }

  /** Whether executor `self` holds a standby of `storeKey`. */
  def holds(self: String, executors: Set[String], owner: Option[String], replicas: Int, storeKey: String) =
    replicas != 0 && holders(executors + self, owner, replicas, storeKey).contains(self)

  /** Whether executor `self` follows the store `storeKey` when it does not know the store's owner (an
    * executor knows only whether a provider of the store is open on itself, `ownedHere`; the driver's
    * coordinator knows where the store is): the `replicas` + 1 heaviest executors follow, but the owner. So a
    * store has `replicas` standbys when its owner is among them, one more when it is not, and never fewer.
    */
  def follows(self: String, executors: Set[String], ownedHere: Boolean, replicas: Int, storeKey: String) =
    replicas != 0 && !ownedHere && {
      val n = if (replicas == EveryExecutor) EveryExecutor else replicas + 1
      holders(executors + self, None, n, storeKey).contains(self)
    }

  private def weight(storeKey: String, executor: String): Long = {
    val d = MessageDigest.getInstance("SHA-256").digest(s"$storeKey\u0000$executor".getBytes(UTF_8))
    d.take(8).foldLeft(0L)((acc, b) => (acc << 8) | (b & 0xffL))
  }

  /** What a standby's directory does to become a copy of snapshot `index`: the decision of a restore
    * ([[SnapshotPlanner.planDownload]]), so a standby keeps exactly the files a restore would keep and is
    * never a second opinion on what matches. `local`: the directory's files (identity where known).
    */
  final case class Fetch(
      snapshot: CheckpointId,
      keep: Seq[SnapshotFile],
      fetch: Seq[SnapshotFile],
      inline: Seq[SnapshotFile],
      delete: Seq[String]
  ) {

    /** Bytes read from the blob store's shared area (the small inline files come from the zip). */
    def bytesToFetch: Long = fetch.map(_.size).sum

    /** Bytes the copy holds once complete. */
    def bytesHeld: Long = (keep ++ fetch ++ inline).map(_.size).sum

    def isComplete: Boolean = fetch.isEmpty && delete.isEmpty
  }

  def fetch(index: SnapshotIndex, local: Seq[LocalFile]): Fetch = {
    val p = SnapshotPlanner.planDownload(index, local)
    // inline files that are present with their size are rewritten anyway (they are small, and a restore does)
    Fetch(index.checkpoint, p.keep, p.download, p.inline, p.removeLocal.filterNot(p.inline.map(_.name).toSet))
  }

  /** Whether a copy holding `bytesHeld` fits beside `othersBytes` held by the executor's other standbys under
    * the executor-wide bound `maxBytes` (`standbyMaxBytes`).
    */
  def fits(bytesHeld: Long, othersBytes: Long, maxBytes: Long): Boolean =
    bytesHeld >= 0 && othersBytes >= 0 && bytesHeld <= maxBytes - othersBytes

  /** Whether a standby that reached `reached` (the snapshot its record names, None: nothing complete) must
    * fetch to follow `wanted`, the snapshot the committed checkpoint's load plan starts from.
    */
  def behind(reached: Option[CheckpointId], wanted: CheckpointId): Boolean = !reached.contains(wanted)

  /** The delay before a standby's next poll: `intervalMs` after a success, doubling with each consecutive
    * failure up to `maxMs` (storage refusing, a file gone under clean-up), so a failing store does not poll
    * hot.
    */
  def nextPollMs(consecutiveFailures: Int, intervalMs: Long, maxMs: Long): Long = {
    require(intervalMs > 0 && maxMs >= intervalMs, s"poll interval $intervalMs must be > 0 and <= max $maxMs")
    var delay = intervalMs
    var left = consecutiveFailures
    while (left > 0 && delay < maxMs) { delay = if (delay > maxMs / 2) maxMs else delay * 2; left -= 1 }
    delay
  }
}

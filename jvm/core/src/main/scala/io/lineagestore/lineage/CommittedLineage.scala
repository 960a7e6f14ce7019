package io.lineagestore.lineage

import scala.util.control.NonFatal

/** One batch's entry in Spark's commit log for one store: batch `batchId` committed checkpoint `id` (whose
  * version is batchId + 1).
  */
final case class CommitLogEntry(batchId: Long, id: CheckpointId)

object CommitLogEntry {

  /** Parses the text form Python passes: one `<batchId> <version> <uniqueId>` per line. */
  def parseLines(text: String): Seq[CommitLogEntry] =
    Option(text).getOrElse("").split("\n").toSeq.map(_.trim).filter(_.nonEmpty).map { line =>
      line.split(" ") match {
        case Array(b, v, id) => CommitLogEntry(b.toLong, CheckpointId(v.toLong, id))
        case _               =>
          throw new IllegalArgumentException(
            s"commit log line '$line' is not '<batchId> <version> <uniqueId>'"
          )
      }
    }
}

/** What is known of one store's committed lineage: the unique ID committed at each known version, the newest
  * committed checkpoint (`head`), and `freshStart`, the newest committed checkpoint whose delta starts from
  * the empty state (a repartition), when the known part reaches one. Immutable: the provider's clean-up keeps
  * one in an atomic reference and replaces it; the tools build one per call.
  *
  * It is learned from three sources, all through this class: Spark's commit log ([[CommittedLineage.of]]),
  * the loads Spark asks for ([[loaded]]) and delta headers ([[extendDown]], the one walk of [[LineageWalk]]).
  * `conflicts` lists disagreements between them (clean-up refuses to run on them); `errors` lists headers
  * that could not be read (what is known stops there).
  */
final case class CommittedLineage(
    head: Option[CheckpointId],
    committed: Map[Long, String],
    batchOf: Map[Long, Long] = Map.empty,
    conflicts: Seq[String] = Nil,
    errors: Seq[String] = Nil,
    freshStart: Option[CheckpointId] = None
) {
  def isCommitted(id: CheckpointId): Boolean = committed.get(id.version).contains(id.uniqueId)

  /** committed: on the chosen lineage; pending: newer than the last committed batch (a batch in progress or
    * one that failed before Spark committed it); orphan: another attempt of a committed version; unknown:
    * below what the commit log and the remaining delta headers tell.
    */
  def status(id: CheckpointId): String =
    if (isCommitted(id)) "committed"
    else if (head.forall(h => id.version > h.version)) "pending"
    else if (committed.contains(id.version)) "orphan"
    else "unknown"

  /** Committed checkpoints, newest first. */
  def path: Seq[CheckpointId] =
    committed.toSeq.sortBy(-_._1).map { case (v, id) => CheckpointId(v, id) }

  /** The oldest committed checkpoint known. */
  def oldestKnown: Option[CheckpointId] =
    if (committed.isEmpty) None else Some(committed.minBy(_._1)).map { case (v, id) => CheckpointId(v, id) }

  /** Spark loaded `head` (so it is committed) following `lineage` (its ancestors, newest first, down to the
    * load's base), which is committed too. What was known above `head` is not committed after all (an older
    * load believed in another attempt), and a `freshStart` the load replayed ends the lineage: what was known
    * below it is another lineage.
    */
  def loaded(
      head: CheckpointId,
      lineage: Seq[CheckpointId],
      freshStart: Option[CheckpointId]
  ): CommittedLineage =
    if (head.isEmptyState) this
    else {
      val below = freshStart.fold(committed)(f => committed.filter(_._1 >= f.version))
      val known = below.filter(_._1 < head.version) ++ lineage.map(a => a.version -> a.uniqueId) +
        (head.version -> head.uniqueId)
      val start = freshStart.orElse(this.freshStart).filter(f => known.get(f.version).contains(f.uniqueId))
      copy(head = Some(head), committed = known, freshStart = start)
    }

  /** Extends what is known by walking delta headers down from `from` ([[LineageWalk.down]]) until `enough`
    * holds, the lineage reaches version 1 or a fresh start, or a delta is missing (cleaned: the lineage is
    * known down to there). An ancestor that disagrees with what is known is a conflict and changes nothing; a
    * header that cannot be read ends the walk with an error.
    */
  def extendDown(
      from: CheckpointId,
      source: LineageSource,
      enough: CommittedLineage => Boolean = _ => false
  ): CommittedLineage = {
    var known = this
    val steps = LineageWalk.down(from, source)
    try {
      while (!enough(known) && steps.hasNext) {
        val step = steps.next()
        step.record.foreach(record => known = known.learn(step.id, record))
      }
    } catch {
      case NonFatal(e) =>
        known = known.copy(errors = known.errors :+ Option(e.getMessage).getOrElse(e.toString))
    }
    known
  }

  private def learn(id: CheckpointId, record: Lineage): CommittedLineage = {
    var known = committed
    val disagree = Seq.newBuilder[String]
    record.ancestors.foreach { a =>
      known.get(a.version) match {
        case Some(u) if u != a.uniqueId =>
          val said = if (batchOf.contains(a.version)) "the commit log" else "the lineage known so far"
          disagree += s"$said says version ${a.version} committed $u, but the lineage in ${id.deltaFileName} " +
            s"names ${a.uniqueId}"
        case Some(_) =>
        case None    => known += a.version -> a.uniqueId
      }
    }
    copy(
      committed = known,
      conflicts = conflicts ++ disagree.result(),
      freshStart = if (record.fromEmpty) freshStart.orElse(Some(id)) else freshStart
    )
  }
}

object CommittedLineage {
  val Unknown: CommittedLineage = CommittedLineage(None, Map.empty)

  /** What Spark's commit log says: each entry's checkpoint is committed; two entries naming different unique
    * IDs for one version are a conflict.
    */
  def of(log: Seq[CommitLogEntry]): CommittedLineage = {
    var committed = Map.empty[Long, String]
    var batchOf = Map.empty[Long, Long]
    val conflicts = Seq.newBuilder[String]
    log.sortBy(_.batchId).foreach { e =>
      committed.get(e.id.version) match {
        case Some(other) if other != e.id.uniqueId =>
          conflicts += s"commit log batches ${batchOf(e.id.version)} and ${e.batchId} both name version " +
            s"${e.id.version} (unique IDs $other and ${e.id.uniqueId})"
        case _ =>
          committed += e.id.version -> e.id.uniqueId
          batchOf += e.id.version -> e.batchId
      }
    }
    val head = log.map(_.id).sortBy(_.version).lastOption
    CommittedLineage(head, committed, batchOf, conflicts.result())
  }

  /** The commit log plus the delta headers from its newest entry down, which reach further back than the
    * commit log after Spark purged it, and are checked against it.
    */
  def resolve(source: LineageSource, log: Seq[CommitLogEntry]): CommittedLineage = {
    val fromLog = of(log)
    fromLog.head.fold(fromLog)(fromLog.extendDown(_, source))
  }
}

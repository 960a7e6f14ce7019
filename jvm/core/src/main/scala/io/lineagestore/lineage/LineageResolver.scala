package io.lineagestore.lineage

import scala.collection.mutable.ArrayBuffer

/** The lineage record of one checkpoint (the header of its delta file).
  *
  * @param ancestors
  *   the checkpoints of versions v-1, v-2, ... newest first, down to the snapshot the writer presumed
  * @param fromEmpty
  *   the checkpoint's delta holds its complete state on top of the empty state, and no version below it
  *   belongs to its lineage: the store started afresh at this version (Spark's `loadEmpty`, used by offline
  *   repartitioning). Then `ancestors` is empty. Version 1 starts from the empty state without saying so.
  */
final case class Lineage(ancestors: Seq[CheckpointId], fromEmpty: Boolean = false) {
  require(!fromEmpty || ancestors.isEmpty, "a lineage that starts from the empty state has no ancestors")
}

/** What the resolver may ask about a store's checkpoint directory. Implementations do I/O; the resolver
  * itself only decides, so it is tested with an in-memory map.
  */
trait LineageSource {

  /** Whether `<version>_<uniqueId>.zip` exists (a complete snapshot). */
  def hasSnapshot(id: CheckpointId): Boolean

  /** The lineage record of `<version>_<uniqueId>.delta`: the checkpoints of versions v-1, v-2, ... down to
    * the snapshot its writer presumed, newest first. None when that delta file does not exist.
    */
  def ancestorsOf(id: CheckpointId): Option[Seq[CheckpointId]]

  /** The whole lineage record of `<version>_<uniqueId>.delta` (ancestors, and whether it starts from the
    * empty state). None when that delta file does not exist. Sources that never hold a fresh start need not
    * override it.
    */
  def lineageOf(id: CheckpointId): Option[Lineage] = ancestorsOf(id).map(Lineage(_))

  /** Where the file `name` of this source is (e.g. its full `s3a://` URI), for errors that name it. */
  def locate(name: String): String = name
}

/** Where a load starts from. */
sealed trait LoadBase { def id: CheckpointId }
object LoadBase {
  case object Empty extends LoadBase { val id: CheckpointId = CheckpointId.Empty }
  final case class Snapshot(id: CheckpointId) extends LoadBase
  final case class Local(id: CheckpointId) extends LoadBase
}

/** How to reach `target`: open `base`, then replay `deltas` (ascending versions, each the child of the one
  * before, the last being `target`). `lineage` lists target's ancestors newest first down to base's version
  * (inclusive; empty when the base is the empty state at version 0 and target is version 1). With the empty
  * state as base, the first delta is version 1 or a delta that starts from the empty state ([[freshStart]]).
  */
final case class LoadPlan(
    target: CheckpointId,
    base: LoadBase,
    deltas: Seq[CheckpointId],
    lineage: Seq[CheckpointId]
) {
  def isNoOp: Boolean = base == LoadBase.Local(target)

  /** The replayed delta that starts from the empty state above version 1, if the plan replays one. */
  def freshStart: Option[CheckpointId] =
    if (base == LoadBase.Empty) deltas.headOption.filter(_.version > 1) else None
}

/** A lineage that cannot be followed. `file` is the full location of the file at fault, for tools that report
  * problems per file; `missing`: that file does not exist (else its lineage record is broken).
  */
class LineageException(message: String, val file: String, val missing: Boolean = false)
    extends IllegalStateException(message)

/** Resolves which files rebuild a checkpoint, following the checkpoint-structure-V2 design:
  *   1. the store already holds `target` locally: nothing to do;
  *   2. otherwise read target's delta lineage; if the local store is at one of its ancestors, replay from
  *      there;
  *   3. otherwise take the newest snapshot among target and its ancestors;
  *   4. if no presumed snapshot exists (its upload failed or was cleaned), keep tracing lineage through the
  *      oldest ancestor's own delta, down to the empty state at version 0 if that is what it takes, or down
  *      to a delta that starts from the empty state (a fresh start at its version: nothing below it is read).
  * Attempts outside the lineage (another unique ID at some version) are never looked at.
  *
  * `unusable` snapshots (a load found their zip, INDEX or an SST damaged or missing) count as absent: the
  * plan then takes the next route, an older snapshot and more deltas, or the deltas down to the empty state
  * (a detour). The caller decides what is unusable; the plan stays a function of what it is told.
  */
object LineageResolver {

  def plan(
      target: CheckpointId,
      local: Option[CheckpointId],
      allSources: LineageSource,
      unusable: Set[CheckpointId] = Set.empty
  ): LoadPlan = {
    val source = if (unusable.isEmpty) allSources else without(allSources, unusable)
    if (local.contains(target)) return LoadPlan(target, LoadBase.Local(target), Nil, Nil)
    if (target.isEmptyState) return LoadPlan(target, LoadBase.Empty, Nil, Nil)

    val chain = ArrayBuffer[CheckpointId](target) // target, then ancestors, newest first

    // chain ends with the base's checkpoint (or at version 1 when the base is the empty state)
    def finish(base: LoadBase): LoadPlan =
      LoadPlan(target, base, chain.takeWhile(_ != base.id).reverse.toList, chain.drop(1).toList)

    val steps = LineageWalk.down(target, source)
    while (steps.hasNext) {
      val LineageStep(cursor, record) = steps.next()
      val ancestors = record match {
        case Some(l)                                                => l.ancestors
        case None if cursor == target && source.hasSnapshot(target) =>
          return LoadPlan(target, LoadBase.Snapshot(target), Nil, Nil)
        case None =>
          val file = source.locate(cursor.deltaFileName)
          throw new LineageException(
            s"cannot load checkpoint $target: the delta file $file it depends on is missing " +
              s"(lineage so far: ${chain.mkString(" <- ")}). The checkpoint directory was damaged or cleaned " +
              "by hand; restore the missing file or restart the query from an older checkpoint (step by step: " +
              "docs/operations.md#restarting-from-an-older-checkpoint).",
            file,
            missing = true
          )
      }
      if (cursor == target) {
        local.find(ancestors.contains) match {
          case Some(l) =>
            chain ++= ancestors.takeWhile(_ != l)
            chain += l
            return finish(LoadBase.Local(l))
          case None =>
            if (source.hasSnapshot(target)) return LoadPlan(target, LoadBase.Snapshot(target), Nil, Nil)
        }
      }
      ancestors.foreach { a =>
        chain += a
        if (source.hasSnapshot(a)) return finish(LoadBase.Snapshot(a))
      }
    }
    // the walk ended at version 1 or at a delta that starts from the empty state
    finish(LoadBase.Empty)
  }

  private def without(s: LineageSource, unusable: Set[CheckpointId]): LineageSource = new LineageSource {
    override def hasSnapshot(id: CheckpointId): Boolean = !unusable(id) && s.hasSnapshot(id)
    override def ancestorsOf(id: CheckpointId): Option[Seq[CheckpointId]] = s.ancestorsOf(id)
    override def lineageOf(id: CheckpointId): Option[Lineage] = s.lineageOf(id)
    override def locate(name: String): String = s.locate(name)
  }

  /** The committed checkpoints of versions `downTo` .. target.version (ascending), following delta lineage
    * records only: the changes a change feed from `downTo` to target reads.
    */
  def chain(target: CheckpointId, downTo: Long, source: LineageSource): Seq[CheckpointId] = {
    require(downTo >= 1 && downTo <= target.version, s"version range $downTo..${target.version} is empty")
    val out = ArrayBuffer[CheckpointId](target)
    val steps = LineageWalk.down(target, source)
    // each step reads the record of out.last: the walk follows the oldest ancestor, as out does
    while (out.last.version > downTo) {
      val LineageStep(cursor, record) = steps.next()
      val file = source.locate(cursor.deltaFileName)
      val lineage = record.getOrElse(
        throw new LineageException(
          s"cannot read changes down to version $downTo from $target: $file is missing " +
            "(deltas older than the retention window are cleaned; ask for a newer start version)",
          file,
          missing = true
        )
      )
      if (lineage.fromEmpty) {
        throw new LineageException(
          s"cannot read changes down to version $downTo from $target: the store started afresh from an empty " +
            s"state at version ${cursor.version} (${cursor.deltaFileName}, e.g. offline repartitioning), so " +
            s"versions below it are not on this lineage; ask for changes from version ${cursor.version} on",
          file
        )
      }
      out ++= lineage.ancestors.takeWhile(_.version >= downTo)
    }
    out.reverse.toSeq
  }
}

package io.lineagestore.lineage

import scala.annotation.tailrec
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

class LineageException(message: String) extends IllegalStateException(message)

/** Resolves which files rebuild a checkpoint, following the checkpoint-structure-V2 design:
  *   1. the store already holds `target` locally: nothing to do;
  *   2. otherwise read target's delta lineage; if the local store is at one of its ancestors, replay from
  *      there;
  *   3. otherwise take the newest snapshot among target and its ancestors;
  *   4. if no presumed snapshot exists (its upload failed or was cleaned), keep tracing lineage through the
  *      oldest ancestor's own delta, down to the empty state at version 0 if that is what it takes, or down
  *      to a delta that starts from the empty state (a fresh start at its version: nothing below it is read).
  * Attempts outside the lineage (another unique ID at some version) are never looked at.
  */
object LineageResolver {

  def plan(target: CheckpointId, local: Option[CheckpointId], source: LineageSource): LoadPlan = {
    if (local.contains(target)) return LoadPlan(target, LoadBase.Local(target), Nil, Nil)
    if (target.isEmptyState) return LoadPlan(target, LoadBase.Empty, Nil, Nil)

    val chain = ArrayBuffer[CheckpointId](target) // target, then ancestors, newest first

    // chain ends with the base's checkpoint (or at version 1 when the base is the empty state)
    def finish(base: LoadBase): LoadPlan =
      LoadPlan(target, base, chain.takeWhile(_ != base.id).reverse.toList, chain.drop(1).toList)

    @tailrec
    def walk(cursor: CheckpointId): LoadPlan = {
      val lineage = source.lineageOf(cursor) match {
        case Some(l)                                                => l
        case None if cursor == target && source.hasSnapshot(target) =>
          return LoadPlan(target, LoadBase.Snapshot(target), Nil, Nil)
        case None =>
          throw new LineageException(
            s"cannot load checkpoint $target: the delta file ${source.locate(cursor.deltaFileName)} it depends on " +
              "is missing " +
              s"(lineage so far: ${chain.mkString(" <- ")}). The checkpoint directory was damaged or cleaned " +
              "by hand; restore the missing file or restart the query from an older checkpoint (step by step: " +
              "docs/operations.md#restarting-from-an-older-checkpoint)."
          )
      }
      val ancestors = lineage.ancestors
      checkContiguous(cursor, lineage, source)
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
      var i = 0
      while (i < ancestors.size) {
        val a = ancestors(i)
        chain += a
        if (source.hasSnapshot(a)) return finish(LoadBase.Snapshot(a))
        i += 1
      }
      val oldest = chain.last
      if (oldest.version == 1 || lineage.fromEmpty) finish(LoadBase.Empty)
      else walk(oldest)
    }

    walk(target)
  }

  /** The committed checkpoints of versions `downTo` .. target.version (ascending), following delta lineage
    * records only: the changes a change feed from `downTo` to target reads.
    */
  def chain(target: CheckpointId, downTo: Long, source: LineageSource): Seq[CheckpointId] = {
    require(downTo >= 1 && downTo <= target.version, s"version range $downTo..${target.version} is empty")
    val out = ArrayBuffer[CheckpointId](target)
    while (out.last.version > downTo) {
      val cursor = out.last
      val lineage = source
        .lineageOf(cursor)
        .getOrElse(
          throw new LineageException(
            s"cannot read changes down to version $downTo from $target: ${source.locate(cursor.deltaFileName)} " +
              "is missing " +
              "(deltas older than the retention window are cleaned; ask for a newer start version)"
          )
        )
      checkContiguous(cursor, lineage, source)
      if (lineage.fromEmpty) {
        throw new LineageException(
          s"cannot read changes down to version $downTo from $target: the store started afresh from an empty " +
            s"state at version ${cursor.version} (${cursor.deltaFileName}, e.g. offline repartitioning), so " +
            s"versions below it are not on this lineage; ask for changes from version ${cursor.version} on"
        )
      }
      out ++= lineage.ancestors.takeWhile(_.version >= downTo)
    }
    out.reverse.toSeq
  }

  /** The lineage of `child` must list versions child-1, child-2, ... with no gap. */
  private def checkContiguous(child: CheckpointId, lineage: Lineage, source: LineageSource): Unit = {
    val ancestors = lineage.ancestors
    ancestors.zipWithIndex.foreach { case (a, i) =>
      val expected = child.version - 1 - i
      if (a.version != expected || expected < 1) {
        throw new LineageException(
          s"lineage record of ${source.locate(child.deltaFileName)} is inconsistent: entry $i is $a, expected version " +
            s"$expected. The file was not written by lineagestore or is damaged."
        )
      }
    }
    if (ancestors.isEmpty && child.version > 1 && !lineage.fromEmpty) {
      throw new LineageException(
        s"lineage record of ${source.locate(child.deltaFileName)} is empty but version ${child.version} needs a parent. " +
          "The file was not written by lineagestore or is damaged."
      )
    }
  }
}

package io.lineagestore.store

import io.lineagestore.format.CorruptCheckpointFileException
import io.lineagestore.lineage.CheckpointId

/** A load found no route to `target`: every route it tried needs a file that is damaged, foreign or missing.
  * Names each of those files with what is wrong with it, the versions of the lineage that cannot be rebuilt
  * from what is left (from the oldest unusable delta to the target: every route to them needs one of these
  * files, as each snapshot in between was tried), and what to do. `file` and `detail` are the first file's.
  */
final class NoRouteException(
    val target: CheckpointId,
    val unusable: Seq[CorruptCheckpointFileException]
) extends CorruptCheckpointFileException(
      unusable.head.file,
      s"${unusable.head.detail}, and no other route rebuilds $target",
      unusable.head
    ) {
  unusable.tail.foreach(addSuppressed)

  /** The versions no route rebuilds: from the oldest unusable delta (or the target itself) to the target. */
  val versions: (Long, Long) = {
    val deltas = unusable.flatMap { e =>
      CheckpointId.parseFileName(e.file.split('/').last).collect {
        case (id, CheckpointId.Delta) if id.version <= target.version => id.version
      }
    }
    ((deltas :+ target.version).min, target.version)
  }

  override def getMessage: String = {
    val (from, to) = versions
    val which = if (from == to) s"version $to" else s"versions $from..$to"
    s"lineagestore cannot rebuild checkpoint $target: no other route rebuilds it from the files left. " +
      s"Damaged or missing: ${unusable.map(e => s"${e.file} (${e.detail})").mkString("; ")}. " +
      s"No route rebuilds $which of this lineage without them. What to do: put the files back from a " +
      "backup and restart the query, or restart it from the last batch whose state loads without them, as " +
      "docs/operations.md#restarting-from-an-older-checkpoint says (`lineagestore verify <checkpoint>` names " +
      "the damaged files and the batches that need them). Nothing was loaded."
  }
}

private[store] object NoRouteException {
  def apply(target: CheckpointId, unusable: Seq[CorruptCheckpointFileException]): NoRouteException = {
    new NoRouteException(target, unusable.distinctBy(_.file)) // one entry per file, in the order met
  }
}

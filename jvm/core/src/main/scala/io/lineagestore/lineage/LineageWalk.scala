package io.lineagestore.lineage

/** One step of a walk down a lineage: the lineage record of `id`'s delta, or None when that delta does not
  * exist.
  */
final case class LineageStep(id: CheckpointId, record: Option[Lineage])

/** The one walk down a committed lineage by its delta headers. Every reader of lineage goes through it: the
  * load planner ([[LineageResolver.plan]]), the change feed ([[LineageResolver.chain]]) and what clean-up and
  * the tools know of the committed lineage ([[CommittedLineage.extendDown]]).
  */
object LineageWalk {

  /** The lineage records from `start` down: start's, then that of the oldest ancestor it lists, and so on.
    * The walk ends after a record whose oldest ancestor is version 1 (its delta adds nothing to the lineage)
    * or that starts from the empty state, or at a checkpoint whose delta is missing (a step without record).
    *
    * Lazy: each header is read when the consumer asks for its step, so a consumer that has what it needs
    * stops reading by not asking. Every record read is checked first: its ancestors are versions v-1, v-2,
    * ... without a gap, and a record above version 1 names a parent unless it starts from the empty state; a
    * broken record throws [[LineageException]] naming the file. Versions strictly decrease, so the walk ends.
    */
  def down(start: CheckpointId, source: LineageSource): Iterator[LineageStep] = new Iterator[LineageStep] {
    private var cursor: Option[CheckpointId] = Some(start).filterNot(_.isEmptyState)

    override def hasNext: Boolean = cursor.isDefined

    override def next(): LineageStep = {
      val id = cursor.getOrElse(throw new NoSuchElementException("the lineage walk has ended"))
      val record = source.lineageOf(id)
      record.foreach(checkContiguous(id, _, source))
      cursor = record.filterNot(_.fromEmpty).flatMap(_.ancestors.lastOption).filter(_.version > 1)
      LineageStep(id, record)
    }
  }

  /** The lineage of `child` must list versions child-1, child-2, ... with no gap. */
  private def checkContiguous(child: CheckpointId, lineage: Lineage, source: LineageSource): Unit = {
    val file = source.locate(child.deltaFileName)
    lineage.ancestors.zipWithIndex.foreach { case (a, i) =>
      val expected = child.version - 1 - i
      if (a.version != expected || expected < 1) {
        throw new LineageException(
          s"lineage record of $file is inconsistent: entry $i is $a, expected version $expected. The file was " +
            "not written by lineagestore or is damaged.",
          file
        )
      }
    }
    if (lineage.ancestors.isEmpty && child.version > 1 && !lineage.fromEmpty) {
      throw new LineageException(
        s"lineage record of $file is empty but version ${child.version} needs a parent. The file was not " +
          "written by lineagestore or is damaged.",
        file
      )
    }
  }
}

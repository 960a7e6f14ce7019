package io.lineagestore.lineage

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.lineage.CheckpointId.{Delta, Snapshot}

/** The one clean-up decision and the committed lineage it works from, as functions of data: the provider's
  * maintenance and `lineagestore gc` both run exactly this.
  */
class CleanupPlannerSuite extends AnyFunSuite {
  private def c(v: Long) = CheckpointId(v, s"w$v")
  private def d(id: CheckpointId) = CheckpointFile(id, Delta)
  private def z(id: CheckpointId) = CheckpointFile(id, Snapshot)

  /** An in-memory store directory: each delta's lineage record; counts header reads. */
  private class Dir(records: Map[CheckpointId, Lineage], snapshots: Set[CheckpointId] = Set.empty)
      extends LineageSource {
    var reads = 0
    override def hasSnapshot(id: CheckpointId): Boolean = snapshots(id)
    override def ancestorsOf(id: CheckpointId): Option[Seq[CheckpointId]] = lineageOf(id).map(_.ancestors)
    override def lineageOf(id: CheckpointId): Option[Lineage] = { reads += 1; records.get(id) }
  }

  /** Versions 1..n, each delta listing its ancestors down to the last multiple of 5 below it. */
  private def chainOf(n: Long): Map[CheckpointId, Lineage] = (1L to n).map { v =>
    val base = math.max(1L, ((v - 1) / 5) * 5)
    c(v) -> Lineage(if (v == 1) Nil else (v - 1 to base by -1).map(c))
  }.toMap

  private def lineageAt(head: Long) = CommittedLineage(Some(c(head)), Map(head -> s"w$head"))

  private def input(
      lineage: CommittedLineage,
      existing: Seq[CheckpointFile],
      retain: Int = 3,
      listing: Option[Seq[SharedBlob]] = None,
      mayDeleteBlobs: Boolean = true,
      isListing: Boolean = false
  ) =
    CleanupInput(lineage, existing, isListing, retain, listing, mayDeleteBlobs, nowMs = 10000, graceMs = 1000)

  private def blobsFrom(m: Map[CheckpointId, Set[String]]): CheckpointId => Either[String, Set[String]] =
    id => m.get(id).toRight(s"${id.snapshotFileName} is unreadable")

  test("the walk reads delta headers down to what retention needs, and no further") {
    val dir = new Dir(chainOf(20))
    val snapshots = Set(c(10), c(15))
    val known = lineageAt(20).extendDown(c(20), dir, CleanupPlanner.knowsEnough(_, 3, snapshots))
    // 20's record lists 19..15; 15 is a snapshot at or below the oldest retained version 18: one read
    assert(dir.reads == 1)
    assert(known.committed.keySet == (15L to 20L).toSet)
    assert(CleanupPlanner.knowsEnough(known, 3, snapshots))
    // without any snapshot the walk goes down to version 1 and stops by itself
    val all =
      lineageAt(20).extendDown(c(20), new Dir(chainOf(20)), CleanupPlanner.knowsEnough(_, 3, Set.empty))
    assert(all.committed.keySet == (1L to 20L).toSet && all.errors.isEmpty)
  }

  test("the walk stops at a fresh start and at a missing delta; a broken record is an error, not a guess") {
    val fresh = chainOf(12) ++ Map(c(10) -> Lineage(Nil, fromEmpty = true))
    val l = lineageAt(12).extendDown(c(12), new Dir(fresh))
    assert(l.freshStart.contains(c(10)) && l.committed.keySet == (10L to 12L).toSet)
    val cleaned = lineageAt(12).extendDown(c(12), new Dir(chainOf(12) - c(10)))
    assert(cleaned.committed.keySet == (10L to 12L).toSet && cleaned.errors.isEmpty)
    val gap = chainOf(12) ++ Map(c(10) -> Lineage(Seq(c(8))))
    val broken = lineageAt(12).extendDown(c(12), new Dir(gap))
    assert(broken.errors.exists(e => e.contains("10_w10.delta") && e.contains("inconsistent")))
  }

  test("a load replaces what was believed above it and drops the lineage below a fresh start") {
    val before = CommittedLineage(Some(c(9)), (1L to 9L).map(v => v -> s"w$v").toMap)
    val reloaded = before.loaded(CheckpointId(7, "other"), Seq(c(6), c(5)), None)
    assert(reloaded.head.contains(CheckpointId(7, "other")))
    assert(reloaded.committed == (1L to 6L).map(v => v -> s"w$v").toMap + (7L -> "other"))
    val fresh = before.loaded(c(12), Seq(c(11), c(10)), Some(c(10)))
    assert(fresh.committed.keySet == Set(10L, 11L, 12L) && fresh.freshStart.contains(c(10)))
  }

  test("the commit log and a delta header that disagree are a conflict, and clean-up refuses") {
    val log = (1L to 4L).map(v => CommitLogEntry(v - 1, c(v))) :+ CommitLogEntry(4, CheckpointId(5, "x5"))
    val dir = new Dir(chainOf(5) + (CheckpointId(5, "x5") -> Lineage(Seq(CheckpointId(4, "other"), c(3)))))
    val l = CommittedLineage.resolve(dir, log)
    assert(l.conflicts.exists(m => m.contains("other") && m.contains("5_x5.delta")))
    val decision = CleanupPlanner.decide(input(l, Seq(d(c(1)))), blobsFrom(Map.empty))
    assert(decision.refused.exists(_.isInstanceOf[CleanupRefusal.Inconsistent]) && decision.isEmpty)
  }

  test("with a listing, a head that has no file is refused; no head is refused") {
    val l = lineageAt(5).copy(committed = (1L to 5L).map(v => v -> s"w$v").toMap)
    val listed = (1L to 4L).map(v => d(c(v)))
    val missing = CleanupPlanner.decide(input(l, listed, isListing = true), blobsFrom(Map.empty))
    assert(missing.refused.contains(CleanupRefusal.HeadMissing(c(5))))
    assert(
      CleanupPlanner
        .decide(input(CommittedLineage.Unknown, listed), blobsFrom(Map.empty))
        .refused
        .contains(
          CleanupRefusal.NoHead
        )
    )
  }

  test(
    "zips, then the blobs only they referenced, then deltas; a blob a retained snapshot references stays"
  ) {
    val l = CommittedLineage(Some(c(12)), (1L to 12L).map(v => v -> s"w$v").toMap)
    val existing = (1L to 12L).map(v => d(c(v))) ++ Seq(z(c(5)), z(c(10)))
    val blobs = Map(c(5) -> Set("a", "b", "c"), c(10) -> Set("b", "d"))
    val decision = CleanupPlanner.decide(input(l, existing), blobsFrom(blobs))
    assert(decision.zips == Seq(z(c(5))))
    assert(
      decision.blobs == Seq(
        "a" -> BlobVerdict.OfDeletedSnapshots(Seq(c(5))),
        "c" -> BlobVerdict.OfDeletedSnapshots(Seq(c(5)))
      )
    )
    assert(decision.deltas == (1L to 9L).map(v => d(c(v))))
  }

  test("with a listing, blobs no snapshot references go once past the grace period; younger ones stay") {
    val l = CommittedLineage(Some(c(12)), (1L to 12L).map(v => v -> s"w$v").toMap)
    val existing = (1L to 12L).map(v => d(c(v))) ++ Seq(z(c(10)))
    val listing = Seq(SharedBlob("d", 1, 0), SharedBlob("old", 1, 100), SharedBlob("young", 1, 9500))
    val decision =
      CleanupPlanner.decide(input(l, existing, listing = Some(listing)), blobsFrom(Map(c(10) -> Set("d"))))
    assert(decision.blobs == Seq("old" -> BlobVerdict.Orphan(9900)))
    assert(decision.youngOrphans.map(_.name) == Seq("young"))
  }

  test("temporaries of unfinished writes go past the grace period, except a delta above the head") {
    val l = CommittedLineage(Some(c(12)), (1L to 12L).map(v => v -> s"w$v").toMap)
    val existing = (1L to 12L).map(v => d(c(v))) ++ Seq(z(c(10)))
    def t(name: String, modified: Long, target: Option[CheckpointFile]) =
      TemporaryFile(name, 1, modified, target)
    val temporaries = Seq(
      t("old-delta", 100, Some(d(CheckpointId(12, "lost")))), // an attempt at the head that lost, or died
      t("old-zip", 100, Some(z(c(11)))),
      t("unknown", 100, None),
      t("running", 100, Some(d(CheckpointId(13, "now")))), // the next batch, however long it runs
      t("young", 9500, Some(d(CheckpointId(5, "x"))))
    )
    val listed = input(l, existing, listing = Some(Nil)).copy(temporaries = Some(temporaries))
    val decision = CleanupPlanner.decide(listed, blobsFrom(Map(c(10) -> Set.empty[String])))
    assert(decision.temporaries.map(_.name) == Seq("old-delta", "old-zip", "unknown"))
    // an upload of this store in flight may be writing a temporary of its own: none goes then
    val uploading = CleanupPlanner.decide(listed.copy(mayDeleteBlobs = false), blobsFrom(Map(c(10) -> Set())))
    assert(uploading.temporaries.isEmpty)
  }

  test("retention holds from a fresh start at the lowest: below it the commit log names another lineage") {
    // a migrate's fresh start at version 4; below it the commit log still names the batches of Spark's own
    // provider, whose snapshot of version 1 carries a name of the same form as ours
    val committed = (1L to 6L).map(v => v -> s"w$v").toMap
    val existing = Seq(z(c(1))) ++ (4L to 6L).map(v => d(c(v)))
    assert(RetentionPlanner.heldFrom(committed, existing, freshStart = Some(c(4))).contains(4L))
    // without the fresh start known, version 1 would count as a base retention holds from
    assert(RetentionPlanner.heldFrom(committed, existing).contains(1L))
  }

  test("the temporary of the delta this process is writing stays, at any version and any age") {
    // a re-run from an older version writes a delta at or below the committed head, as an attempt that
    // lost or died did: only the store knows which one it is writing now
    val l = CommittedLineage(Some(c(12)), (1L to 12L).map(v => v -> s"w$v").toMap)
    val existing = (1L to 12L).map(v => d(c(v))) ++ Seq(z(c(10)))
    val rerun = CheckpointId(9, "rerun")
    val temporaries = Seq(
      TemporaryFile("rerun", 1, 100, Some(d(rerun))),
      TemporaryFile("lost", 1, 100, Some(d(CheckpointId(9, "lost"))))
    )
    val listed = input(l, existing, listing = Some(Nil)).copy(temporaries = Some(temporaries))
    val blobs = blobsFrom(Map(c(10) -> Set.empty[String]))
    assert(CleanupPlanner.decide(listed, blobs).temporaries.map(_.name) == Seq("lost", "rerun"))
    val writing = listed.copy(deltaBeingWritten = Some(rerun))
    assert(CleanupPlanner.decide(writing, blobs).temporaries.map(_.name) == Seq("lost"))
  }

  test("an unreadable retained index: no blob is deleted, zips and deltas still are") {
    val l = CommittedLineage(Some(c(12)), (1L to 12L).map(v => v -> s"w$v").toMap)
    val existing = (1L to 12L).map(v => d(c(v))) ++ Seq(z(c(5)), z(c(10)))
    val listing = Some(Seq(SharedBlob("a", 1, 0), SharedBlob("orphan", 1, 0)))
    val decision =
      CleanupPlanner.decide(input(l, existing, listing = listing), blobsFrom(Map(c(5) -> Set("a"))))
    assert(!decision.blobsDecided && decision.blobs.isEmpty && decision.youngOrphans.isEmpty)
    assert(decision.zips == Seq(z(c(5))) && decision.deltas.nonEmpty)
    assert(decision.warnings.exists {
      case CleanupWarning.RetainedIndexUnreadable(id, err) =>
        id == c(10) && err.contains("10_w10.zip is unreadable")
      case _ => false
    })
  }

  test("while an upload is in flight no blob goes, and expired snapshots stay to say which blobs they free") {
    val l = CommittedLineage(Some(c(12)), (1L to 12L).map(v => v -> s"w$v").toMap)
    val existing = (1L to 12L).map(v => d(c(v))) ++ Seq(z(c(5)), z(c(10)))
    val blobs = Map(c(5) -> Set("a"), c(10) -> Set("b"))
    val decision = CleanupPlanner.decide(input(l, existing, mayDeleteBlobs = false), blobsFrom(blobs))
    assert(decision.zips.isEmpty && decision.blobs.isEmpty && decision.deltas == (1L to 9L).map(v => d(c(v))))
  }

  test("never deletes a blob that a retained snapshot references, for every window and snapshot layout") {
    val l = CommittedLineage(Some(c(20)), (1L to 20L).map(v => v -> s"w$v").toMap)
    for (retain <- 1 to 20; every <- 1 to 7) {
      val snaps = (every.toLong to 20L by every.toLong).map(c)
      val blobs = snaps.map(s => s -> Set(s"own-${s.version}", s"shared-${s.version / 4}")).toMap
      val existing = (1L to 20L).map(v => d(c(v))) ++ snaps.map(z)
      val decision = CleanupPlanner.decide(input(l, existing, retain = retain), blobsFrom(blobs))
      val kept = decision.retention.get.retainedSnapshots.flatMap(blobs).toSet
      assert(decision.blobs.map(_._1).forall(b => !kept(b)), s"retain=$retain every=$every")
      // and every deleted snapshot's own blob goes with it
      decision.zips.foreach(z => assert(decision.blobs.map(_._1).contains(s"own-${z.id.version}")))
    }
  }

  test("a store above a shrunk partition count retires once no retained batch names it") {
    // operator shrank to 4 partitions; store of partition 5 last named by batch 9
    assert(!CleanupPlanner.retired(5, 4, lastNamedBatch = 9, latestBatch = 11, retainBatches = 3)) // 9..11
    assert(CleanupPlanner.retired(5, 4, lastNamedBatch = 9, latestBatch = 12, retainBatches = 3)) // 10..12
    assert(!CleanupPlanner.retired(3, 4, lastNamedBatch = 9, latestBatch = 100, retainBatches = 3)) // exists
    assert(!CleanupPlanner.retired(5, 0, lastNamedBatch = 9, latestBatch = 100, retainBatches = 3)) // unknown
    // retired: everything up to the head goes, snapshots and their blobs too; an attempt above the head (a
    // repartition growing the operator again, in flight) stays, and so does a young unreferenced blob
    val existing =
      Seq(d(c(8)), z(c(8)), d(c(9)), d(c(10)), d(CheckpointId(12, "new")), z(CheckpointId(12, "new")))
    val lineage = CommittedLineage(Some(c(10)), Map(8L -> "w8", 9L -> "w9", 10L -> "w10"))
    val listing = Seq(SharedBlob("a.sst", 1, 0), SharedBlob("b.sst", 1, 0), SharedBlob("young.sst", 1, 9500))
    val blobs = Map(c(8) -> Set("a.sst"), CheckpointId(12, "new") -> Set("b.sst"))
    val decision = CleanupPlanner.decide(
      input(lineage, existing, listing = Some(listing), isListing = true).copy(retired = true),
      blobsFrom(blobs)
    )
    assert(decision.refused.isEmpty)
    assert(decision.zips == Seq(z(c(8))))
    assert(decision.deltas == Seq(d(c(8)), d(c(9)), d(c(10))))
    assert(decision.blobs.map(_._1) == Seq("a.sst"))
    assert(decision.youngOrphans.map(_.name) == Seq("young.sst"))
    // its head already deleted by an earlier clean-up that stopped part-way: not refused
    val rest = CleanupPlanner.decide(
      input(lineage, existing.filterNot(_.id == c(10)), isListing = true).copy(retired = true),
      blobsFrom(blobs)
    )
    assert(rest.refused.isEmpty && rest.deltas == Seq(d(c(8)), d(c(9))))
  }

  test("a shrunk store a clean-up retired whole holds nothing; one that holds files is judged as any") {
    val committed = Map(8L -> "w8", 9L -> "w9", 10L -> "w10")
    assert(
      CleanupPlanner.shrunkBelow(5, 4) && !CleanupPlanner.shrunkBelow(3, 4) && !CleanupPlanner.shrunkBelow(
        5,
        0
      )
    )
    // no file of its lineage left (an attempt above its head is not of it): past its newest version
    val above = Seq(d(CheckpointId(12, "new")), z(CheckpointId(12, "new")))
    assert(RetentionPlanner.heldFrom(committed, above, shrunk = true).contains(11L))
    // the same files of a store not known to be shrunk: everything missing is held (damage)
    assert(RetentionPlanner.heldFrom(committed, above).contains(8L))
    // a shrunk store still holding its files (inside the retained window): held as any store's
    val whole = Seq(d(c(8)), z(c(8)), d(c(9)), d(c(10)))
    assert(
      RetentionPlanner.heldFrom(committed, whole, shrunk = true) == RetentionPlanner.heldFrom(
        committed,
        whole
      )
    )
  }
}

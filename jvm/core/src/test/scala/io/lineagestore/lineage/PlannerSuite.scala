package io.lineagestore.lineage

import org.scalatest.funsuite.AnyFunSuite

import io.lineagestore.format.{SnapshotFile, SnapshotIndex, StoreIdentity}
import io.lineagestore.lineage.CheckpointId.{Delta, Snapshot}
import io.lineagestore.snapshot.{LocalFile, SnapshotPlanner, UploadDecision}

/** Clean-up and snapshot planning are functions of data: tested without any filesystem. */
class PlannerSuite extends AnyFunSuite {
  private def c(v: Long) = CheckpointId(v, s"w$v")
  private def loser(v: Long) = CheckpointId(v, s"l$v")
  private def d(id: CheckpointId) = CheckpointFile(id, Delta)
  private def z(id: CheckpointId) = CheckpointFile(id, Snapshot)

  private val committed = (1L to 50L).map(v => v -> s"w$v").toMap

  test("retains minVersionsToRetain versions and what rebuilds the oldest of them") {
    val existing = (1L to 30L).map(v => d(c(v))) ++ Seq(z(c(10)), z(c(20)), z(c(25)))
    val plan = RetentionPlanner.plan(c(30), committed, existing, minVersionsToRetain = 8)
    assert(plan.oldestRetained == 23)
    assert(plan.snapshotBase == c(20))
    assert(plan.delete.toSet == ((1L to 19L).map(v => d(c(v))) :+ z(c(10))).toSet)
    assert(plan.retainedSnapshots.toSet == Set(c(20), c(25)))
  }

  test("losing attempts go only once their version left the window") {
    val existing = (1L to 30L).map(v => d(c(v))) ++ Seq(z(c(20)), d(loser(21)), z(loser(21)), d(loser(28)))
    val plan = RetentionPlanner.plan(c(30), committed, existing, minVersionsToRetain = 8)
    assert(plan.delete.contains(d(loser(21))) && plan.delete.contains(z(loser(21))))
    assert(!plan.delete.contains(d(loser(28))))
  }

  test("without any snapshot everything back to version 1 is kept") {
    val existing = (1L to 30L).map(v => d(c(v)))
    assert(RetentionPlanner.plan(c(30), committed, existing, 8).delete.isEmpty)
  }

  test("an unknown part of the lineage means nothing below it is deleted") {
    val partial = (25L to 30L).map(v => v -> s"w$v").toMap
    val existing = (1L to 30L).map(v => d(c(v))) ++ Seq(z(c(10)))
    assert(RetentionPlanner.plan(c(30), partial, existing, 3).delete.isEmpty)
  }

  test("never deletes a file a retained version needs, for every window and snapshot layout") {
    val rnd = new scala.util.Random(7)
    for (_ <- 1 to 500) {
      val head = 1 + rnd.nextInt(40)
      val snaps = (1 to head).filter(_ => rnd.nextInt(4) == 0).map(v => z(c(v)))
      val losers = (1 to head).filter(_ => rnd.nextInt(5) == 0).flatMap(v => Seq(d(loser(v)), z(loser(v))))
      val existing = (1 to head).map(v => d(c(v))) ++ snaps ++ losers
      val keep = 1 + rnd.nextInt(12)
      val plan = RetentionPlanner.plan(c(head), committed.filter(_._1 <= head), existing, keep)
      val left = existing.toSet -- plan.delete
      for (v <- math.max(1, head - keep + 1) to head) {
        val src = new LineageSource {
          def hasSnapshot(id: CheckpointId) = left(z(id))
          def ancestorsOf(id: CheckpointId) =
            if (left(d(id))) Some((id.version - 1 to 1 by -1).map(x => c(x))) else None
        }
        LineageResolver.plan(c(v), None, src) // throws if a needed file was deleted
      }
    }
  }

  private val store = StoreIdentity(0, 0, "default")
  private def sha(ch: Char) = ch.toString * 64

  test("upload reuses by content, never by name and size alone") {
    val base = SnapshotIndex(
      store,
      c(5),
      Nil,
      Seq(
        SnapshotFile("000007.sst", 10, sha('a'), Some("b1.sst")),
        SnapshotFile("CURRENT", 16, sha('c'), None)
      )
    )
    val decisions = SnapshotPlanner.planUpload(
      Seq(
        LocalFile("000007.sst", 10, Some(sha('a'))), // same content: reuse
        LocalFile("000009.sst", 10, Some(sha('a'))), // renamed but same content: reuse too
        LocalFile("000008.sst", 10, Some(sha('e'))), // other content with a matching size: upload
        LocalFile("000007.sst", 10, None), // unknown identity, same name+size: identify first
        LocalFile("000011.sst", 99, None), // new: upload
        LocalFile("CURRENT", 16, None) // small file: inline
      ),
      Some(base)
    )
    assert(
      decisions.map(_.getClass.getSimpleName) ==
        Seq("Reuse", "Reuse", "Upload", "IdentifyFirst", "Upload", "Inline")
    )
    // identified as the base's file is (its kind of identity)
    assert(decisions(3) == UploadDecision.IdentifyFirst(LocalFile("000007.sst", 10, None), base.files.head))
    // an SST identity matches its own kind only: the same file known by its content is not reused by it
    val sst = "sst-" + sha('a')
    val bySstId = SnapshotIndex(
      store,
      c(5),
      Nil,
      Seq(SnapshotFile("000007.sst", 10, sst, Some("b1.sst"), Some("0badf00d")))
    )
    val planned = SnapshotPlanner.planUpload(
      Seq(LocalFile("000007.sst", 10, Some(sst)), LocalFile("000009.sst", 10, Some(sha('a')))),
      Some(bySstId)
    )
    assert(planned.map(_.getClass.getSimpleName) == Seq("Reuse", "Upload"))
    // known by content where the base knows the same name and size by SST ID: identified as the base's is
    assert(
      SnapshotPlanner.planUpload(Seq(LocalFile("000007.sst", 10, Some(sha('b')))), Some(bySstId)) ==
        Seq(UploadDecision.IdentifyFirst(LocalFile("000007.sst", 10, Some(sha('b'))), bySstId.files.head))
    )
    // known by SST ID, another than the base's of that name and size: a new file
    assert(
      SnapshotPlanner
        .planUpload(Seq(LocalFile("000007.sst", 10, Some("sst-" + sha('b')))), Some(bySstId))
        .head
        .isInstanceOf[UploadDecision.Upload]
    )
    val sameNameOtherContent =
      SnapshotPlanner.planUpload(Seq(LocalFile("000007.sst", 10, Some(sha('f')))), Some(base))
    assert(sameNameOtherContent.head.isInstanceOf[UploadDecision.Upload])
  }

  test("restore keeps local files only when their content is known to match") {
    val index = SnapshotIndex(
      store,
      c(5),
      Nil,
      Seq(
        SnapshotFile("1.sst", 10, sha('a'), Some("x.sst")),
        SnapshotFile("2.sst", 10, sha('b'), Some("y.sst")),
        SnapshotFile("MANIFEST-1", 5, sha('c'), None)
      )
    )
    val plan = SnapshotPlanner.planDownload(
      index,
      Seq(LocalFile("1.sst", 10, Some(sha('a'))), LocalFile("2.sst", 10, None), LocalFile("9.sst", 3, None))
    )
    assert(plan.keep.map(_.name) == Seq("1.sst"))
    assert(plan.download.map(_.name) == Seq("2.sst"))
    assert(plan.removeLocal.toSet == Set("2.sst", "9.sst"))
    assert(plan.inline.map(_.name) == Seq("MANIFEST-1"))
    // what to identify before downloading: unknown files of a shared file's name and size, with that file
    assert(
      SnapshotPlanner.toIdentifyBeforeDownload(
        index,
        Seq(LocalFile("2.sst", 10, None), LocalFile("9.sst", 3, None))
      ) ==
        Seq(LocalFile("2.sst", 10, None) -> index.files(1))
    )
  }
}

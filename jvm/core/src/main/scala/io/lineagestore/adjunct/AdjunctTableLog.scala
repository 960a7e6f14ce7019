package io.lineagestore.adjunct

import java.io.{ByteArrayOutputStream, InputStreamReader, StringReader}
import java.nio.charset.StandardCharsets.UTF_8
import java.util.Properties

import scala.jdk.CollectionConverters._

import io.lineagestore.format.CorruptCheckpointFileException
import io.lineagestore.lineage.CheckpointId
import io.lineagestore.storage.BlobStore

/** One committed version of an adjunct table: the version, its unique ID, and the micro-batch of the
  * maintaining query (`source`: its checkpoint location) that committed it.
  *
  * A table of one store (`partitions` 1) *is* that store's checkpoint `version`_`uniqueId`. A partitioned
  * table names in `stores` the checkpoint each partition's store holds at this version (a partition the
  * version did not change keeps the checkpoint of an earlier one; a partition never written is absent:
  * empty); its `uniqueId` identifies the table version only. `tombstones`: of a table with tombstone
  * retention only ([[TombstoneRetention]]), the highest ordering so far and what this version purged and
  * refused.
  */
final case class AdjunctCommit(
    version: Long,
    uniqueId: String,
    source: String,
    sourceBatchId: Long,
    partitions: Int = 1,
    stores: Map[Int, CheckpointId] = Map.empty,
    tombstones: Option[TombstoneStats] = None
) {

  /** The checkpoint partition `p`'s store holds at this version. */
  def storeCheckpoint(p: Int): CheckpointId =
    if (partitions == 1) CheckpointId(version, uniqueId) else stores.getOrElse(p, CheckpointId.Empty)
}

/** What one executor's replica of an adjunct table held when it last changed version (its marker): which
  * replica (`name`: executor id and host), the version and unique ID it loaded, when (epoch ms), and what its
  * loads cost so far (snapshot bytes downloaded, deltas replayed). Of a partitioned table, a replica holds
  * one `partition`'s store and `version`/`uniqueId` are that store's checkpoint (-1: the table's one store,
  * whose checkpoint is the table version). `lineagestore inspect` reads these to show the replicas' lag; a
  * marker is written by its replica only, so one left by a gone executor grows old.
  */
final case class ReplicaMark(
    name: String,
    version: Long,
    uniqueId: String,
    loadedAtMs: Long,
    bytesDownloaded: Long,
    deltasReplayed: Long,
    partition: Int = -1
)

/** The table-level files of an adjunct table (see docs/adjunct-tables.md), over the blob store rooted at the
  * table's path:
  * {{{
  * _adjunct/table.properties     the table's schema (opaque strings the glue writes once)
  * _adjunct/commits/<version>    one AdjunctCommit each, written once after the stores' deltas
  * _adjunct/replicas/<name>~<seq> a ReplicaMark per version change of an executor's replica (newest seq wins)
  * store/<p>/...                 the lineagestore store of partition p (one, `store/0`, unless partitioned)
  * }}}
  * The commit records are the table's commit log: a version of the table is the unique ID its record names
  * (seed 003's commit log), so a store checkpoint without a record is an orphan no reader loads. Records are
  * Java properties files: small, readable with `cat`.
  */
final class AdjunctTableLog(blobs: BlobStore) {
  import AdjunctTableLog._

  def locate(name: String): String = blobs.locate(name)

  def readMeta(): Option[Map[String, String]] =
    if (!blobs.exists(MetaName)) None else Some(readProperties(MetaName))

  def writeMeta(meta: Map[String, String]): Unit = writeProperties(MetaName, meta)

  /** Every committed version still recorded, oldest first (reads every record: inspection, not per batch). */
  def commits(): Seq[AdjunctCommit] = versions().flatMap(commit)

  /** The versions recorded, oldest first, from one listing: no record is read. */
  def versions(): Seq[Long] =
    blobs
      .list(CommitsDir)
      .flatMap(b => b.name.stripPrefix(CommitsDir + "/").toLongOption)
      .sorted

  def commit(version: Long): Option[AdjunctCommit] = {
    val name = commitName(version)
    if (!blobs.exists(name)) None
    else {
      val p = readProperties(name)
      def field(k: String) = p.getOrElse(
        k,
        throw new CorruptCheckpointFileException(
          blobs.locate(name),
          s"the adjunct table commit record lacks '$k'"
        )
      )
      val stores = p.collect {
        case (k, v) if k.startsWith(StoreKeyPrefix) =>
          val at = v.indexOf('_')
          val parsed = scala.util.Try {
            require(at > 0)
            k.stripPrefix(StoreKeyPrefix).toInt -> CheckpointId(v.take(at).toLong, v.drop(at + 1))
          }
          parsed.getOrElse(
            throw new CorruptCheckpointFileException(
              blobs.locate(name),
              s"the adjunct table commit record's '$k' is '$v', not <version>_<uniqueId>"
            )
          )
      }
      Some(
        AdjunctCommit(
          field("version").toLong,
          field("uniqueId"),
          field("source"),
          field("sourceBatchId").toLong,
          p.get(PartitionsKey).map(_.toInt).getOrElse(1),
          stores,
          Option.when(p.contains(PurgedKey)) {
            def number(k: String) = p.get(k).filter(_.nonEmpty).map { v =>
              v.toLongOption.getOrElse(
                throw new CorruptCheckpointFileException(
                  blobs.locate(name),
                  s"the adjunct table commit record's '$k' is '$v', not a number"
                )
              )
            }
            TombstoneStats(
              number(HighestOrderingKey),
              number(PurgedKey).get,
              number(RefusedLateKey).getOrElse(0L)
            )
          }
        )
      )
    }
  }

  /** The newest record: one listing and one read (the per-batch path of lookups and maintain). */
  def latest(): Option[AdjunctCommit] = versions().lastOption.flatMap(commit)

  def write(c: AdjunctCommit): Unit = writeProperties(
    commitName(c.version),
    Map(
      "version" -> c.version.toString,
      "uniqueId" -> c.uniqueId,
      "source" -> c.source,
      "sourceBatchId" -> c.sourceBatchId.toString
    ) ++ Option.when(c.partitions > 1)(PartitionsKey -> c.partitions.toString) ++
      c.stores.map { case (p, id) => s"$StoreKeyPrefix$p" -> s"${id.version}_${id.uniqueId}" } ++
      c.tombstones.fold(Map.empty[String, String]) { t =>
        Map(
          HighestOrderingKey -> t.highestOrdering.fold("")(_.toString),
          PurgedKey -> t.purged.toString,
          RefusedLateKey -> t.refusedLate.toString
        )
      }
  )

  def delete(version: Long): Unit = blobs.delete(commitName(version))

  /** Records what replica `m.name` holds now, as marker number `seq` of that replica (blobs are immutable:
    * each change is a new marker, the newest `seq` wins); returns the marker's name so the replica can delete
    * its previous one.
    */
  def writeReplica(m: ReplicaMark, seq: Long): String = {
    val name = replicaName(if (m.partition < 0) m.name else s"${m.name}.p${m.partition}", seq)
    writeProperties(
      name,
      Map(
        "replica" -> m.name,
        "version" -> m.version.toString,
        "uniqueId" -> m.uniqueId,
        "loadedAtMs" -> m.loadedAtMs.toString,
        "bytesDownloaded" -> m.bytesDownloaded.toString,
        "deltasReplayed" -> m.deltasReplayed.toString
      ) ++ Option.when(m.partition >= 0)("partition" -> m.partition.toString)
    )
    name
  }

  def deleteReplicaMarker(name: String): Unit = blobs.delete(name)

  /** Each replica's newest marker, by replica name. A marker that cannot be parsed (damaged) is skipped:
    * markers are reports, never read to decide what a reader loads.
    */
  def replicas(): Seq[ReplicaMark] =
    markerNames()
      .groupBy(_.stripPrefix(ReplicasDir + "/").split(SeqSeparator)(0))
      .toSeq
      .sortBy(_._1)
      .flatMap { case (_, names) => readMarker(names.max) } // zero-padded sequence: the newest sorts last

  /** Every marker that parses, with its name (for clean-up: all of them, not only each replica's newest). */
  def replicaMarkers(): Seq[(String, ReplicaMark)] =
    markerNames().flatMap(n => readMarker(n).map(n -> _))

  private def markerNames(): Seq[String] =
    blobs
      .list(ReplicasDir)
      .map(_.name)
      .filterNot(_.stripPrefix(ReplicasDir + "/").startsWith(".")) // a filesystem's checksum files

  private def readMarker(name: String): Option[ReplicaMark] =
    scala.util.Try {
      val p = readProperties(name)
      ReplicaMark(
        p("replica"),
        p("version").toLong,
        p("uniqueId"),
        p("loadedAtMs").toLong,
        p("bytesDownloaded").toLong,
        p("deltasReplayed").toLong,
        p.get("partition").map(_.toInt).getOrElse(-1)
      )
    }.toOption

  private def readProperties(name: String): Map[String, String] = {
    val in = blobs.open(name)
    try {
      val p = new Properties()
      p.load(new InputStreamReader(in, UTF_8))
      p.asScala.toMap
    } finally in.close()
  }

  private def writeProperties(name: String, m: Map[String, String]): Unit = {
    val p = new Properties()
    m.foreach { case (k, v) => p.setProperty(k, v) }
    val buf = new ByteArrayOutputStream()
    p.store(new java.io.OutputStreamWriter(buf, UTF_8), null)
    blobs.write(name)(_.write(buf.toByteArray))
  }
}

object AdjunctTableLog {
  val MetaName = "_adjunct/table.properties"
  val CommitsDir = "_adjunct/commits"
  val ReplicasDir = "_adjunct/replicas"

  val SeqSeparator = "~"

  /** Marker `seq` of a replica; `replica` (executor id and host) made safe as one file name. */
  def replicaName(replica: String, seq: Long): String =
    f"$ReplicasDir/${replica.replaceAll("[^A-Za-z0-9._@-]", "_")}$SeqSeparator$seq%019d"

  /** Partition `p`'s store, relative to the table's path (a table of one store has `store/0` only). */
  def storeDir(p: Int): String = s"store/$p"
  val StoreDir: String = storeDir(0)

  /** The table's number of partitions, in its meta and its commit records (absent: a table of one store). */
  val PartitionsKey = "partitions"

  /** A record's tombstone entries (tables with tombstone retention only): the highest ordering value so far
    * (empty before any change), the tombstones this version purged, the late changes it refused.
    */
  val HighestOrderingKey = "highestOrdering"
  val PurgedKey = "tombstonesPurged"
  val RefusedLateKey = "lateChangesRefused"

  /** A commit record's `store.<p>=<version>_<uniqueId>` entries (partitioned tables only). */
  val StoreKeyPrefix = "store."
  def commitName(version: Long): String = s"$CommitsDir/$version"

  /** Parses properties text (tests, tools). */
  def parse(text: String): Map[String, String] = {
    val p = new Properties(); p.load(new StringReader(text)); p.asScala.toMap
  }
}

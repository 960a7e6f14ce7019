package io.lineagestore.store

import java.io.File
import java.nio.channels.{FileChannel, FileLock, OverlappingFileLockException}
import java.nio.charset.StandardCharsets
import java.nio.file.{Files, StandardOpenOption}
import java.security.MessageDigest
import java.util.UUID

import scala.util.control.NonFatal

import io.lineagestore.config.LineageConf
import io.lineagestore.lineage.CheckpointId

/** The executor-local directories of stores. A store's directory outlives the provider that used it, so the
  * next provider of the same store on this host (a restarted query, a task scheduled here again) restores
  * warm: [[CheckpointFiles.restoreSnapshot]] keeps every local file whose content matches the snapshot.
  *
  * {{{
  *   <base>/lineagestore/
  *   ├── stores/
  *   │   ├── <key>/            one store: db/ (RocksDB) and frozen/ (checkpoints awaiting upload);
  *   │   │   ├── standby-deltas/  a taken-over standby's deltas, until its load replays them
  *   │   │   └── STORE         the store's checkpoint location, for people looking at the disk
  *   │   └── <key>.lock        OS file lock, held while a provider uses <key>/; never deleted
  *   ├── private/
  *   │   ├── <uuid>/           a store whose directory was busy (or retention 0); deleted on release
  *   │   └── <uuid>.lock       held while in use; a free lock means its process died
  *   └── standby/
  *       ├── <key>/            a standby copy of the store <key> (StandbyCopy): db/, deltas/, its STANDBY record
  *       ├── <key>.incoming/   deltas the follower is downloading for it, moved into deltas/ under its lock
  *       └── <key>.lock        held while the follower fetches into it, and by a takeover; never deleted
  * }}}
  * `<key>` is derived from the store's checkpoint location (SHA-256, 32 hex digits).
  *
  * Invariants: a directory is used by at most one provider at a time, across processes (OS lock) and within
  * one JVM (the JVM refuses an overlapping lock); a directory is deleted only by whoever holds its lock. Lock
  * files are never deleted, so two processes can never lock two different files for one directory. Nothing
  * here is trusted for correctness: a reused directory only saves downloads, its files are checked by content
  * before use.
  *
  * A standby copy is taken over by the next [[acquire]] of its store's own directory (under both locks: the
  * store's, then the standby's, never the other order): when that directory holds no clean-close record (so
  * its next load restores a snapshot anyway), its `db/` is replaced by the standby's in one rename (same
  * filesystem), the standby's `deltas/` becomes its `standby-deltas/` ([[LocalDeltaCopies]]), and the standby
  * is gone. A standby being fetched (its lock held) is left alone: the acquire never waits for a fetch.
  */
final class LocalDirectories(
    val base: File,
    val retentionMs: Long,
    clock: () => Long = () => System.currentTimeMillis()
) {
  private val root = new File(base, "lineagestore")
  private val storesDir = new File(root, "stores")
  private val privateDir = new File(root, "private")
  private val standbyDir = new File(root, "standby")

  /** The directory for the store at `location`: its own if free, else a private one. */
  def acquire(location: String): LocalLease = {
    val key = LocalDirectories.keyOf(location)
    if (retentionMs > 0) Files.createDirectories(storesDir.toPath)
    val own = if (retentionMs > 0) tryLock(new File(storesDir, s"$key.lock")) else None
    own match {
      case Some(lock) =>
        val dir = new File(storesDir, key)
        Files.createDirectories(dir.toPath)
        Files.writeString(new File(dir, "STORE").toPath, location + "\n", StandardCharsets.UTF_8)
        val standby =
          try takeOverStandby(key, dir)
          catch { case NonFatal(e) => unlock(lock); throw e }
        new LocalLease(dir, reused = true, release = () => { touch(dir); unlock(lock) }, standby)
      case None =>
        Files.createDirectories(privateDir.toPath)
        val id = UUID.randomUUID().toString
        val lockFile = new File(privateDir, s"$id.lock")
        val lock = tryLock(lockFile).getOrElse(throw new IllegalStateException(s"cannot lock new $lockFile"))
        val dir = new File(privateDir, id)
        Files.createDirectories(dir.toPath)
        new LocalLease(
          dir,
          reused = false,
          release = () => {
            LocalDirectories.deleteRecursively(dir)
            // nobody else ever asks for this id, so its lock file may go (unlike a store key's)
            Files.deleteIfExists(lockFile.toPath)
            unlock(lock)
          }
        )
    }
  }

  /** The standby copy of the store at `location`, if its lock is free (None: a fetch or a takeover holds it),
    * until [[StandbyLease.release]].
    */
  def acquireStandby(location: String): Option[StandbyLease] = acquireStandby(location, create = true)

  /** [[acquireStandby]] of a copy that exists already (None also when it does not: taken over since). */
  def acquireExistingStandby(location: String): Option[StandbyLease] =
    acquireStandby(location, create = false)

  private def acquireStandby(location: String, create: Boolean): Option[StandbyLease] = {
    val key = LocalDirectories.keyOf(location)
    Files.createDirectories(standbyDir.toPath)
    tryLock(new File(standbyDir, s"$key.lock")).flatMap { lock =>
      val dir = new File(standbyDir, key)
      if (!create && !dir.isDirectory) { unlock(lock); None }
      else {
        Files.createDirectories(dir.toPath)
        Files.writeString(new File(dir, "STORE").toPath, location + "\n", StandardCharsets.UTF_8)
        Some(new StandbyLease(dir, () => { touch(dir); unlock(lock) }))
      }
    }
  }

  /** Where the executor's standby follower downloads the deltas of the copy of `location` before it puts them
    * in place under the copy's lease ([[StandbyCopy.fetchDeltas]]): beside the copies, so the standbys' disk
    * bound counts it and a rename moves its files; only the follower's one thread uses it.
    */
  def standbyIncoming(location: String): File =
    new File(standbyDir, s"${LocalDirectories.keyOf(location)}.incoming")

  /** Whether the store at `location` has its own directory here with a clean-close record: its next provider
    * here resumes from it, so a standby of it here would only double its disk.
    */
  def resumable(location: String): Boolean =
    new File(new File(storesDir, LocalDirectories.keyOf(location)), CleanCloseRecord.FileName).exists()

  /** The checkpoint the store at `location`'s own directory here was closed cleanly at (None: no record). */
  def closedAt(location: String): Option[CheckpointId] =
    CleanCloseRecord.peek(new File(storesDir, LocalDirectories.keyOf(location))).map(_.loaded)

  /** Makes the store at `location`'s own directory here, closed cleanly, its standby copy's starting files:
    * under the store's lock, then the standby's (the order [[acquire]] takes them), the clean-close record
    * goes first (so nothing resumes from a half-moved directory), then `db/` replaces the standby's `db/` and
    * the standby's record (which no longer describes it). For a store that moved on elsewhere: resuming it
    * here would replay every delta since it left, and nothing else would refresh it. False when either lock
    * is held (a provider or a fetch uses it) or there is no clean-closed `db/`; the next poll retries.
    */
  def demoteToStandby(location: String): Boolean = {
    val key = LocalDirectories.keyOf(location)
    val storeDir = new File(storesDir, key)
    val record = new File(storeDir, CleanCloseRecord.FileName)
    if (!record.isFile) return false
    Files.createDirectories(standbyDir.toPath)
    withLock(new File(storesDir, s"$key.lock")) {
      withLock(new File(standbyDir, s"$key.lock")) {
        val db = new File(storeDir, StandbyCopy.DbDir)
        if (!record.isFile || !db.isDirectory) false
        else {
          Files.delete(record.toPath)
          val dir = new File(standbyDir, key)
          Files.createDirectories(dir.toPath)
          Files.writeString(new File(dir, "STORE").toPath, location + "\n", StandardCharsets.UTF_8)
          Files.deleteIfExists(new File(dir, StandbyCopy.RecordName).toPath)
          val standbyDb = new File(dir, StandbyCopy.DbDir)
          LocalDirectories.deleteRecursively(standbyDb)
          Files.move(db.toPath, standbyDb.toPath, java.nio.file.StandardCopyOption.ATOMIC_MOVE)
          touch(dir)
          true
        }
      }.getOrElse(false)
    }.getOrElse(false)
  }

  /** Bytes every standby copy of this executor holds (the bound `standbyMaxBytes` applies to). */
  def standbyBytes: Long = StandbyCopy.sizeOf(standbyDir)

  /** Takes the standby copy of store `key` into `storeDir` (whose lock the caller holds), as the class says.
    */
  private def takeOverStandby(key: String, storeDir: File): Option[StandbyTaken] = {
    val dir = new File(standbyDir, key)
    val standbyDb = new File(dir, StandbyCopy.DbDir)
    if (!standbyDb.isDirectory || new File(storeDir, CleanCloseRecord.FileName).exists()) None
    else
      withLock(new File(standbyDir, s"$key.lock")) {
        if (!standbyDb.isDirectory) None
        else {
          val reached = StandbyCopy.readRecord(dir)
          val bytes = StandbyCopy.sizeOf(standbyDb) + StandbyCopy.sizeOf(new File(dir, StandbyCopy.DeltasDir))
          val db = new File(storeDir, StandbyCopy.DbDir)
          LocalDirectories.deleteRecursively(db)
          Files.move(standbyDb.toPath, db.toPath, java.nio.file.StandardCopyOption.ATOMIC_MOVE)
          // its deltas go beside db/, where the load finds them (LocalDeltaCopies), replacing any left there
          val deltas = new File(dir, StandbyCopy.DeltasDir)
          val takenDeltas = LocalDeltaCopies.in(storeDir).dir
          LocalDirectories.deleteRecursively(takenDeltas)
          val deltaFiles =
            if (!deltas.isDirectory) 0
            else {
              Files.move(deltas.toPath, takenDeltas.toPath, java.nio.file.StandardCopyOption.ATOMIC_MOVE)
              Option(takenDeltas.listFiles()).fold(0)(_.count(_.getName.endsWith(".delta")))
            }
          // the copy is the store's now: nothing of it stays behind to be taken, fetched into or counted
          LocalDirectories.deleteRecursively(dir)
          Some(StandbyTaken(reached, bytes, deltaFiles))
        }
      }.flatten
  }

  /** Deletes store and standby directories unused for longer than the retention (and not in use), and private
    * directories whose process died (their lock is free). Returns what it deleted.
    */
  def evictIdle(): Seq[File] = {
    val now = clock()
    def unlockedDirs(parent: File): Seq[(File, File)] =
      Option(parent.listFiles()).getOrElse(Array.empty[File]).toSeq.filter(_.isDirectory).map { d =>
        (d, new File(parent, s"${d.getName}.lock"))
      }
    // a directory untouched past the retention whose lock is free: nothing uses it, nothing will resume it
    def idleIn(parent: File): Seq[File] = unlockedDirs(parent).flatMap { case (dir, lockFile) =>
      withLock(lockFile) {
        if (retentionMs <= 0 || now - dir.lastModified() > retentionMs) {
          LocalDirectories.deleteRecursively(dir)
          Some(dir)
        } else None
      }.flatten
    }
    val idleStores = idleIn(storesDir)
    val deadPrivate = unlockedDirs(privateDir).flatMap { case (dir, lockFile) =>
      withLock(lockFile) {
        LocalDirectories.deleteRecursively(dir)
        Files.deleteIfExists(lockFile.toPath)
        dir
      }
    }
    // a standby is refreshed (touched) at every fetch of its follower; one idle past the retention belongs
    // to a query that stopped or moved on
    val idleStandbys = idleIn(standbyDir)
    idleStores ++ deadPrivate ++ idleStandbys
  }

  private def withLock[T](lockFile: File)(body: => T): Option[T] =
    tryLock(lockFile).map { lock =>
      try body
      finally unlock(lock)
    }

  private def unlock(lock: FileLock): Unit = { lock.release(); lock.channel.close() }

  private def touch(dir: File): Unit = dir.setLastModified(clock())

  private def tryLock(file: File): Option[FileLock] = {
    val channel = FileChannel.open(file.toPath, StandardOpenOption.CREATE, StandardOpenOption.WRITE)
    val lock =
      try Option(channel.tryLock())
      catch {
        case _: OverlappingFileLockException => None // this JVM holds it already
        case NonFatal(e)                     => channel.close(); throw e
      }
    if (lock.isEmpty) channel.close()
    lock
  }
}

/** A store's local directory, until [[release]]. `reused`: the directory outlives this lease. `standby`: the
  * standby copy the directory's `db/` was taken over from, if it was.
  */
final class LocalLease(
    val dir: File,
    val reused: Boolean,
    release: () => Unit,
    val standby: Option[StandbyTaken] = None
) {
  private var released = false
  def release(): Unit = synchronized { if (!released) { released = true; release.apply() } }
}

/** A standby copy taken over by a store's directory: the snapshot its record named (None: it was incomplete),
  * the bytes it held and the delta files it brought (`standby-deltas/`).
  */
final case class StandbyTaken(reached: Option[CheckpointId], bytes: Long, deltas: Int = 0)

/** A standby copy's directory, locked until [[release]] (see [[LocalDirectories.acquireStandby]]). */
final class StandbyLease(val dir: File, release: () => Unit) {
  private var released = false
  def release(): Unit = synchronized { if (!released) { released = true; release.apply() } }
}

object LocalDirectories {

  /** The local directories the settings `confs` name: under `localDir` (java.io.tmpdir when empty), kept
    * `localRetentionMs` after release. The one place the provider's stores and the adjunct tables' copies
    * take them from.
    */
  def configured(confs: Map[String, String]): LocalDirectories = {
    val base = Option(LineageConf.LocalDir.from(confs))
      .filter(_.nonEmpty)
      .getOrElse(System.getProperty("java.io.tmpdir"))
    new LocalDirectories(new File(base).getAbsoluteFile, LineageConf.LocalRetentionMs.from(confs))
  }

  def keyOf(location: String): String =
    MessageDigest
      .getInstance("SHA-256")
      .digest(location.getBytes(StandardCharsets.UTF_8))
      .take(16)
      .map(b => f"${b & 0xff}%02x")
      .mkString

  def deleteRecursively(f: File): Unit = io.lineagestore.engine.LocalFiles.deleteRecursively(f)
}

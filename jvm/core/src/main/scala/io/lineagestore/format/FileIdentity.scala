package io.lineagestore.format

import java.io.File
import java.nio.charset.StandardCharsets.UTF_8
import java.security.MessageDigest

/** What a snapshot's index knows a file by, so that a later snapshot or restore can tell a local file is one
  * already stored (docs/format.md, "File identity"): never its name and size, which RocksDB reuses across
  * instances, but either
  *   - the SHA-256 of its bytes (64 hex digits): any file, and every file of an index of schema 1 or 2; or
  *   - for an SST whose properties carry RocksDB's unique ID, `sst-` and the SHA-256 of that ID (schema 3):
  *     read from the file's last few KiB, where the content hash reads every byte (a core's worth of CPU for
  *     every ~1.4 GB of new SSTs a snapshot uploads).
  * Equal identities mean equal bytes either way. A file's two identities never compare equal: one that must
  * match an identity of the other kind is computed in that kind ([[ofFileAs]]).
  */
object FileIdentity {
  private val SstPrefix = "sst-"
  private val Valid = "(sst-)?[0-9a-f]{64}".r

  def isValid(identity: String): Boolean = Valid.matches(identity)

  def isSst(identity: String): Boolean = identity.startsWith(SstPrefix)

  def ofContent(sha256Hex: String): String = sha256Hex

  def ofSst(id: SstUniqueId): String = {
    val sha = MessageDigest.getInstance("SHA-256")
    sha.update(s"${id.dbId}\n${id.sessionId}\n${id.fileNumber}".getBytes(UTF_8))
    SstPrefix + Hex.of(sha.digest())
  }

  /** The identity a snapshot records for a new SST: RocksDB's ID where the file has one; None where only its
    * content can identify it (the caller hashes the bytes as it uploads them).
    */
  def ofNewSst(f: File): Option[String] = SstUniqueId.read(f).map(ofSst)

  /** `f`'s identity of the kind `other` is, to compare with it: None when `other` is an SST ID and `f` has
    * none (so it is not that file).
    */
  def ofFileAs(other: String, f: File): Option[String] =
    if (isSst(other)) ofNewSst(f) else Some(ofContent(ContentHashes.sha256Of(f)))
}

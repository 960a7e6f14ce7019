package io.lineagestore.format

import java.io.{File, FileInputStream, InputStream}
import java.nio.ByteBuffer
import java.security.MessageDigest
import java.util.zip.CRC32C

/** Checks the bytes of one downloaded snapshot file against its index entry as they stream by: their count,
  * and their CRC32C where the index records one (schema 2 on), else their SHA-256 (schema 1). The CRC32C is
  * computed by the CPU's instruction at memory speed; SHA-256 is not, until the JIT has compiled its
  * intrinsic, which a restarted executor restoring its state has not (docs/benchmarks.md). `identityToo`
  * checks the identity as well (the `verify` tool: the identity itself, not only the transfer): a SHA-256 as
  * the bytes stream, an SST's unique ID from the written file ([[matchesWritten]]).
  */
private[lineagestore] final class DownloadCheck(f: SnapshotFile, identityToo: Boolean = false) {
  private val crc = f.crc32c.map(_ => new CRC32C)
  private val sstId = FileIdentity.isSst(f.identity)
  private val sha =
    if (!sstId && (crc.isEmpty || identityToo)) Some(MessageDigest.getInstance("SHA-256")) else None
  private var bytes = 0L

  def update(b: ByteBuffer): Unit = {
    bytes += b.remaining
    crc.foreach(_.update(b.duplicate()))
    sha.foreach(_.update(b.duplicate()))
  }

  def update(b: Array[Byte], off: Int, len: Int): Unit = {
    bytes += len
    crc.foreach(_.update(b, off, len))
    sha.foreach(_.update(b, off, len))
  }

  def bytesSeen: Long = bytes

  /** True when the count and the checksum match the index; call once, after the last byte. */
  def matches: Boolean =
    bytes == f.size &&
      crc.forall(c => f.crc32c.contains(Hex.crc32c(c))) &&
      sha.forall(d => Hex.of(d.digest()) == f.identity)

  /** True unless an SST identity is to be checked and `written`, the file the bytes went to, has another. */
  def matchesWritten(written: File): Boolean =
    !(identityToo && sstId) || FileIdentity.ofNewSst(written).contains(f.identity)

  def checksumName: String = {
    val sstIdChecked = if (identityToo && sstId) Some("SST unique ID") else None
    (crc.map(_ => "CRC32C") ++ sha.map(_ => "SHA-256") ++ sstIdChecked).mkString(" and ")
  }
}

/** CRC32C (download check) and, unless the file has an identity without it, SHA-256 (content identity) of
  * bytes written to a snapshot, in one pass.
  */
private[lineagestore] final class ContentHashes(withSha256: Boolean = true) {
  private val sha = if (withSha256) Some(MessageDigest.getInstance("SHA-256")) else None
  private val crc = new CRC32C

  def update(b: Array[Byte], off: Int, len: Int): Unit = {
    sha.foreach(_.update(b, off, len))
    crc.update(b, off, len)
  }

  def sha256: String =
    Hex.of(sha.getOrElse(throw new IllegalStateException("no SHA-256 was asked for")).digest())
  def crc32c: String = Hex.crc32c(crc)
}

private[lineagestore] object ContentHashes {
  def of(f: File): ContentHashes = {
    val h = new ContentHashes
    eachChunk(f)((buf, n) => h.update(buf, 0, n))
    h
  }

  def sha256Of(f: File): String = {
    val sha = MessageDigest.getInstance("SHA-256")
    eachChunk(f)((buf, n) => sha.update(buf, 0, n))
    Hex.of(sha.digest())
  }

  def crc32cOf(f: File): String = {
    val crc = new CRC32C
    eachChunk(f)((buf, n) => crc.update(buf, 0, n))
    Hex.crc32c(crc)
  }

  private def eachChunk(f: File)(use: (Array[Byte], Int) => Unit): Unit = {
    val in = new FileInputStream(f)
    try pump(in)(use)
    finally in.close()
  }

  /** Reads `in` to its end in 64 KiB chunks, handing each to `use` (the buffer is reused). */
  def pump(in: InputStream)(use: (Array[Byte], Int) => Unit): Unit = {
    val buf = new Array[Byte](1 << 16)
    var n = in.read(buf)
    while (n >= 0) {
      use(buf, n)
      n = in.read(buf)
    }
  }
}

/** The hexadecimal forms the format writes: lower-case, two digits a byte; CRC32C as 8 digits. */
object Hex {
  def of(bytes: Array[Byte]): String = {
    val out = new StringBuilder(bytes.length * 2)
    bytes.foreach(b => out.append(Digits((b >> 4) & 0xf)).append(Digits(b & 0xf)))
    out.toString
  }

  def crc32c(c: CRC32C): String = f"${c.getValue}%08x"

  private val Digits = "0123456789abcdef"
}

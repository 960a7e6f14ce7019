package io.lineagestore.testing

import java.io.{File, RandomAccessFile}
import java.nio.ByteBuffer
import java.nio.ByteOrder.LITTLE_ENDIAN
import java.nio.file.Files

/** Damage to a state file on the local filesystem as storage makes it: bytes changed in place, a range
  * zeroed, the file cut short. The file's Hadoop `.crc` sidecar stays beside it with the checksums of the
  * bytes as written ([[Sidecar.Kept]]): what a disk fault leaves, and what a reader sees on HDFS and every
  * checksummed Hadoop filesystem, so that is how the project's tests damage files. [[Sidecar.Dropped]]
  * deletes it first: damage only lineagestore's own checks can see, as on s3a, which keeps no sidecar.
  */
object DiskDamage {
  sealed trait Sidecar
  object Sidecar {
    case object Kept extends Sidecar
    case object Dropped extends Sidecar
    val Both: Seq[Sidecar] = Seq(Kept, Dropped)
  }

  /** The local filesystem's checksum file of `f` (Hadoop's `ChecksumFileSystem`). */
  def sidecarOf(f: File): File = new File(f.getParentFile, s".${f.getName}.crc")

  /** Inverts every bit of the byte at `at`. */
  def flip(f: File, at: Long, sidecar: Sidecar = Sidecar.Kept): Unit = inPlace(f, sidecar) { raf =>
    raf.seek(at); val b = raf.read(); raf.seek(at); raf.write(b ^ 0xff)
  }

  /** Overwrites `length` bytes from `from` with zeros (the file keeps its length). */
  def zero(f: File, from: Long, length: Int, sidecar: Sidecar = Sidecar.Kept): Unit = inPlace(f, sidecar) {
    raf => raf.seek(from); raf.write(new Array[Byte](length))
  }

  /** Cuts the file to `length` bytes. */
  def truncate(f: File, length: Long, sidecar: Sidecar = Sidecar.Kept): Unit =
    inPlace(f, sidecar)(_.setLength(length))

  private def inPlace(f: File, sidecar: Sidecar)(damage: RandomAccessFile => Unit): Unit = {
    require(f.isFile, s"$f is not a file")
    if (sidecar == Sidecar.Dropped) Files.deleteIfExists(sidecarOf(f).toPath)
    else require(sidecarOf(f).isFile, s"$f has no .crc sidecar to keep")
    val raf = new RandomAccessFile(f, "rw")
    try damage(raf)
    finally raf.close()
  }

  /** Where the parts of a zip file are (as `java.util.zip.ZipOutputStream` writes it, without a comment).
    *
    * @param entries
    *   per entry in file order: its name, the offset of its local header and of its data
    */
  final case class ZipLayout(entries: Seq[ZipLayout.Entry], centralDirectoryAt: Long, footerAt: Long) {
    def entry(name: String): ZipLayout.Entry =
      entries.find(_.name == name).getOrElse(throw new NoSuchElementException(s"no entry $name in $entries"))
  }

  object ZipLayout {
    final case class Entry(name: String, headerAt: Long, dataAt: Long, compressedSize: Long) {
      def nameLengthAt: Long = headerAt + 26
      def extraLengthAt: Long = headerAt + 28
      def nameAt: Long = headerAt + 30
      def compressionMethodAt: Long = headerAt + 8
    }

    def of(f: File): ZipLayout = {
      val bytes = ByteBuffer.wrap(Files.readAllBytes(f.toPath)).order(LITTLE_ENDIAN)
      val footerAt = bytes.limit() - 22
      require(bytes.getInt(footerAt) == 0x06054b50, s"$f has no zip end record where expected")
      val count = bytes.getShort(footerAt + 10) & 0xffff
      val cdAt = bytes.getInt(footerAt + 16).toLong
      var at = cdAt.toInt
      val entries = (0 until count).map { _ =>
        require(bytes.getInt(at) == 0x02014b50, s"$f: no central directory header at $at")
        val size = bytes.getInt(at + 20) & 0xffffffffL
        val nameLength = bytes.getShort(at + 28) & 0xffff
        val extra = bytes.getShort(at + 30) & 0xffff
        val comment = bytes.getShort(at + 32) & 0xffff
        val header = bytes.getInt(at + 42)
        val name = new String(bytes.array(), at + 46, nameLength, java.nio.charset.StandardCharsets.UTF_8)
        at += 46 + nameLength + extra + comment
        val dataAt =
          header + 30 + (bytes.getShort(header + 26) & 0xffff) + (bytes.getShort(header + 28) & 0xffff)
        Entry(name, header.toLong, dataAt.toLong, size)
      }
      ZipLayout(entries.sortBy(_.headerAt), cdAt, footerAt.toLong)
    }
  }
}

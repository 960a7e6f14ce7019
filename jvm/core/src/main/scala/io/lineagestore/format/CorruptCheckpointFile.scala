package io.lineagestore.format

import java.io.{EOFException, IOException, UTFDataFormatException}

import io.lineagestore.storage.BlobDamagedException

/** Thrown for any file that is corrupt, truncated, foreign or of an unknown format version. */
class CorruptCheckpointFileException(val file: String, val detail: String, cause: Throwable = null)
    extends IOException(
      s"checkpoint file $file is unusable: $detail. It was not written by this lineagestore store, or it is " +
        "damaged; restore it from a backup or restart the query from an older checkpoint (step by step: " +
        "docs/operations.md#restarting-from-an-older-checkpoint). Nothing was loaded from it.",
      cause
    )

/** How every reader of the format fails on a file: with a [[CorruptCheckpointFileException]] naming it. */
object Corrupt {

  def apply(file: String, detail: String): Nothing = throw new CorruptCheckpointFileException(file, detail)

  /** Runs `body`, turning what a damaged file makes a reader throw (truncation, bad text, damaged zstd
    * frames) into a [[CorruptCheckpointFileException]] naming `file`, and damage the blob store found while
    * reading ([[BlobDamagedException]]) into one naming the blob it found damaged.
    */
  def guard[T](file: String)(body: => T): T =
    try body
    catch {
      case e: CorruptCheckpointFileException => throw e
      case e: BlobDamagedException   => throw new CorruptCheckpointFileException(e.location, e.detail, e)
      case e: EOFException           => throw new CorruptCheckpointFileException(file, "truncated", e)
      case e: UTFDataFormatException => throw new CorruptCheckpointFileException(file, "bad text", e)
      case e: com.github.luben.zstd.ZstdIOException =>
        throw new CorruptCheckpointFileException(file, s"compressed records are damaged (${e.getMessage})", e)
      case e: com.github.luben.zstd.ZstdException =>
        throw new CorruptCheckpointFileException(file, s"compressed records are damaged (${e.getMessage})", e)
    }
}

package io.lineagestore.snapshot

/** How a large file of a snapshot is downloaded: as byte ranges of `partBytes` read in parallel (ranged GETs
  * on S3), at most `window` of them in flight, so one file of a few hundred MiB is not one stream. The ranges
  * are checked and written in order as they arrive (the content checksum is over the whole file), so a
  * download holds at most `partBytes * window` bytes in memory. Files below `minBytes` are one stream.
  */
final case class RangedDownload(minBytes: Long = 32L << 20, partBytes: Int = 8 << 20, window: Int = 8) {
  // defaults: `rangedDownloadPartBytes` (docs/configuration.md); the threshold is four parts
  require(partBytes > 0 && window > 0, s"partBytes ($partBytes) and window ($window) must be positive")

  /** The (offset, length) ranges a file of `size` bytes is read in; empty: read it as one stream. */
  def parts(size: Long): Seq[(Long, Int)] =
    if (size < minBytes || size <= partBytes) Nil
    else (0L until size by partBytes.toLong).map(o => o -> math.min(partBytes.toLong, size - o).toInt)
}

object RangedDownload {
  val Default: RangedDownload = RangedDownload()
  val Off: RangedDownload = RangedDownload(minBytes = Long.MaxValue)

  /** Parts of `partBytes` (0: off) for files of at least four parts. */
  def withPartBytes(partBytes: Long): RangedDownload =
    if (partBytes <= 0) Off
    else {
      val part = math.min(partBytes, Int.MaxValue.toLong).toInt
      RangedDownload(minBytes = 4L * part, partBytes = part)
    }
}

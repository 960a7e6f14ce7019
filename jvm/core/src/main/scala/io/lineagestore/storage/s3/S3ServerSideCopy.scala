package io.lineagestore.storage.s3

import org.apache.hadoop.fs.{FileSystem, Path}
import org.apache.hadoop.fs.s3a.S3AFileSystem
import software.amazon.awssdk.services.s3.model.{CopyObjectRequest, S3Exception}

/** Server-side copy between s3a locations: S3 CopyObject, through the SDK v2 client that hadoop-aws already
  * built for the destination filesystem (same credentials, endpoint, region, path style and retry policy), so
  * no byte of the object passes through this JVM.
  *
  * Only this object touches hadoop-aws and the AWS SDK; it is loaded only when both sides are s3a, so
  * lineagestore runs without them on any other filesystem.
  *
  * Limits: CopyObject copies objects up to 5 GiB (lineagestore's files are far smaller: RocksDB SSTs, deltas,
  * Spark's metadata); a larger object, a source the destination's credentials cannot read, or a server
  * without CopyObject returns false and the caller streams the copy instead.
  */
object S3ServerSideCopy {
  val MaxCopyObjectBytes: Long = 5L << 30

  def isS3a(fs: FileSystem): Boolean = fs.isInstanceOf[S3AFileSystem]

  /** Copies `src` to `dst` inside the object store; false means "not possible here, copy another way". */
  def copy(srcFs: FileSystem, src: Path, dstFs: FileSystem, dst: Path, size: Long): Boolean =
    (srcFs, dstFs) match {
      case (s: S3AFileSystem, d: S3AFileSystem) if size <= MaxCopyObjectBytes =>
        val client = d.getS3AInternals.getAmazonS3Client("lineagestore clone: server-side copy")
        val request = CopyObjectRequest
          .builder()
          .sourceBucket(s.getBucket)
          .sourceKey(s.pathToKey(src))
          .destinationBucket(d.getBucket)
          .destinationKey(d.pathToKey(dst))
          .build()
        try { client.copyObject(request); true }
        catch {
          // 403 (the destination's credentials cannot read the source), 501 (no CopyObject on this server)
          case e: S3Exception if e.statusCode == 403 || e.statusCode == 501 => false
        }
      case _ => false
    }
}

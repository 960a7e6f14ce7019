package io.lineagestore.storage

import java.io.IOException

/** Reading a blob returned bytes its store knows to be wrong: the store's own checksum of them does not match
  * (Hadoop's `.crc` sidecar on the local filesystem, HDFS's block checksums, any checksummed Hadoop
  * filesystem). This is damage of the blob's content, not a failure to reach the store
  * ([[BlobStoreAccessException]]): a retry reads the same bytes. The store decides what counts as damage and
  * throws this, so that no caller needs to know a filesystem's exception classes; readers of the format turn
  * it into a `CorruptCheckpointFileException` naming `location`.
  *
  * @param location
  *   the full location of the damaged blob
  * @param detail
  *   what the store found, e.g. "the filesystem's checksum does not match at byte 1024"
  */
class BlobDamagedException(val location: String, val detail: String, cause: Throwable)
    extends IOException(s"$location is damaged: $detail", cause)

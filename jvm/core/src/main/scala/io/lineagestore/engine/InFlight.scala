package io.lineagestore.engine

import java.io.File

/** A batch handed to an apply thread, and whether it reached RocksDB. `writes` is set to null by the apply
  * thread once RocksDB holds them (or the write failed), so a batch's memory does not wait for its store's
  * next use (a store may not be used again for a whole batch interval); a reader that finds null reads
  * RocksDB.
  */
private final class InFlight(
    @volatile var writes: PendingWrites,
    val written: java.util.concurrent.CompletableFuture[Unit]
)

/** A committed batch did not reach the local RocksDB (its delta is in the blob store): the local state is
  * behind the commit and has to be reloaded.
  */
final class LocalApplyFailed(dir: File, cause: Throwable)
    extends IllegalStateException(
      s"a committed batch could not be written to the local RocksDB in $dir (${cause.getMessage}); its delta " +
        "is in the blob store, and the store reloads its state from there on its next load",
      cause
    )

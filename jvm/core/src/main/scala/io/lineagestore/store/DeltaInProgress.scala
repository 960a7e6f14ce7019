package io.lineagestore.store

import scala.util.control.NonFatal

import io.lineagestore.format.{DeltaFile, DeltaHeader}
import io.lineagestore.storage.BlobWrite

/** A delta written while its batch runs ([[CheckpointFiles.startDelta]]): records go to the blob store as the
  * codec seals its blocks, so a commit of a million 1 KiB rows ends a file instead of writing 150 MB
  * (docs/benchmarks.md, the scale grid).
  *
  * A record that cannot be written (the blob store failed mid-batch) does not fail the batch: the delta is
  * given up, [[failure]] says why, and the commit writes the batch's net changes instead, where a store still
  * failing fails the commit as any delta write does. Task thread only.
  */
final class DeltaInProgress private[store] (
    val header: DeltaHeader,
    blob: BlobWrite,
    writer: DeltaFile.Writer
) {
  private var broken: Option[Throwable] = None
  private var open = true

  /** Why the delta was given up mid-batch, if it was. */
  def failure: Option[Throwable] = broken

  def put(key: Array[Byte], value: Array[Byte]): Unit = guarded(writer.put(key, value))

  def delete(key: Array[Byte]): Unit = guarded(writer.delete(key))

  /** Ends the file (end record, codec frame, file checksum) and publishes it; the record count. Only for a
    * delta that did not fail. Throws what the blob store throws, leaving no delta under the name.
    */
  def finish(): Long = {
    if (!open || broken.isDefined) throw new IllegalStateException(s"${header.checkpoint}: delta not open")
    open = false
    try {
      writer.close()
      blob.complete()
      writer.recordCount
    } catch { case t: Throwable => writer.abandon(); blob.abort(); throw t }
  }

  /** Gives the delta up (the batch aborts, or its records will be written otherwise); never throws. */
  def abort(): Unit = if (open) {
    open = false
    try writer.abandon()
    catch { case NonFatal(_) => () }
    blob.abort()
  }

  private def guarded(write: => Unit): Unit = if (open && broken.isEmpty) {
    try write
    catch {
      case NonFatal(e) =>
        broken = Some(e)
        abort()
    }
  }
}

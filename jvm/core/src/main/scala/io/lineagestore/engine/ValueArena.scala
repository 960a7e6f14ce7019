package io.lineagestore.engine

import java.lang.management.ManagementFactory

/** The values of a batch's writes, copied into a few large arrays instead of held as an array each.
  *
  * Why: a batch's values live from the task's write until the apply thread has put them into RocksDB, through
  * every young collection of the batch, and the garbage collector copies each live array at each one. At a
  * million 1 KiB values per batch that copying cost ten times Spark's provider's GC, which writes each value
  * into RocksDB's native memory as it comes (docs/benchmarks.md, the scale profile). Here a value is copied
  * once, into a chunk; chunks grow to the size of a G1 heap region, and an array that large is a humongous
  * object: allocated in place in the old generation, never copied, and freed at the first young collection
  * after the batch drops it.
  *
  * A value is known by its position ([[add]]): its chunk and offset in one long, its length stored before it.
  * Appends only: a value replaced in the batch keeps its bytes until the batch ends. Not thread-safe; reads
  * from another thread are safe once appends have stopped and were published (a committed batch handed to the
  * apply thread).
  */
private[engine] final class ValueArena {
  import ValueArena._

  private var chunks = new Array[Array[Byte]](4)
  private var used = 0 // chunks in use; only the last has room
  private var fill = 0 // bytes used of the last chunk
  private var held = 0L // bytes of every chunk

  /** Bytes of memory the arena holds (its chunks, used or not). */
  def heldBytes: Long = held

  /** Copies `value` (at most [[MaxValueBytes]]) in; returns its position. */
  def add(value: Array[Byte]): Long = {
    require(value.length <= MaxValueBytes, s"a value of ${value.length} bytes is too large for the arena")
    val need = LengthBytes + value.length
    if (used == 0 || fill + need > chunks(used - 1).length) newChunk(need)
    val chunk = chunks(used - 1)
    val at = fill
    val n = value.length
    chunk(at) = (n >>> 24).toByte
    chunk(at + 1) = (n >>> 16).toByte
    chunk(at + 2) = (n >>> 8).toByte
    chunk(at + 3) = n.toByte
    System.arraycopy(value, 0, chunk, at + LengthBytes, n)
    fill += need
    ((used - 1).toLong << 32) | at
  }

  /** The chunk holding the value at `position`. */
  def chunkOf(position: Long): Array[Byte] = chunks((position >>> 32).toInt)

  /** Where the value at `position` starts in its chunk. */
  def offsetOf(position: Long): Int = position.toInt + LengthBytes

  def lengthOf(position: Long): Int = {
    val c = chunkOf(position)
    val at = position.toInt
    ((c(at) & 0xff) << 24) | ((c(at + 1) & 0xff) << 16) | ((c(at + 2) & 0xff) << 8) | (c(at + 3) & 0xff)
  }

  /** A copy of the value at `position`. */
  def copyOf(position: Long): Array[Byte] = {
    val out = new Array[Byte](lengthOf(position))
    System.arraycopy(chunkOf(position), offsetOf(position), out, 0, out.length)
    out
  }

  // Each chunk twice the last, from SmallChunkBytes up to LargeChunkBytes: a small batch holds a small arena,
  // a large one soon holds region-sized chunks only.
  private def newChunk(need: Int): Unit = {
    val size =
      if (used == 0) SmallChunkBytes
      else math.min(LargeChunkBytes.toLong, chunks(used - 1).length.toLong * 2).toInt
    if (used == chunks.length) chunks = java.util.Arrays.copyOf(chunks, used * 2)
    chunks(used) = new Array[Byte](math.max(size, need))
    held += chunks(used).length
    used += 1
    fill = 0
  }
}

private[engine] object ValueArena {
  private val LengthBytes = 4
  private val SmallChunkBytes = 64 << 10

  /** The largest chunk: one G1 heap region less an array header, so that it is humongous and fills one region
    * (a humongous object takes whole regions; one a few bytes over would take two). Without G1 (or where its
    * region size cannot be read), 4 MiB.
    */
  val LargeChunkBytes: Int = {
    val regionBytes =
      try {
        val vm = ManagementFactory.getPlatformMXBean(classOf[com.sun.management.HotSpotDiagnosticMXBean])
        if (vm.getVMOption("UseG1GC").getValue == "true") vm.getVMOption("G1HeapRegionSize").getValue.toLong
        else 0L
      } catch { case _: Exception | _: LinkageError => 0L } // not HotSpot
    val region = if (regionBytes >= (1L << 20) && regionBytes <= (32L << 20)) regionBytes else 4L << 20
    (region - 64).toInt
  }

  /** Values larger than this stay arrays of their own (as large as a quarter of a chunk, which an arena's
    * chunk would otherwise leave mostly unused; such an array is humongous itself in most heaps).
    */
  val MaxValueBytes: Int = LargeChunkBytes / 4
}

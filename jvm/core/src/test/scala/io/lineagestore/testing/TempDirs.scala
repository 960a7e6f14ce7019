package io.lineagestore.testing

import java.io.File
import java.nio.file.Files
import java.util.concurrent.ConcurrentLinkedQueue

import io.lineagestore.engine.LocalFiles

/** The test JVM's temporary directories, deleted when it exits. Suites make hundreds of them (RocksDB
  * directories, checkpoints, crash-point probes) and a test's assertions may still read one after its store
  * is closed, so they go together at the end rather than per test; before, every run of the suites left
  * hundreds behind. To look at one after a failure, copy it out in the test.
  */
object TempDirs {
  private val created = new ConcurrentLinkedQueue[File]()
  Runtime.getRuntime.addShutdownHook(
    new Thread(() => created.forEach(d => LocalFiles.deleteRecursively(d)), "delete-test-temp-dirs")
  )

  /** A new empty directory under `java.io.tmpdir` whose name starts with `prefix`. */
  def create(prefix: String): File = {
    val dir = Files.createTempDirectory(prefix).toFile
    created.add(dir)
    dir
  }
}

package io.lineagestore.engine

import java.io.File
import java.nio.file.Files

/** Local file helpers shared by the engine and the store's local directories. */
object LocalFiles {

  /** Deletes `f` and, if it is a directory (not a symbolic link to one), everything under it. */
  def deleteRecursively(f: File): Unit = {
    if (f.isDirectory && !Files.isSymbolicLink(f.toPath))
      Option(f.listFiles()).getOrElse(Array.empty[File]).foreach(deleteRecursively)
    f.delete()
  }
}

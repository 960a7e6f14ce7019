package io.lineagestore.store

import java.util.concurrent.ConcurrentHashMap

import scala.jdk.CollectionConverters._

/** The identities ([[io.lineagestore.format.FileIdentity]]: content SHA-256 or an SST's RocksDB ID) of files
  * in one local RocksDB directory, by name and size: what a snapshot upload need not identify again, and what
  * a restore may keep. One cache per generation of the directory: a restore that replaces the directory
  * starts a new one, so a file number reused by another RocksDB instance is never mistaken for a known file.
  *
  * Thread-safe (a concurrent map): the task thread, Spark's maintenance thread and the transfer pool read and
  * add entries concurrently. [[replaceAll]] is meant for a cache not yet shared (a restore fills its own).
  */
final class HashCache private (entries: ConcurrentHashMap[String, (Long, String)]) {

  def this() = this(new ConcurrentHashMap[String, (Long, String)]())

  /** The identity of `name` if it is known for a file of this `size`. */
  def get(name: String, size: Long): Option[String] = Option(entries.get(name)).filter(_._1 == size).map(_._2)

  def put(name: String, size: Long, identity: String): Unit = entries.put(name, (size, identity))

  /** A new cache with this one's entries: the start of the next generation's, for a restore to fill. */
  def copy(): HashCache = new HashCache(new ConcurrentHashMap(entries))

  /** Makes the cache hold exactly `known` (name -> (size, identity)). */
  def replaceAll(known: Map[String, (Long, String)]): Unit = {
    entries.keySet().removeIf(name => !known.contains(name))
    entries.putAll(known.asJava)
  }

  def toMap: Map[String, (Long, String)] = entries.asScala.toMap
}

object HashCache {
  def of(known: Map[String, (Long, String)]): HashCache = {
    val c = new HashCache()
    c.replaceAll(known)
    c
  }
}

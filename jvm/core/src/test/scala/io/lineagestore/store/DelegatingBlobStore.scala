package io.lineagestore.store

import java.io.{InputStream, OutputStream}

import io.lineagestore.storage.{BlobInfo, BlobStore}

/** A [[BlobStore]] that passes every call to `underlying` (ranged reads go through `open`, the trait's
  * default); tests override the calls they make fail or race.
  */
class DelegatingBlobStore(val underlying: BlobStore) extends BlobStore {
  override def locate(name: String): String = underlying.locate(name)
  override def write(name: String)(body: OutputStream => Unit): Unit = underlying.write(name)(body)
  override def open(name: String): InputStream = underlying.open(name)
  override def exists(name: String): Boolean = underlying.exists(name)
  override def size(name: String): Option[Long] = underlying.size(name)
  override def delete(name: String): Unit = underlying.delete(name)
  override def list(dir: String): Seq[BlobInfo] = underlying.list(dir)
}

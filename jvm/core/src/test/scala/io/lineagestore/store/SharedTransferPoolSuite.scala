package io.lineagestore.store

import java.util.concurrent.{Callable, ConcurrentHashMap}

import org.scalatest.funsuite.AnyFunSuite

class SharedTransferPoolSuite extends AnyFunSuite {
  test("every store of a JVM gets the one pool; the first size wins and bounds the threads") {
    val first = SharedTransferPool(3)
    assert(SharedTransferPool(64) eq first)
    assert(SharedTransferPool.size.contains(3))
    val threads = ConcurrentHashMap.newKeySet[String]()
    val tasks = (1 to 50).map { _ =>
      first.submit(new Callable[Unit] {
        override def call(): Unit = { threads.add(Thread.currentThread().getName); Thread.sleep(2) }
      })
    }
    tasks.foreach(_.get())
    assert(threads.size <= 3 && threads.size >= 1, threads)
    assert(threads.stream().allMatch(_.startsWith("lineagestore-transfer-")))
  }
}

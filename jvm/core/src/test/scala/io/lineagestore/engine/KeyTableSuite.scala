package io.lineagestore.engine

import java.nio.charset.StandardCharsets.UTF_8

import scala.collection.mutable
import scala.util.Random

import org.scalatest.funsuite.AnyFunSuite

/** The pending writes' hash table against a reference map, through growth and keys compared by content. */
class KeyTableSuite extends AnyFunSuite {
  private def bytes(s: String): Array[Byte] = s.getBytes(UTF_8)

  test("random puts, putIfAbsent and gets agree with a reference map, keys compared by content") {
    val rnd = new Random(21)
    val table = new KeyTable
    val reference = mutable.HashMap.empty[String, AnyRef]
    (0 until 200000).foreach { _ =>
      // a fresh array every time: equal content, never the same array
      val k = s"k-${rnd.nextInt(50000)}" + (if (rnd.nextBoolean()) "" else "\u0000")
      val v = Integer.valueOf(rnd.nextInt())
      rnd.nextInt(3) match {
        case 0 => assert(table.put(bytes(k), v) eq reference.put(k, v).orNull)
        case 1 =>
          val present = reference.get(k).orNull
          assert(table.putIfAbsent(bytes(k), v) eq present)
          if (present == null) reference.put(k, v)
        case _ => assert(table.get(bytes(k)) eq reference.get(k).orNull)
      }
    }
    assert(table.size == reference.size && !table.isEmpty)
    val seen = mutable.HashMap.empty[String, AnyRef]
    table.foreach((k, e) => assert(seen.put(new String(k, UTF_8), e).isEmpty, "a key seen twice"))
    assert(seen == reference)
  }

  test("a put to a present key keeps the stored array; filtered keeps only what it is asked to") {
    val table = new KeyTable
    val first = bytes("same")
    table.put(first, "a")
    assert(table.put(bytes("same"), "b") == "a")
    table.foreach((k, _) => assert(k eq first))
    (0 until 1000).foreach(i => table.put(bytes(s"n$i"), if (i % 2 == 0) "even" else "odd"))
    val evens = table.filtered(_ == "even")
    assert(evens.size == 500 && evens.get(bytes("n10")) == "even" && evens.get(bytes("n11")) == null)
    assert(table.size == 1001 && table.get(bytes("n11")) == "odd")
    assert(new KeyTable().isEmpty && new KeyTable().get(bytes("x")) == null)
  }
}

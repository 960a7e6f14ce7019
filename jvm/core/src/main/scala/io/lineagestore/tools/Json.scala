package io.lineagestore.tools

import scala.language.implicitConversions

/** The few JSON values the tools return to Python (core has no JSON library and needs none for this). Write
  * only: tools take their inputs as plain text lines.
  */
sealed trait Json {
  def render: String = { val sb = new StringBuilder; Json.write(this, sb); sb.result() }
  override def toString: String = render
}

object Json {
  final case class Str(value: String) extends Json
  final case class Num(value: Long) extends Json
  final case class Bool(value: Boolean) extends Json
  case object Null extends Json
  final case class Arr(items: Seq[Json]) extends Json
  final case class Obj(fields: Seq[(String, Json)]) extends Json

  def obj(fields: (String, Json)*): Obj = Obj(fields)
  def arr(items: Seq[Json]): Arr = Arr(items)
  def strs(items: Iterable[String]): Arr = Arr(items.toSeq.map(Str))
  def opt(s: Option[String]): Json = s.map(Str).getOrElse(Null)

  implicit def fromString(s: String): Json = Str(s)
  implicit def fromLong(n: Long): Json = Num(n)
  implicit def fromInt(n: Int): Json = Num(n.toLong)
  implicit def fromBoolean(b: Boolean): Json = Bool(b)

  private def write(j: Json, sb: StringBuilder): Unit = j match {
    case Str(s)  => quote(s, sb)
    case Num(n)  => sb ++= n.toString
    case Bool(b) => sb ++= b.toString
    case Null    => sb ++= "null"
    case Arr(xs) =>
      sb += '['
      xs.zipWithIndex.foreach { case (x, i) => if (i > 0) sb ++= ", "; write(x, sb) }
      sb += ']'
    case Obj(fs) =>
      sb += '{'
      fs.zipWithIndex.foreach { case ((k, v), i) =>
        if (i > 0) sb ++= ", "
        quote(k, sb); sb ++= ": "; write(v, sb)
      }
      sb += '}'
  }

  private def quote(s: String, sb: StringBuilder): Unit = {
    sb += '"'
    Option(s).getOrElse("").foreach {
      case '"'          => sb ++= "\\\""
      case '\\'         => sb ++= "\\\\"
      case '\n'         => sb ++= "\\n"
      case '\r'         => sb ++= "\\r"
      case '\t'         => sb ++= "\\t"
      case c if c < ' ' => sb ++= f"\\u${c.toInt}%04x"
      case c            => sb += c
    }
    sb += '"'
  }
}

package io.lineagestore.config

import io.lineagestore.BuildInfo

/** Generates python/lineagestore/_options_generated.py from [[LineageConf.All]]: the frozen dataclass
  * `LineageOptions` (one typed field per key, its default and documentation) and the table of kinds and
  * bounds that lineagestore._options_support checks values against, with the JVM's rules. The output is
  * already in `ruff format` style (the Python lint checks it).
  */
object PythonOptions {
  val Path = "python/lineagestore/_options_generated.py"

  /** `maxPendingBytes` -> `max_pending_bytes`. */
  def fieldName(name: String): String =
    name.flatMap(c => if (c.isUpper) s"_${c.toLower}" else c.toString)

  private def str(s: String): String = {
    val escaped = s.flatMap {
      case '\\' => "\\\\"
      case '"'  => "\\\""
      case '\n' => "\\n"
      case c    => c.toString
    }
    "\"" + escaped + "\""
  }

  private def literal(e: ConfEntry[_]): String = e.default match {
    case s: String => str(s)
    case other     => other.toString
  }

  private def pyType(e: ConfEntry[_]): String = (e.kind: ConfKind[_]) match {
    case ConfKind.Size | ConfKind.Duration => "int | str"
    case ConfKind.Int | ConfKind.Long      => "int"
    case ConfKind.Str | _: ConfKind.Choice => "str"
  }

  private def choices(e: ConfEntry[_]): String = (e.kind: ConfKind[_]) match {
    case ConfKind.Choice(values) => values.map(str).mkString("(", ", ", if (values.size == 1) ",)" else ")")
    case _                       => "()"
  }

  private def opt(v: Option[Long]): String = v.map(_.toString).getOrElse("None")

  /** Words of `text` in lines of at most `width` characters, each prefixed with `indent`. */
  private def wrap(text: String, indent: String, width: Int = 110): Seq[String] = {
    val lines = Seq.newBuilder[String]
    val line = new StringBuilder(indent)
    for (word <- text.split(' ').filter(_.nonEmpty)) {
      if (line.length > indent.length && line.length + 1 + word.length > width) {
        lines += line.toString
        line.clear()
        line ++= indent
      }
      if (line.length > indent.length) line += ' '
      line ++= word
    }
    if (line.length > indent.length) lines += line.toString
    lines.result()
  }

  private def spec(e: ConfEntry[_]): String =
    Seq(
      "    OptionSpec(",
      s"        field=${str(fieldName(e.name))},",
      s"        name=${str(e.name)},",
      s"        kind=${str(e.kind.name)},",
      s"        default=${literal(e)},",
      s"        min=${opt(e.min)},",
      s"        max=${opt(e.max)},",
      s"        allowed=${str(e.allowed)},",
      s"        choices=${choices(e)},",
      "    ),"
    ).mkString("\n")

  private def field(e: ConfEntry[_]): String = {
    val doc = s"${e.doc} Key ``${e.key}``; ${e.allowed}; default ``${e.defaultText}``."
    val body = wrap(doc, "    ")
    val docstring =
      if (body.size == 1 && body.head.length + 6 <= 110) Seq(s"""    \"\"\"${body.head.trim}\"\"\"""")
      else Seq("    \"\"\"" + body.head.trim) ++ body.tail ++ Seq("    \"\"\"")
    (Seq(s"    ${fieldName(e.name)}: ${pyType(e)} = ${literal(e)}") ++ docstring).mkString("\n")
  }

  def source: String = {
    val entries = LineageConf.All
    s"""# Generated from io.lineagestore.config.LineageConf by
       |#   ${GenerateDocs.Command}
       |# Do not edit: ConfigDocsSuite fails when this file is stale.
       |\"\"\"Typed lineagestore options: one field per ``${LineageConf.Prefix}<name>`` key.\"\"\"
       |
       |from __future__ import annotations
       |
       |from dataclasses import dataclass
       |
       |from lineagestore._options_support import OptionSpec, known_keywords, spark_conf, validate
       |
       |PREFIX = ${str(LineageConf.Prefix)}
       |# The Spark version the lineagestore-spark jar of this release is built and tested against (build.sbt).
       |SPARK_VERSION = ${str(BuildInfo.sparkVersion)}
       |
       |SPECS: tuple[OptionSpec, ...] = (
       |${entries.map(spec).mkString("\n")}
       |)
       |
       |
       |@known_keywords(SPECS)
       |@dataclass(frozen=True)
       |class LineageOptions:
       |    \"\"\"lineagestore settings, checked when created with the rules the JVM applies.
       |
       |    Each field is the key ``${LineageConf.Prefix}<name>`` with ``<name>`` in snake_case. A
       |    bad value raises ``ValueError`` naming the key, the value and what is allowed. Size and duration fields
       |    accept an ``int`` or a string in Spark's forms (``"256m"``, ``"256mb"``, ``"1g"``; ``"30s"``,
       |    ``"5min"``, ``"1h"``) and hold the number of bytes or milliseconds afterwards.
       |    Pass it to ``lineagestore.configure(builder, options)``.
       |    \"\"\"
       |
       |${entries.map(field).mkString("\n\n")}
       |
       |    def __post_init__(self) -> None:
       |        validate(self, SPECS)
       |
       |    def to_spark_conf(self, include_defaults: bool = False) -> dict[str, str]:
       |        \"\"\"The Spark settings (full key -> text); only values other than the default, unless asked.\"\"\"
       |        return spark_conf(self, SPECS, PREFIX, include_defaults)
       |""".stripMargin
  }
}

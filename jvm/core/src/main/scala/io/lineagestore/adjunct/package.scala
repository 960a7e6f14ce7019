package io.lineagestore

/** Adjunct tables without Spark (docs/adjunct-tables.md): [[adjunct.AdjunctTableLog]] (a table's files: its
  * schema, commit records and replica markers, read and written over a blob store),
  * [[adjunct.AdjunctRetention]] (which records and markers clean-up may delete, pure),
  * [[adjunct.TombstoneRetention]] (how long a table keeps tombstones, pure) and [[adjunct.AdjunctInspection]]
  * (what `lineagestore inspect` shows of a table). The Spark glue is `io.lineagestore.spark.adjunct`.
  */
package object adjunct

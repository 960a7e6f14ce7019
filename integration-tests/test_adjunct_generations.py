"""Bounded datasets as generations of an adjunct table (docs/adjunct-tables.md "Generations").

Each generation replaces the table's content whole (keys it lacks are gone), is sealed by the table's commit
record, and readers see one generation or the next, never a mixture: checked for a table of one store and a
partitioned one, for a generation whose record never got written (a crash while publishing), for a re-run,
and for a stream of complete files published one per trigger.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from lineagestore import adjunct
from lineagestore.adjunct import AdjunctTableError
from test_adjunct_tables import CHANGE_SCHEMA, EVENT_SCHEMA, as_table, run_once

DATASET_SCHEMA = "id INT, name STRING, score DOUBLE"


def generation(g: int, keys) -> list[tuple]:
    return [(k, f"g{g}-{k}", float(g)) for k in keys]


@pytest.mark.parametrize("partitions", [None, 3])
def test_generations_replace_the_table_whole_and_atomically(spark, tmp_path, partitions):
    table = tmp_path / "table"
    n = partitions or 1

    def publish(g, rows):
        df = spark.createDataFrame(rows, DATASET_SCHEMA)
        return adjunct.publish(
            df, str(table), ["id"], g, source="daily", retain_versions=3, partitions=partitions
        )

    def contents(version=None):
        return as_table(adjunct.read(spark, str(table), version).collect())

    def expect(g, keys):
        return {k: (f"g{g}-{k}", float(g)) for k in keys}

    assert publish(1, generation(1, range(0, 10))) == 1
    assert contents() == expect(1, range(0, 10))
    assert publish(2, generation(2, range(5, 15))) == 2
    assert contents() == expect(2, range(5, 15))  # keys 0-4 are gone, not left over from generation 1
    assert contents(1) == expect(1, range(0, 10))  # the previous generation stays readable while kept
    events = spark.createDataFrame([(k, k) for k in (0, 7, 14, 99)], EVENT_SCHEMA)
    if n > 1:
        events = events.repartition(n, "id")
    found = {r["id"]: r["name"] for r in adjunct.lookup(events, str(table)).collect()}
    assert found == {0: None, 7: "g2-7", 14: "g2-14", 99: None}

    # a re-run of a published generation does nothing
    assert publish(2, generation(9, range(100, 101))) == 2
    # a crash while publishing generation 3: its stores' deltas are written, its record is not
    assert publish(3, generation(3, range(12, 20))) == 3
    (table / "_adjunct" / "commits" / "3").unlink()
    (table / "_adjunct" / "commits" / ".3.crc").unlink(missing_ok=True)
    assert contents() == expect(2, range(5, 15))  # readers see generation 2 whole
    assert publish(3, generation(3, range(12, 20))) == 3  # the re-run publishes it over generation 2
    assert contents() == expect(3, range(12, 20))
    # changes maintained afterwards replace a generation's rows (they are stored as the oldest there is)
    changes = spark.createDataFrame(
        [(12, "upsert", 1, "changed", 0.0), (13, "delete", 1, None, None)], CHANGE_SCHEMA
    )
    assert adjunct.maintain_batch(changes, 0, str(table), ["id"], "seq", source="cdc") == 4
    assert contents() == expect(3, range(14, 20)) | {12: ("changed", 0.0)}
    # an empty generation empties the table (every partition)
    assert publish(4, []) == 5
    assert contents() == {}

    with pytest.raises(AdjunctTableError, match="has no key column 'user'|no key column 'user'"):
        adjunct.publish(spark.createDataFrame(generation(5, [1]), DATASET_SCHEMA), str(table), ["user"], 5)


def test_publish_stream_one_generation_per_file(spark, tmp_path):
    table = str(tmp_path / "table")
    files = tmp_path / "files"
    files.mkdir()
    for g, keys in ((0, range(0, 4)), (1, range(2, 6))):
        with open(files / f"{g}.json", "w") as f:
            for k, name, score in generation(g, keys):
                f.write(json.dumps({"id": k, "name": name, "score": score}) + "\n")
        # the file source takes files oldest first: make the order not depend on the clock's resolution
        os.utime(files / f"{g}.json", (time.time() - 100 + g, time.time() - 100 + g))
    datasets = spark.readStream.schema(DATASET_SCHEMA).option("maxFilesPerTrigger", 1).json(str(files))
    run_once(adjunct.publish_stream(datasets, table, ["id"], checkpoint=str(tmp_path / "ckpt")))
    assert [v["version"] for v in adjunct.versions(spark, table)] == [1, 2]
    assert as_table(adjunct.read(spark, table, 1).collect()) == {k: (f"g0-{k}", 0.0) for k in range(0, 4)}
    assert as_table(adjunct.read(spark, table).collect()) == {k: (f"g1-{k}", 1.0) for k in range(2, 6)}

"""The Spark Connect client of test_connect.py, in a process of its own (a Connect session switches pyspark into
Connect mode for its whole process). ``python connect_client.py <sc://url> <work dir> <batches json>``: for
each batch, writes its rows as a new input file, then runs an aggregation and a dropDuplicates query once
(``availableNow``: every run restarts the query from its lineagestore checkpoint) and prints, as one JSON line,
the sinks' contents after each run: the aggregation's complete result (a memory sink, which recovers from
its checkpoint only in complete mode) and every row the deduplication wrote (a JSON file sink, append mode).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def main(url: str, work: Path, batches: list[list[dict]]) -> None:
    spark = SparkSession.builder.remote(url).getOrCreate()
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    source = work / "in"
    source.mkdir(parents=True, exist_ok=True)
    outputs = []
    for i, rows in enumerate(batches):
        (source / f"part-{i:04d}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
        events = spark.readStream.schema("k string, v long").option("maxFilesPerTrigger", 1).json(str(source))
        agg = events.groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"))
        dedup = events.dropDuplicates(["k", "v"])
        got = {"provider": spark.conf.get("spark.sql.streaming.stateStore.providerClass")}
        runs = (
            agg.writeStream.format("memory").queryName(f"agg_{i}").outputMode("complete"),
            dedup.writeStream.format("json").option("path", str(work / "dedup-out")).outputMode("append"),
        )
        for name, writer in zip(("agg", "dedup"), runs, strict=True):
            q = (
                writer.option("checkpointLocation", str(work / f"cp-{name}"))
                .trigger(availableNow=True)
                .start()
            )
            q.awaitTermination()
        got["agg"] = sorted(tuple(r) for r in spark.table(f"agg_{i}").collect())
        got["dedup"] = sorted(
            tuple(r) for r in spark.read.schema("k string, v long").json(str(work / "dedup-out")).collect()
        )
        outputs.append(got)
    spark.stop()
    print(json.dumps(outputs))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3]))

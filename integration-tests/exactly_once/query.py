"""A stateful query run as its own process, so a test can kill it with SIGKILL at any moment.

Usage: python query.py <work dir>
Reads JSON events from <work>/input (one file per batch, maxFilesPerTrigger=1), deduplicates them by event
id (state), counts per key (state), and writes both through IdempotentBatchWriter, exactly once per batch.
Exits 0 once every input file is processed.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pyspark.sql import functions as F

from lineagestore.sinks import IdempotentBatchWriter
from lineagestore.testing.session import SNAPSHOT_OFTEN, local_session


def main(work: Path) -> None:
    spark = local_session(conf=SNAPSHOT_OFTEN)
    events = (
        spark.readStream.schema("id long, key string")
        .option("maxFilesPerTrigger", 1)
        .json(str(work / "input"))
    )
    distinct = events.dropDuplicates(["id"])
    dedup_writer = IdempotentBatchWriter(str(work / "out-distinct"), fmt="json")
    counts_writer = IdempotentBatchWriter(str(work / "out-counts"), fmt="json")
    q1 = (
        distinct.writeStream.foreachBatch(dedup_writer)
        .option("checkpointLocation", str(work / "ck-distinct"))
        .trigger(availableNow=True)
        .start()
    )
    q2 = (
        distinct.groupBy("key")
        .agg(F.count("*").alias("n"))
        .writeStream.outputMode("update")
        .foreachBatch(counts_writer)
        .option("checkpointLocation", str(work / "ck-counts"))
        .trigger(availableNow=True)
        .start()
    )
    q1.awaitTermination()
    q2.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))

"""Exactly-once output for ``foreachBatch``: a sink made idempotent by batch ID.

Spark re-runs a micro-batch after a failure or restart with the same batch ID and the same input, and
lineagestore makes the state it reads the same too (the committed lineage). Output is exactly once only if
the sink writes each batch ID at most once, or overwrites it with identical content. ``IdempotentBatchWriter``
does the first: each batch goes to ``<path>/batch_id=<n>/`` written under a temporary name and renamed into
place in one step, and a batch ID already present is executed again (so its state commits) but not written.

    from lineagestore.sinks import IdempotentBatchWriter

    query = df.writeStream.foreachBatch(IdempotentBatchWriter("/data/out", fmt="parquet")).start()

Read the result with ``spark.read.parquet("/data/out")``: ``batch_id`` becomes a column. The rename is atomic
on local and HDFS filesystems; on an object store use a table format with transactional commits instead.
"""

from __future__ import annotations

import uuid
from typing import Any


class IdempotentBatchWriter:
    """A ``foreachBatch`` function writing each batch once, atomically, under ``batch_id=<n>``."""

    def __init__(self, path: str, fmt: str = "parquet", **options: Any) -> None:
        self.path = path.rstrip("/")
        self.fmt = fmt
        self.options = options

    def __call__(self, df: Any, batch_id: int) -> None:
        spark = df.sparkSession
        jvm = spark._jvm
        hadoop_conf = spark._jsc.hadoopConfiguration()
        final = jvm.org.apache.hadoop.fs.Path(f"{self.path}/batch_id={batch_id}")
        fs = final.getFileSystem(hadoop_conf)
        if fs.exists(final):
            # Written by an earlier attempt of this batch. The batch must still run: its stateful operators
            # commit their state only when the plan executes (with checkpoint format 2 Spark fails a batch
            # whose stores reported no checkpoint). Run it into Spark's no-op sink and keep the first output.
            df.write.format("noop").mode("overwrite").save()
            return
        tmp = jvm.org.apache.hadoop.fs.Path(f"{self.path}/_tmp-{batch_id}-{uuid.uuid4().hex}")
        df.write.format(self.fmt).options(**self.options).save(tmp.toString())
        if not fs.rename(tmp, final):
            fs.delete(tmp, True)
            if not fs.exists(final):
                raise OSError(f"could not move the output of batch {batch_id} into {final.toString()}")

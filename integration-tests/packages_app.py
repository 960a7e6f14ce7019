"""A small stateful query run by ``spark-submit --packages io.lineagestore:lineagestore-spark_2.13:<version>``
(integration-tests/test_spark_submit_packages.py): ``python packages_app.py <work dir>``.

It configures the session with ``lineagestore.configure`` as a user would under spark-submit: the running
JVM's ``spark.jars.packages`` names the artifact, so the bundled jar is left out. Two availableNow runs of a
running count/sum on one checkpoint (the second restores the state the first committed). Prints one JSON
line: where the JVM loaded the provider class from, the session's spark.jars, and each batch's output.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import lineagestore

RUNS = [
    [{"k": "a", "v": 1}, {"k": "b", "v": 2}, {"k": "a", "v": 3}],
    [{"k": "a", "v": 10}, {"k": "c", "v": 5}],
]


def main(work: Path) -> None:
    builder = SparkSession.builder.appName("lineagestore-packages").config(
        "spark.sql.shuffle.partitions", "2"
    )
    spark = lineagestore.configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    jvm = spark._jvm
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    provider = jvm.java.lang.Class.forName(lineagestore.PROVIDER_CLASS, True, loader)
    location = provider.getProtectionDomain().getCodeSource().getLocation().toString()

    source = work / "in"
    source.mkdir(parents=True)
    outputs: dict[int, list] = {}

    def sink(df, batch_id):
        outputs[batch_id] = sorted([r["k"], r["cnt"], r["total"]] for r in df.collect())

    for i, rows in enumerate(RUNS):
        (source / f"{i}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
        query = (
            spark.readStream.schema("k string, v int")
            .json(str(source))
            .groupBy("k")
            .agg(F.count(F.lit(1)).alias("cnt"), F.sum("v").alias("total"))
            .writeStream.outputMode("update")
            .foreachBatch(sink)
            .option("checkpointLocation", str(work / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    print(
        "RESULT "
        + json.dumps(
            {
                "providerLocation": location,
                "sparkJars": spark.conf.get("spark.jars", ""),
                "outputs": {str(k): v for k, v in sorted(outputs.items())},
            }
        )
    )
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))

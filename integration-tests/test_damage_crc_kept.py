"""A snapshot zip damaged as a disk fault leaves it (bytes changed in place, Hadoop's ``.crc`` sidecar kept
with the old checksums), then the query resumed cold on a fresh local directory: the load routes around the
snapshot (``lineagestoreSnapshotDetours``) and the results are exact. Issue 46: before, the restart failed
with Hadoop's raw ``ChecksumException`` naming the zip.

The Scala ``DamageRoutingSuite`` covers every region of every kind of file; this is the same damage through
Spark, one query.
"""

from __future__ import annotations

import json
from pathlib import Path

from lineagestore.testing.faults import flip_in_place
from lineagestore.testing.harness import PROVIDER_CLASSES, close_state_stores

PROVIDER = "spark.sql.streaming.stateStore.providerClass"
MIN_DELTAS = "spark.sql.streaming.stateStore.minDeltasForSnapshot"
LOCAL_DIR = "spark.sql.streaming.stateStore.lineagestore.localDir"


def _run(spark, source: Path, checkpoint: Path, latest: dict) -> dict:
    def sink(df, _batch_id):
        latest.clear()
        latest.update({r["k"]: r["count"] for r in df.collect()})

    counts = spark.readStream.schema("k string").json(str(source)).groupBy("k").count()
    query = (
        counts.writeStream.outputMode("complete")
        .foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return query.lastProgress


def test_a_zip_damaged_with_its_crc_kept_is_routed_around_cold(spark, tmp_path):
    saved = {k: spark.conf.get(k, None) for k in (PROVIDER, MIN_DELTAS, LOCAL_DIR)}
    spark.conf.set(PROVIDER, PROVIDER_CLASSES["lineagestore"])
    spark.conf.set(MIN_DELTAS, "2")
    spark.conf.set(LOCAL_DIR, str(tmp_path / "local-first"))
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    source.mkdir()
    latest: dict = {}
    try:
        for b in range(6):  # one run per batch, as a scheduled job: snapshots come from the runs' closes
            (source / f"{b}.json").write_text("".join(json.dumps({"k": k}) + "\n" for k in ("a", f"k{b}")))
            _run(spark, source, checkpoint, latest)
        assert latest == {"a": 6, **{f"k{b}": 1 for b in range(6)}}
        # as an executor restart would: every store uploads its frozen snapshots and is unloaded, so no
        # maintenance pass uploads a newer snapshot after the damage (which the cold run would then load
        # without a detour) and the cold run loads every store from the checkpoint, not from a store still open
        close_state_stores(spark)

        damaged = []
        for store in sorted((checkpoint / "state" / "0").iterdir()):
            zips = sorted(store.glob("*.zip"), key=lambda z: int(z.name.split("_")[0]))
            if len(zips) >= 1:
                newest = zips[-1]
                assert (store / f".{newest.name}.crc").is_file()
                flip_in_place(newest, 60)  # inside the INDEX, the zip's first entry
                damaged.append(newest)
        assert damaged, "no snapshot was uploaded"

        (source / "6.json").write_text(json.dumps({"k": "a"}) + "\n")
        spark.conf.set(LOCAL_DIR, str(tmp_path / "local-cold"))  # every store restores from the checkpoint
        progress = _run(spark, source, checkpoint, latest)
        assert latest == {"a": 7, **{f"k{b}": 1 for b in range(6)}}
        detours = sum(
            op["customMetrics"].get("lineagestoreSnapshotDetours", 0) for op in progress["stateOperators"]
        )
        assert detours >= 1, progress["stateOperators"]
    finally:
        for k, v in saved.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)

"""Seed 003, appendix case 2: a stateful function that keeps a random sample of a fixed size per key.

The seed states it with transformWithState; it runs here both that way (a ``StatefulProcessor`` with a
ValueState for the count and a ListState for the sample, on lineagestore through its session extension) and
with ``applyInPandasWithState``: per group a reservoir sample of ``SAMPLE`` elements and the number seen,
drawn with an unseeded random generator, so two attempts of one batch keep different samples.

As in test_random_bucketing.py, a batch runs twice (its commit log entry is deleted after it ran, as if the
process died between the state commit and Spark's commit log), both attempts' deltas and snapshots stay in
the checkpoint, then the query continues on the same executor and finally on an empty local directory.

Invariants, checked after every run, for every group:

* the sample holds ``min(SAMPLE, seen)`` distinct elements of that group, ``seen`` counts every element of
  the group written so far (no element lost or counted twice);
* **each batch's sample is drawn from the previous batch's sample (as output by the attempt the commit log
  chose) and the elements that batch read**: a store that loaded the other attempt's state would keep
  elements the chosen attempt had already dropped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from seed003_attempts import two_attempts_then_restarts

SAMPLE = 5
GROUPS = 2


def reservoir(key, frames, state) -> Iterator:
    """applyInPandasWithState: the group's sample and count, updated with an unseeded generator."""
    import random

    import pandas as pd

    rnd = random.Random()  # a new draw per attempt: the seed's non-deterministic UDF
    kept, seen = (json.loads(state.get[0]), state.get[1]) if state.exists else ([], 0)
    for frame in frames:
        for element in frame["payload"]:
            seen += 1
            if len(kept) < SAMPLE:
                kept.append(element)
            else:
                slot = rnd.randrange(seen)
                if slot < SAMPLE:
                    kept[slot] = element
    state.update((json.dumps(kept), seen))
    yield pd.DataFrame({"g": [key[0]], "sample": [json.dumps(kept)], "seen": [seen]})


class ReservoirProcessor(StatefulProcessor):
    """transformWithStateInPandas: the same reservoir, its sample in a ListState and its count in a ValueState."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.seen = handle.getValueState("seen", "seen long")
        self.sample = handle.getListState("sample", "element string")

    def handleInputRows(self, key, rows, timerValues):
        import random

        import pandas as pd

        rnd = random.Random()  # a new draw per attempt: the seed's non-deterministic UDF
        kept = [r[0] for r in self.sample.get()]
        seen = self.seen.get()[0] if self.seen.exists() else 0
        for frame in rows:
            for element in frame["payload"]:
                seen += 1
                if len(kept) < SAMPLE:
                    kept.append(element)
                else:
                    slot = rnd.randrange(seen)
                    if slot < SAMPLE:
                        kept[slot] = element
        self.seen.update((seen,))
        self.sample.put([(e,) for e in kept])
        yield pd.DataFrame({"g": [key[0]], "sample": [json.dumps(kept)], "seen": [seen]})

    def close(self) -> None:
        pass


def _with_apply_in_pandas_with_state(df):
    from pyspark.sql.streaming.state import GroupStateTimeout

    return df.groupBy("g").applyInPandasWithState(
        reservoir,
        "g string, sample string, seen long",
        "sample string, seen long",
        "update",
        GroupStateTimeout.NoTimeout,
    )


def _with_transform_with_state(df):
    return df.groupBy("g").transformWithStateInPandas(
        statefulProcessor=ReservoirProcessor(),
        outputStructType="g string, sample string, seen long",
        outputMode="Update",
        timeMode="None",
    )


@pytest.mark.parametrize(
    "transform", [_with_apply_in_pandas_with_state, _with_transform_with_state], ids=["applyInPandas", "tws"]
)
def test_random_samples_follow_the_committed_attempt_across_attempts_and_restarts(
    spark, provider, tmp_path, transform
):
    if provider != "lineagestore":
        pytest.skip("the scenario needs unique checkpoint IDs (checkpoint format 2 on lineagestore)")

    inp = tmp_path / "in"
    inp.mkdir()
    checkpoint = tmp_path / "ck"
    files: list[list[str]] = []  # elements of input file n, read by batch n
    outputs: dict[int, dict[str, tuple[list[str], int]]] = {}

    def add(n: int) -> None:
        start = sum(len(f) for f in files)
        elements = [f"e{start + i}" for i in range(n)]
        name = f"f{len(files):05d}.json"
        rows = "".join(json.dumps({"g": _group(e), "payload": e}) + "\n" for e in elements)
        (inp / f".{name}").write_text(rows)
        (inp / f".{name}").rename(inp / name)
        stamp = 1_700_000_000 + len(files)  # the file source takes the oldest first: batch n reads file n
        os.utime(inp / name, (stamp, stamp))
        files.append(elements)

    def collect(df, batch_id: int) -> None:
        outputs[batch_id] = {r["g"]: (json.loads(r["sample"]), r["seen"]) for r in df.collect()}

    def run() -> int:
        samples = transform(
            spark.readStream.schema("g string, payload string").option("maxFilesPerTrigger", 1).json(str(inp))
        )
        q = (
            samples.writeStream.outputMode("update")
            .foreachBatch(collect)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert q.awaitTermination(180)
        _check(outputs, files)
        return max(outputs)

    first_attempt: dict = {}

    def attempts_differ() -> None:
        assert outputs[1] != first_attempt, "both attempts drew the same samples: nothing would be tested"

    two_attempts_then_restarts(
        spark,
        checkpoint,
        tmp_path / "fresh-local-dir",
        add,
        run,
        before_rerun=lambda: first_attempt.update(outputs[1]),
        after_rerun=attempts_differ,
    )


def _group(element: str) -> str:
    return f"g{int(element[1:]) % GROUPS}"


def _check(outputs: dict[int, dict[str, tuple[list[str], int]]], files: list[list[str]]) -> None:
    """The invariants of the module's docstring, over every batch output so far (batch n read file n)."""
    for batch in sorted(outputs):
        written = [e for f in files[: batch + 1] for e in f]
        for group, (sample, seen) in outputs[batch].items():
            mine = {e for e in written if _group(e) == group}
            assert seen == len(mine), f"batch {batch} {group}: seen {seen}, written {len(mine)}"
            assert len(sample) == len(set(sample)) == min(SAMPLE, seen), f"batch {batch} {group}: {sample}"
            assert set(sample) <= mine, f"batch {batch} {group}: {sorted(set(sample) - mine)} never written"
            if batch - 1 in outputs and group in outputs[batch - 1]:
                allowed = set(outputs[batch - 1][group][0]) | set(files[batch])
                stale = sorted(set(sample) - allowed)
                assert not stale, (
                    f"batch {batch} {group}: {stale} were dropped by the committed attempt of batch "
                    f"{batch - 1} (sample {outputs[batch - 1][group][0]}): the state came from another attempt"
                )

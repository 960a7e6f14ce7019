"""What the command line draws and refuses without reading any checkpoint: usage errors, the progress line,
durations, and tables laid out for a terminal or for a script. No JVM."""

from __future__ import annotations

import re

import pytest

from lineagestore.cli import main


def test_usage_errors_exit_2(capsys):
    for argv in (["gc", "x", "--retain", "0"], ["gc", "x", "--grace", "soon"], ["frobnicate"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
    assert "must be at least 1" in capsys.readouterr().err


def test_progress_line_and_durations(monkeypatch):
    import io

    monkeypatch.setenv("TERM", "xterm")  # a terminal rich draws on (TERM=dumb: no live display)

    from lineagestore._units import parse_duration_ms
    from lineagestore.cli.progress import Progress

    buf = io.StringIO()
    p = Progress(True, buf)
    p.start("verify", 4)
    p.step("state/0/0")
    p.note("a line above the bar")
    p.finish()
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buf.getvalue())  # rich's colours and cursor moves
    assert re.search(r"verify .*1/4 +25% .*eta .*state/0/0", drawn), drawn
    assert "a line above the bar\n" in drawn
    quiet = io.StringIO()
    p = Progress(False, quiet)
    p.start("x", 1)
    p.step("y")
    p.note("z")
    p.finish()
    assert quiet.getvalue() == ""
    assert [parse_duration_ms(t) for t in ("0s", "90", "30m", "6h", "2d", "250ms")] == [
        0,
        90_000,
        1_800_000,
        21_600_000,
        172_800_000,
        250,
    ]
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration_ms("soon")


def test_tables_are_plain_text_tty_or_not_and_fit_the_width_without_breaking_a_cell(monkeypatch):
    from lineagestore.cli import render

    header, rows = (
        ["store", "head", "files"],
        [["state/0/0", "3_" + "a" * 60, "12"], ["state/0/1", "3_b", "4"]],
    )

    def drawn() -> str:
        page = render.Page()
        page.table(header, rows)
        return page.text()

    monkeypatch.delenv("COLUMNS", raising=False)
    # pytest captures stdout: not a terminal, so 80 columns, the plain layout scripts read
    assert render.terminal_width() == 80
    assert drawn().splitlines()[1].split() == rows[0]
    piped = {}
    for columns in (80, 40):
        monkeypatch.setenv("COLUMNS", str(columns))
        piped[columns] = drawn()

    class Tty:
        def isatty(self):
            return True

    monkeypatch.setattr(render.sys, "stdout", Tty())
    monkeypatch.setenv("COLUMNS", "40")  # the terminal's width
    narrow = drawn()
    assert narrow == piped[40]  # a terminal gets the same characters as a pipe: no colour, no box
    assert "\x1b" not in narrow and not re.search(r"[\u2500-\u257f]", narrow)
    long_cell = "3_" + "a" * 60
    assert any(long_cell in line for line in narrow.splitlines())  # the long cell is never cut
    assert all(len(line) <= 40 for line in narrow.splitlines() if long_cell not in line), narrow
    # too wide for 40 columns: the columns after the key are cut into groups, each under the key column
    assert re.search(r"^state/0/0 +12$", narrow, re.M) and re.search(r"^state/0/1 +4$", narrow, re.M), narrow


def _gc_report(stores: list[dict]) -> dict:
    return {
        "checkpoint": "cp",
        "applied": False,
        "retain": 1,
        "graceMs": 21_600_000,
        "deleteFiles": 0,
        "deleteBytes": 0,
        "keptFiles": 3,
        "keptBytes": 300,
        "errors": [],
        "stores": stores,
    }


def _gc_store(path: str, **fields) -> dict:
    store = {
        "path": path,
        "head": "5_" + "f" * 36,
        "oldestRetained": 5,
        "snapshotBase": "4_" + "a" * 36,
        "delete": [],
        "keptYoungOrphans": [],
        "refused": None,
        "warnings": [],
        "errors": [],
    }
    return {**store, **fields}


def test_gc_words_each_refusal_and_warning_the_jvm_returns_as_data_within_80_columns():
    from lineagestore.cli import gc

    head = "5_" + "f" * 36
    zip4, zip2 = "4_" + "a" * 36 + ".zip", "2_" + "b" * 36 + ".zip"
    report = _gc_report(
        [
            _gc_store("state/0/0", refused={"kind": "noHead"}),
            _gc_store(
                "state/0/1",
                refused={
                    "kind": "inconsistent",
                    "conflicts": ["commit log batches 3 and 4 both name version 4"],
                },
            ),
            _gc_store("state/0/2", refused={"kind": "headMissing", "head": head, "file": head + ".delta"}),
            _gc_store("state/0/3", refused={"kind": "fromANewerJar", "version": 7}),
            _gc_store(
                "state/0/4",
                warnings=[
                    {"kind": "lineageUnreadable", "error": "3_c.delta: its header is damaged"},
                    {"kind": "expiredIndexUnreadable", "snapshot": zip2, "error": "CRC mismatch"},
                    {"kind": "retainedIndexUnreadable", "snapshot": zip4, "error": "INDEX is truncated"},
                ],
            ),
        ]
    )
    text = gc.render(report, width=80)
    assert all(len(line) <= 80 for line in text.splitlines()), text
    flat = " ".join(text.split())
    assert "state/0/0: nothing to do: Spark's commit log names no checkpoint of this store" in flat
    assert (
        "state/0/1: nothing to do: the committed lineage is inconsistent: commit log batches 3 and 4 both name "
        "version 4" in flat
    )
    assert (
        f"state/0/2: nothing to do: the newest committed checkpoint {head} has no file here "
        f"(state/0/2/{head}.delta); run verify" in flat
    )
    assert "state/0/3: nothing to do: fromANewerJar: version 7" in flat  # an unknown kind: its facts
    assert "warning: 3_c.delta: its header is damaged" in flat
    assert (
        f"warning: cannot read {zip2} before deleting it (CRC mismatch): its blobs are left to the orphan "
        "sweep" in flat
    )
    assert (
        f"warning: no shared blob is deleted: the retained snapshot {zip4} is unreadable (INDEX is "
        "truncated)" in flat
    )


def test_gc_words_each_file_reason_within_80_columns():
    from lineagestore.cli import gc

    day = 86_400_000
    reasons = {
        "retiredStore": (
            {"operatorId": 0, "partitionId": 2, "partitions": 2, "batch": 7, "lastBatch": 5},
            "partition 2 is retired: operator 0 has 2 partitions in batch 7 and no retained batch names this "
            "store (the last was 5)",
        ),
        "beforeFreshStart": (
            {"base": 4, "oldestRetained": 5, "head": 6},
            "before the repartition at version 4, whose delta holds the whole state after a repartition and "
            "rebuilds the retained versions 5..6",
        ),
        "belowSnapshotBase": (
            {"committed": False, "base": 4, "oldestRetained": 5, "head": 5},
            "attempt outside the committed lineage, below version 4 whose snapshot rebuilds the retained "
            "version 5",
        ),
        "outsideLineage": (
            {"status": "orphan", "oldestRetained": 5, "head": 5},
            "orphan attempt outside the committed lineage, older than the retained version 5",
        ),
        "ofDeletedSnapshots": ({"snapshots": ["2_b.zip"]}, "referenced only by deleted snapshots: 2_b.zip"),
        "unreferenced": ({"ageMs": 2 * day, "graceMs": day}, "referenced by no snapshot, 2d old"),
        "unreferencedYoung": (
            {"ageMs": 3000, "graceMs": 6 * 3_600_000},
            "it may belong to a snapshot upload in progress",
        ),
        "unfinishedWrite": (
            {"target": "7_d.delta", "ageMs": 2 * day, "graceMs": day},
            "an unfinished write of 7_d.delta",
        ),
    }
    files = [
        {"file": f"{n}_{'e' * 36}.delta", "bytes": 100, "reason": {"kind": kind, **facts}}
        for n, (kind, (facts, _)) in enumerate(reasons.items())
    ]
    text = gc.render(_gc_report([_gc_store("state/0/0", delete=files)]), width=80)
    assert all(len(line) <= 80 for line in text.splitlines()), text
    flat = " ".join(text.split())
    for kind, (_, words) in reasons.items():
        assert words in flat, (kind, text)


def test_verify_words_each_problem_the_jvm_returns_as_data_within_80_columns():
    from lineagestore.cli import verify

    uri = "file:/data/cp"
    delta, zip7 = "7_" + "c" * 36 + ".delta", "7_" + "c" * 36 + ".zip"
    problems = [
        {
            "store": "state/0/0",
            "file": f"{uri}/state/0/0/{delta}",
            "kind": "missing",
            "snapshot": zip7,
            "batch": 6,
            "batches": [6],
            "via": None,
        },
        {
            "store": "state/0/1",
            "file": f"{uri}/state/0/1/shared/x.sst",
            "kind": "error",
            "error": f"{uri}/state/0/1/shared/x.sst: its CRC32C does not match; restore it from a backup",
            "batches": [5, 6],
            "via": f"{uri}/state/0/1/{zip7}",
        },
        {"store": "", "file": f"{uri}/commits", "error": "no committed batch", "batches": []},
        {"store": "", "file": f"{uri}/x", "kind": "fromANewerJar", "version": 7, "batches": []},
    ]
    report = {
        "checkpoint": "cp",
        "uri": uri,
        "ok": False,
        "batches": [5, 6],
        "skippedBatches": [],
        "stores": 2,
        "filesVerified": 3,
        "bytesVerified": 300,
        "problems": problems,
        "results": [],
    }
    text = verify.render(report, width=80)
    assert all(len(line) <= 80 for line in text.splitlines()), text
    flat = " ".join(text.split())
    assert (
        f"state/0/0/{delta} it is missing (and so is {zip7}), but the commit log says batch 6 committed it "
        "needed by batch(es) 6" in flat
    )
    assert (
        f"state/0/1/shared/x.sst (read for state/0/1/{zip7}) state/0/1/shared/x.sst: its CRC32C does not "
        "match; restore it from a backup needed by batch(es) 5..6" in flat
    )
    assert "commits no committed batch" in flat
    assert "x fromANewerJar: version 7" in flat  # an unknown kind: its facts

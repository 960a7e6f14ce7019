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

"""What the command line draws and refuses without reading any checkpoint: usage errors, the progress line,
durations, and tables laid out for a terminal or for a script. No JVM."""

from __future__ import annotations

import os
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


def test_tables_are_plain_when_stdout_is_not_a_terminal_and_fit_a_terminal_otherwise(monkeypatch):
    from lineagestore.cli import render as cli_render

    header, rows = (
        ["store", "head", "files"],
        [["state/0/0", "3_" + "a" * 60, "12"], ["state/0/1", "3_b", "4"]],
    )
    # pytest captures stdout: not a terminal, so the plain layout scripts read
    assert cli_render.table(header, rows).splitlines()[1].split() == rows[0]

    class Tty:
        def isatty(self):
            return True

    monkeypatch.setattr(cli_render.sys, "stdout", Tty())
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "dumb")  # a terminal that cannot draw: plain, as in a log
    assert cli_render.table(header, rows).splitlines()[1].split() == rows[0]
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(cli_render.shutil, "get_terminal_size", lambda: os.terminal_size((40, 20)))
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", cli_render.table(header, rows))
    assert all(len(line) <= 40 for line in drawn.splitlines()), drawn
    assert "state/0/0" in drawn and "aaaa" in drawn  # the long cell folds onto more lines, none is cut
    assert drawn.count("a") >= 60

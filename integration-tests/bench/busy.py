"""The busy mode's load: CPU-bound processes of the benchmark's own beside a cell, as on an executor whose
cores other tasks share (run.py --busy N).

Each process spins on arithmetic in a loop that touches no memory to speak of and does no I/O, at the same
scheduling priority as the cell, so the two providers of a run meet the same competition for the cores and
nothing else (no cache or disk contention that one provider's access pattern would feel more than the other's).
"""

from __future__ import annotations

import subprocess
import sys

SPIN = "x = 0\nwhile True:\n    x = (x * 1103515245 + 12345) & 0xFFFFFFFF\n"


class CpuLoad:
    """``with CpuLoad(n):`` runs n spinning processes for the block's duration (none for n = 0)."""

    def __init__(self, processes: int):
        self.processes = processes
        self._procs: list[subprocess.Popen] = []

    def __enter__(self) -> CpuLoad:
        for _ in range(self.processes):
            self._procs.append(subprocess.Popen([sys.executable, "-c", SPIN]))
        return self

    def __exit__(self, *exc) -> None:
        for p in self._procs:
            p.kill()
        for p in self._procs:
            p.wait()
        self._procs.clear()

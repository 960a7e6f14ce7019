"""The busy mode's load: CPU-bound processes of the benchmark's own beside a cell, as on an executor whose
cores other tasks share (run.py --busy N).

Each process spins on arithmetic in a loop that touches no memory to speak of and does no I/O, at the same
scheduling priority as the cell, so the two providers of a run meet the same competition for the cores and
nothing else (no cache or disk contention that one provider's access pattern would feel more than the other's).
"""

from __future__ import annotations

import os
import subprocess
import sys

# It ends by itself when the process that started it goes (a benchmark killed mid-run must not leave the
# machine busy for the runs after it: it did once, and a later "idle" cell ran beside two spinners).
SPIN = """import os, sys
parent = int(sys.argv[1])  # given, not read: the starter may be gone before this line runs
x = 0
while os.getppid() == parent:
    for _ in range(1 << 20):
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF
"""


class CpuLoad:
    """``with CpuLoad(n):`` runs n spinning processes for the block's duration (none for n = 0)."""

    def __init__(self, processes: int):
        self.processes = processes
        self._procs: list[subprocess.Popen] = []

    def __enter__(self) -> CpuLoad:
        for _ in range(self.processes):
            self._procs.append(subprocess.Popen([sys.executable, "-c", SPIN, str(os.getpid())]))
        return self

    def __exit__(self, *exc) -> None:
        for p in self._procs:
            p.kill()
        for p in self._procs:
            p.wait()
        self._procs.clear()

"""The engine's kernels run as plain Python (``py_func``, run by the interpreter) give the same
records as compiled by numba, a fresh process's first small jobs do not load numba, and the
load of the compiled kernels is not counted against a job's time limit.

A fresh process that has to load the kernels (for a large board, or once its plain Python
budget is spent in the middle of a job) does not spend the job's time limit on the load: the
load is made slower than the limit here, and the job still ends with its answer.

Each plain run is a fresh Python process: once a process has compiled the kernels, it runs
them compiled. The compiled side runs in this process, after the engine's warm-up.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from knights_tour.board import Board
from knights_tour.solvers.warnsdorff import solve, warm_up

pytestmark = pytest.mark.process

SIZES = range(5, 9)

PLAIN_RECORDS = """
import json, sys
from knights_tour.board import Board
from knights_tour.solvers import warnsdorff_attempts
from knights_tour.solvers.warnsdorff import solve
warnsdorff_attempts._plain_nodes_left = 1 << 60  # every job of this process as plain Python
for n in range(5, 9):
    for closed in (False, True):
        for r in range(n):
            for c in range(n):
                record = solve(Board(n, n), (r, c), closed=closed).to_dict()
                record.pop("elapsed_s")
                print(json.dumps(record, sort_keys=True))
assert "numba" not in sys.modules, "numba was loaded"
"""

FIRST_JOBS = """
import sys
from knights_tour._numba import is_compiled
from knights_tour.board import Board
from knights_tour.solvers import warnsdorff_attempts
from knights_tour.solvers.engine import kernel
from knights_tour.solvers.warnsdorff import solve
print("imported", "numba" in sys.modules)
solve(Board(5, 5), (0, 0))
print("small job", "numba" in sys.modules)
solve(Board(13, 13), (0, 0))
print("large board", "numba" in sys.modules, is_compiled(kernel))
"""

BUDGET_SPENT = """
import sys
from knights_tour._numba import is_compiled
from knights_tour.board import Board
from knights_tour.solvers import warnsdorff_attempts
from knights_tour.solvers.engine import kernel
from knights_tour.solvers.warnsdorff import search
nodes = 0  # the nodes counted against PLAIN_NODES leave out each attempt's start square
while nodes <= 2 * warnsdorff_attempts.PLAIN_NODES:
    nodes += search(Board(8, 8), (nodes % 8, 1), closed=True, node_limit=1000).nodes
print("spent", "numba" in sys.modules, is_compiled(kernel))
"""


SLOW_LOAD = """
import time
from knights_tour import _numba
real = _numba._numba
def slow():  # a load as slow as on a busy machine, longer than the job's time limit
    if "numba" not in sys.modules:
        time.sleep(3.0)
    return real()
_numba._numba = slow
"""

LARGE_JOB_LOADS_OFF_ITS_CLOCK = (
    "import sys\n"
    + SLOW_LOAD
    + """
from knights_tour.solvers.api import solve
record = solve(50, (0, 0), time_limit_s=1.5)
print(record.status.value, record.reason, "numba" in sys.modules)
"""
)

PLAIN_JOB_LOADS_OFF_ITS_CLOCK = (
    "import sys\n"
    + SLOW_LOAD
    + """
from knights_tour.board import Board
from knights_tour.solvers import warnsdorff_attempts
from knights_tour.solvers.warnsdorff import search
warnsdorff_attempts._plain_nodes_left = 10  # spent in the first of the job's many attempts
record = search(Board(5, 5), (0, 1), exhaustive=True, time_limit_s=1.5)
print(record.status.value, record.reason, "numba" in sys.modules)
"""
)


def _python(script: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_plain_kernels_give_the_compiled_records_on_every_start_of_5x5_to_8x8():
    plain = [json.loads(line) for line in _python(PLAIN_RECORDS)]
    warm_up()
    compiled = []
    for n in SIZES:
        for closed in (False, True):
            for r in range(n):
                for c in range(n):
                    record = solve(Board(n, n), (r, c), closed=closed).to_dict()
                    record.pop("elapsed_s")
                    compiled.append(json.loads(json.dumps(record, sort_keys=True)))
    assert len(plain) == len(compiled) == 2 * sum(n * n for n in SIZES)
    differing = [(a["rows"], a["start"], a["closed"]) for a, b in zip(plain, compiled) if a != b]
    assert differing == []


def test_small_jobs_run_without_numba_until_a_large_board_needs_it():
    assert _python(FIRST_JOBS) == ["imported False", "small job False", "large board True True"]


def test_a_process_loads_the_kernels_once_its_plain_nodes_are_spent():
    assert _python(BUDGET_SPENT) == ["spent True True"]


def test_a_large_job_in_a_fresh_process_loads_the_kernels_off_its_time_limit():
    assert _python(LARGE_JOB_LOADS_OFF_ITS_CLOCK) == ["found None True"]


def test_a_job_whose_plain_nodes_run_out_loads_the_kernels_off_its_time_limit():
    assert _python(PLAIN_JOB_LOADS_OFF_ITS_CLOCK) == ["no_tour None True"]

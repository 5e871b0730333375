"""Compile the package's numba kernels into numba's on-disk cache once, before a parallel run's
tests start.

On a checkout whose cache is empty (a fresh clone, as in CI), every process that calls a kernel
first compiles it: at the start of a parallel run the test workers and the Celery workers of the
first tests each compiled the same kernels at once. The root conftest starts this module in a
process of its own while the test workers collect, and each worker waits for it (:func:`wait`)
before its first test: the kernels are then compiled once and loaded from the cache by
everything after; with a warm cache this is a load. What any test checks is unchanged: a kernel
this does not reach compiles on first use, as before.

    python tests/_warm_kernels.py
"""

from __future__ import annotations

import time
from pathlib import Path

from _polling import DEADLINE_S


def warm_up() -> None:
    """Compile (or load from the cache) the kernels of the engine and its constructions
    (:func:`knights_tour.solvers.warm_up_backends`), the counting search's
    (:func:`knights_tour.counting.search.warm_up`) and the frontier DP's, whole and in halves
    (:func:`knights_tour.counting.frontier_run.count_paths`)."""
    from knights_tour.board import Board
    from knights_tour.counting import search
    from knights_tour.counting.frontier_run import count_paths
    from knights_tour.solvers import warm_up_backends

    warm_up_backends()
    search.warm_up()
    count_paths(Board(5, 5), (0, 0))
    count_paths(Board(5, 5), halves=True)


def wait(done: Path, timeout_s: float = DEADLINE_S) -> None:
    """Wait until ``done`` exists (the root conftest writes it once the warm-up process has
    exited, whatever its outcome), at most ``timeout_s`` seconds: past that the tests start
    anyway and compile what they use."""
    deadline = time.monotonic() + timeout_s
    while not done.exists() and time.monotonic() < deadline:
        time.sleep(0.1)


if __name__ == "__main__":
    warm_up()

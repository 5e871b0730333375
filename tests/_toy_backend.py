"""A toy solver backend for the tests of the backend registry: plain backtracking over every
knight move (no Warnsdorff's rule, no pruning), for boards of at most 25 squares.

One module and one descriptor, :data:`TOY`, and nothing else: the registry takes it with
``knights_tour.solvers.register(TOY)`` in a process, or from ``KT_EXTRA_BACKENDS`` as
``"_toy_backend:TOY"`` (this folder on ``PYTHONPATH``) in every process, workers included.
"""

from __future__ import annotations

import time

from knights_tour.board import Board, Square
from knights_tour.solvers import Backend, CostModel
from knights_tour.tours.record import Proof, Status, TourResult

NAME = "toy"

TOY = Backend(
    name=NAME,
    solve="_toy_backend:solve",
    max_squares=25,
    cost=CostModel(fixed_s=1e-3, per_square_s=1e-3, estimate_per_square_s=1e-3),
    label="the toy",
)
"""The toy backend's descriptor."""


def solve(
    board: Board,
    start: Square,
    *,
    closed: bool = False,
    time_limit_s: float | None = None,
    exhaustive: bool = False,
    node_limit: int | None = None,
) -> TourResult:
    """Find a knight's tour of ``board`` from ``start`` by backtracking over every move, or
    prove there is none (proof ``exhaustive``: the search ran out of branches). ``unknown``
    (reason ``time_limit``) if ``time_limit_s`` runs out first; ``exhaustive`` and
    ``node_limit`` are ignored (the search is always complete).

    Raises
    ------
    InvalidSquareError
        If ``start`` is off the board.
    """
    began = time.perf_counter()
    start = board.check_square(start)
    deadline = None if time_limit_s is None else began + time_limit_s
    result = TourResult(rows=board.rows, cols=board.cols, start=start, solver=NAME, closed=closed)
    first = board.index(start)
    path = [first]
    seen = {first}
    nodes = 0

    def extend() -> bool | None:
        nonlocal nodes
        nodes += 1
        if deadline is not None and nodes % 1024 == 0 and time.perf_counter() > deadline:
            return None
        if len(path) == board.n_squares:
            return not closed or first in board.neighbours[path[-1]]
        for nxt in board.neighbours[path[-1]]:
            if nxt not in seen:
                path.append(nxt)
                seen.add(nxt)
                found = extend()
                if found is not False:
                    return found
                seen.discard(path.pop())
        return False

    found = extend()
    result.nodes = nodes
    if found is None:
        result.status, result.reason = Status.UNKNOWN, "time_limit"
    elif found:
        result.status = Status.FOUND
        result.tour = [board.square(i) for i in path]
    else:
        result.status, result.proof = Status.NO_TOUR, Proof.EXHAUSTIVE
        result.proof_detail = f"backtracking over every move found no tour ({nodes} nodes)"
    result.elapsed_s = time.perf_counter() - began
    return result

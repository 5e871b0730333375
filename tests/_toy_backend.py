"""A toy solver backend for the tests of the backend registry: the tests' exhaustive search
(:mod:`_exhaustive`: plain backtracking over every knight move), for boards of at most 16
squares.

One module and one descriptor, :data:`TOY`, and nothing else: the registry takes it with
``knights_tour.solvers.register(TOY)`` in a process, or from ``KT_EXTRA_BACKENDS`` as
``"_toy_backend:TOY"`` (this folder on ``PYTHONPATH``) in every process, workers included.
"""

from __future__ import annotations

import time
from typing import Unpack

from _exhaustive import find_tour

from knights_tour.board import Board, Square
from knights_tour.solvers import Backend, CostModel, Limits
from knights_tour.tours.record import Proof, Status, TourResult

NAME = "toy"

TOY = Backend(
    name=NAME,
    solve="_toy_backend:solve",
    max_squares=16,
    cost=CostModel(fixed_s=1e-3, per_square_s=1e-3, estimate_per_square_s=1e-3),
    label="the toy",
)
"""The toy backend's descriptor."""


def solve(board: Board, start: Square, **limits: Unpack[Limits]) -> TourResult:
    """A knight's tour of ``board`` from ``start`` by exhaustive search, or ``no_tour`` with
    proof ``exhaustive``; the limits but ``closed`` are ignored (boards of at most 16 squares
    are searched to the end at once).

    Raises
    ------
    InvalidSquareError
        If ``start`` is off the board.
    """
    began = time.perf_counter()
    start = board.check_square(start)
    closed = limits.get("closed", False)
    result = TourResult(rows=board.rows, cols=board.cols, start=start, solver=NAME, closed=closed)
    tour = find_tour(board, start, closed)
    if tour is None:
        result.status, result.proof = Status.NO_TOUR, Proof.EXHAUSTIVE
        result.proof_detail = "backtracking over every knight move found no tour"
    else:
        result.status, result.tour = Status.FOUND, tour
    result.elapsed_s = time.perf_counter() - began
    return result

"""knights-tour: batch and distributed knight's tour solver.

Quick use::

    >>> import knights_tour
    >>> r = knights_tour.solve(8, "a1")
    >>> r.status.value, knights_tour.verify_tour(8, r.tour, start="a1").ok
    ('found', True)
"""

from knights_tour.board import Board, Square, parse_board
from knights_tour.errors import (
    InvalidBoardError,
    InvalidJobError,
    InvalidSquareError,
    KnightsTourError,
    UnknownSolverError,
)
from knights_tour.result import Proof, Status, TourResult
from knights_tour.solvers.api import solve
from knights_tour.verify import Verdict, verify_tour

__version__ = "0.1.0"

__all__ = [
    "Board",
    "Square",
    "parse_board",
    "solve",
    "verify_tour",
    "Verdict",
    "TourResult",
    "Status",
    "Proof",
    "KnightsTourError",
    "InvalidBoardError",
    "InvalidSquareError",
    "UnknownSolverError",
    "InvalidJobError",
]

"""The Python API: :func:`solve` one job in-process, :func:`verify_tour` a tour."""

from __future__ import annotations

from collections.abc import Sequence

from knights_tour._numba import job_clock
from knights_tour.board import Board, Square, parse_board
from knights_tour.solvers import DEFAULT_SOLVER, get_solver
from knights_tour.tours.record import Status, TourResult, as_tour
from knights_tour.tours.verify import verify_tour


def solve(
    size: int | str | Sequence[int] | Board,
    start: Square | str,
    solver: str = DEFAULT_SOLVER,
    closed: bool = False,
    time_limit_s: float | None = None,
    exhaustive: bool = False,
    node_limit: int | None = None,
) -> TourResult:
    """Find a knight's tour from ``start``, or prove there is none, and verify the answer.

    Parameters
    ----------
    size : int, "RxC", (rows, cols) or Board
        The board; ``8`` means 8×8. A :class:`Board` (already validated) is used as it is.
    start : (row, col) or algebraic name
        Start square, row 0 at the top (``(0, 0)`` is ``a8`` on 8×8).
    solver : str
        A registered backend name (:func:`knights_tour.solvers.backends`).
    closed : bool
        Ask for a closed (re-entrant) tour.
    time_limit_s : float, optional
        Wall-clock limit in seconds; on expiry the answer is ``unknown`` (reason ``time_limit``).
    exhaustive : bool
        Search without a node budget, so a finished search proves ``no_tour`` (engine only).
    node_limit : int, optional
        Override the engine's node budget.

    Returns
    -------
    TourResult
        ``status`` is ``found`` only if the tour passed :func:`verify_tour`; a backend's tour
        that fails verification becomes ``error`` with the verifier's reason.

    Raises
    ------
    InvalidBoardError, InvalidSquareError, UnknownSolverError
        On bad input.

    Examples
    --------
    >>> r = solve(5, "a5")
    >>> r.status.value, len(r.tour), r.checks.verifier
    ('found', 25, True)
    >>> solve(5, (0, 1)).proof.value   # (0, 1) is on the minority colour of 5x5
    'parity'
    """
    board = parse_board(size)
    start_sq = board.parse_square(start)
    backend = get_solver(solver)
    began = job_clock()
    result = backend(
        board,
        start_sq,
        closed=closed,
        time_limit_s=time_limit_s,
        exhaustive=exhaustive,
        node_limit=node_limit,
    )
    if not result.elapsed_s:
        result.elapsed_s = job_clock() - began
    result.elapsed_s = round(float(result.elapsed_s), 6)
    return check_result(result)


def check_result(result: TourResult) -> TourResult:
    """Run the verifier on a result's tour; a ``found`` claim that fails becomes ``error``.

    Sets ``result.checks.verifier`` (True/False, or None when there is no tour) and makes the
    tour a :data:`~knights_tour.tours.record.Tour` array.
    """
    result.tour = as_tour(result.tour)
    if result.tour is not None:
        verdict = verify_tour(
            (result.rows, result.cols), result.tour, start=result.start, closed=result.closed
        )
        result.checks.verifier = verdict.ok
        if not verdict.ok:
            result.status = Status.ERROR
            result.proof = None
            result.reason = f"verifier rejected the {result.solver} tour: {verdict.reason}"
    elif result.status == Status.FOUND:
        result.status = Status.ERROR
        result.checks.verifier = False
        result.reason = f"{result.solver} claimed a tour but returned none"
    return result


__all__ = ["solve", "check_result"]

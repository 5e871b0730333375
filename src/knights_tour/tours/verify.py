"""The verifier: the single judge of whether a sequence of squares is a knight's tour.

It is deliberately small and independent of every solver: it trusts nothing but the definition.
A *knight's tour* on a ``rows × cols`` board is a sequence of all ``rows*cols`` squares, each
exactly once, every consecutive pair a knight move (a Hamiltonian path of the knight's graph).
It is *closed* (re-entrant) if the last square is also a knight move from the first (a
Hamiltonian cycle).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeGuard, cast

from knights_tour.board import Board, Square, is_knight_move, parse_board

if TYPE_CHECKING:  # numpy is not imported on the verifier's start path
    import numpy as np


@dataclass(frozen=True)
class Verdict:
    """Outcome of :func:`verify_tour`: ``ok`` and, when not ok, the first violation in words."""

    ok: bool
    reason: str | None = None

    def __bool__(self) -> bool:
        return self.ok


def verify_tour(
    size: int | str | Sequence[int] | Board,
    tour: Sequence[Sequence[int]] | np.ndarray | None,
    start: Square | str | None = None,
    closed: bool = False,
) -> Verdict:
    """Check that ``tour`` is a knight's tour of the board.

    Parameters
    ----------
    size : int, str, (rows, cols) or Board
        The board, e.g. ``8``, ``"6x8"`` or ``(6, 8)``.
    tour : sequence of (row, col), or numpy integer array of shape (N, 2)
        The squares in visiting order; length must be ``rows*cols``. Row 0 is the top row.
        A numpy array takes a vectorised path with the same checks and messages (for huge
        boards).
    start : (row, col) or algebraic name, optional
        If given, the tour must begin on this square.
    closed : bool
        If true, the tour must also be closed: last square a knight move from the first.

    Returns
    -------
    Verdict
        ``Verdict(True)`` if every check passes, else ``Verdict(False, reason)`` naming the first
        violation found (checks run in order: shape, length, squares on board, repeats, start,
        moves, closure).

    Raises
    ------
    InvalidBoardError, InvalidSquareError
        Only for a malformed ``size`` or ``start`` (a bad *tour* is a verdict, never an error).

    Examples
    --------
    >>> verify_tour(1, [(0, 0)])
    Verdict(ok=True, reason=None)
    >>> verify_tour(5, [(0, 0), (1, 1)]).reason
    'tour has 2 squares, a 5x5 board needs 25'
    """
    board = parse_board(size)
    start_sq = board.parse_square(start) if start is not None else None
    if tour is None:
        return Verdict(False, "no tour given")
    if _is_ndarray(tour):
        return _verify_array(board, tour, start_sq, closed)
    return _verify_list(board, cast("Sequence[Sequence[int]]", tour), start_sq, closed)


def _verify_list(
    board: Board, tour: Sequence[Sequence[int]], start_sq: Square | None, closed: bool
) -> Verdict:
    """:func:`verify_tour` for a sequence of ``(row, col)`` pairs."""
    squares: list[Square] = []
    for step, sq in enumerate(tour, start=1):
        if (
            isinstance(sq, (str, bytes))
            or not isinstance(sq, Sequence)
            or len(sq) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in sq)
        ):
            return Verdict(False, f"step {step} is not a (row, col) pair of integers: {sq!r}")
        squares.append((sq[0], sq[1]))
    n = board.n_squares
    if len(squares) != n:
        return Verdict(False, f"tour has {len(squares)} squares, a {board.label} board needs {n}")
    seen: dict[Square, int] = {}
    for step, sq in enumerate(squares, start=1):
        if not board.contains(sq):
            return Verdict(False, f"step {step} {sq} is off the {board.label} board")
        if sq in seen:
            return Verdict(
                False,
                f"square {board.algebraic(sq)} {sq} is visited twice (steps {seen[sq]} and {step})",
            )
        seen[sq] = step
    if start_sq is not None and squares[0] != start_sq:
        return Verdict(
            False,
            f"tour starts on {board.algebraic(squares[0])}, not on {board.algebraic(start_sq)}",
        )
    for step in range(1, n):
        a, b = squares[step - 1], squares[step]
        if not is_knight_move(a, b):
            return Verdict(
                False,
                f"step {step} -> {step + 1} ({board.algebraic(a)} -> {board.algebraic(b)}) "
                "is not a knight move",
            )
    if closed and not is_knight_move(squares[-1], squares[0]):
        return Verdict(
            False,
            f"tour is not closed: last square {board.algebraic(squares[-1])} is not a knight "
            f"move from the first {board.algebraic(squares[0])}",
        )
    return Verdict(True)


def _is_ndarray(obj: object) -> TypeGuard[np.ndarray]:
    """True for a numpy array (numpy is imported only if it is already loaded)."""
    np = sys.modules.get("numpy")
    return np is not None and isinstance(obj, np.ndarray)


def _verify_array(board: Board, tour: Any, start_sq: Square | None, closed: bool) -> Verdict:
    """:func:`verify_tour` for a numpy integer array of shape ``(N, 2)``: the same checks in the
    same order with the same messages, vectorised (a 5000×5000 tour has 25e6 steps, too many for
    a Python loop). Each check finds the *first* violating step, like the list path. Only
    called for a numpy array, so numpy is loaded already and taken from ``sys.modules``."""
    np = sys.modules["numpy"]

    if tour.ndim != 2 or tour.shape[1] != 2 or not np.issubdtype(tour.dtype, np.integer):
        return Verdict(
            False,
            f"tour array must have shape (N, 2) and an integer dtype, got shape {tour.shape} "
            f"dtype {tour.dtype}",
        )
    n = board.n_squares
    if len(tour) != n:
        return Verdict(False, f"tour has {len(tour)} squares, a {board.label} board needs {n}")
    # int64 would double the memory of a 25e6-square check; int32 holds every on-board value
    # and n (< 2**31), and off-board values are only compared, never multiplied
    small = n < 2**31 and tour.dtype.itemsize <= 4 and tour.dtype.kind == "i"
    wide = np.int32 if small else np.int64
    rows = tour[:, 0].astype(wide)
    cols = tour[:, 1].astype(wide)

    def sq(i: int) -> Square:
        return (int(rows[i]), int(cols[i]))

    off = (rows < 0) | (rows >= board.rows) | (cols < 0) | (cols >= board.cols)
    first_off = int(np.argmax(off)) if off.any() else n
    del off
    # repeats among the steps before the first off-board one (the list path's order of checks)
    index = rows[:first_off] * wide(board.cols) + cols[:first_off]
    seen = np.zeros(n, dtype=bool)
    seen[index] = True
    # first_off (<= n) on-board squares are all distinct iff first_off of them are marked
    if int(np.count_nonzero(seen)) < first_off:
        order = np.argsort(index, kind="stable")  # equal squares stay in step order
        ordered = index[order]
        repeat = ordered[1:] == ordered[:-1]
        j = int(order[1:][repeat].min())  # the first step that revisits a square
        first = int(order[np.searchsorted(ordered, index[j])])
        return Verdict(
            False,
            f"square {board.algebraic(sq(j))} {sq(j)} is visited twice "
            f"(steps {first + 1} and {j + 1})",
        )
    del index, seen
    if first_off < n:
        return Verdict(
            False, f"step {first_off + 1} {sq(first_off)} is off the {board.label} board"
        )
    if start_sq is not None and sq(0) != start_sq:
        return Verdict(
            False, f"tour starts on {board.algebraic(sq(0))}, not on {board.algebraic(start_sq)}"
        )
    # a knight move: {|d_row|, |d_col|} == {1, 2} (all squares are on the board here, so the
    # differences fit the dtype)
    dr = np.abs(np.diff(rows))
    dc = np.abs(np.diff(cols))
    bad = ~(((dr == 1) & (dc == 2)) | ((dr == 2) & (dc == 1)))
    del dr, dc
    if bad.any():
        i = int(np.argmax(bad))
        a, b = sq(i), sq(i + 1)
        return Verdict(
            False,
            f"step {i + 1} -> {i + 2} ({board.algebraic(a)} -> {board.algebraic(b)}) "
            "is not a knight move",
        )
    if closed and not is_knight_move(sq(n - 1), sq(0)):
        return Verdict(
            False,
            f"tour is not closed: last square {board.algebraic(sq(n - 1))} is not a knight "
            f"move from the first {board.algebraic(sq(0))}",
        )
    return Verdict(True)


def is_closed(tour: Sequence[Sequence[int]]) -> bool:
    """True if the last square of ``tour`` is a knight move from its first (no other checks)."""
    if len(tour) < 2:
        return False
    return is_knight_move(tuple(tour[-1]), tuple(tour[0]))

"""The search side of a count: the tours beginning with a prefix, counted, and a start square
split into such prefixes. Pure: no Celery, no Redis.

"How many open knight's tours start on this square?" is answered by an exhaustive enumeration
that counts and never stores tours (the compiled kernel
:func:`knights_tour.counting.count_kernel.count_completions`, exact pruning described there).
A count is split into independent pieces: all paths of the first ``depth`` moves from the start
square that the kernel's tests do not already rule out (*prefixes*, :func:`split`); each piece
counts the tours beginning with its prefix (:func:`count_subjob`) and the partial counts are
summed. Planning a count over the board's squares and summing the pieces is
:mod:`knights_tour.counting.plan`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from types import ModuleType

import numpy as np

from knights_tour.board import Board, Square
from knights_tour.counting.symmetry import symmetries
from knights_tour.errors import InvalidJobError


def count_kernel() -> ModuleType:
    """The compiled counting kernels (:mod:`knights_tour.counting.count_kernel`:
    ``count_completions``, ``prefix_viable``), imported on first use: importing numba costs a
    process that only plans or reads a count."""
    from knights_tour.counting import count_kernel as kernel

    return kernel


# -- the knight's graph as kernel arrays -------------------------------------------------------
@lru_cache(maxsize=32)
def knight_graph(board: Board) -> tuple[np.ndarray, np.ndarray]:
    """``(nbr, ndeg)``: the knight's graph of ``board`` in the kernel's layout.

    ``nbr`` is an int64 array of shape ``(rows*cols, 8)`` (row-major square indices, padded with
    -1), ``ndeg[v]`` the number of knight moves from square ``v``. Cached per board; read-only.
    """
    n = board.n_squares
    nbr = np.full((n, 8), -1, dtype=np.int64)
    ndeg = np.zeros(n, dtype=np.int64)
    for v, targets in enumerate(board.neighbours):
        ndeg[v] = len(targets)
        nbr[v, : len(targets)] = targets
    nbr.setflags(write=False)
    ndeg.setflags(write=False)
    return nbr, ndeg


def check_prefix(board: Board, prefix: Sequence[Sequence[int]]) -> list[Square]:
    """Return ``prefix`` as a list of squares if it is a valid start of a knight's tour.

    Raises
    ------
    InvalidJobError
        If it is empty, longer than the board, has a square off the board, repeats a square, or
        has a step that is not a knight move.
    """
    if len(prefix) == 0:
        raise InvalidJobError("a count prefix needs at least the start square")
    if len(prefix) > board.n_squares:
        raise InvalidJobError(
            f"count prefix has {len(prefix)} squares, the {board.label} board only "
            f"{board.n_squares}"
        )
    squares: list[Square] = []
    seen: set[Square] = set()
    for sq in prefix:
        if len(sq) != 2:
            raise InvalidJobError(f"count prefix square {sq!r} is not a (row, col) pair")
        s = (int(sq[0]), int(sq[1]))
        if not board.contains(s):
            raise InvalidJobError(f"count prefix square {s} is off the {board.label} board")
        if s in seen:
            raise InvalidJobError(f"count prefix visits {s} twice")
        if squares and s not in board.knight_moves(squares[-1]):
            raise InvalidJobError(f"count prefix step {squares[-1]} -> {s} is not a knight move")
        seen.add(s)
        squares.append(s)
    return squares


def _prefix_array(board: Board, prefix: Sequence[Square]) -> np.ndarray:
    return np.array([board.index(s) for s in prefix], dtype=np.int64)


def count_subjob(
    board: Board, prefix: Sequence[Sequence[int]], closed: bool = False
) -> tuple[int, int]:
    """Count the knight's tours of ``board`` whose first squares are ``prefix``.

    Parameters
    ----------
    board : Board
    prefix : sequence of (row, col)
        Start square first, then the first moves (row 0 at the top); at least one square.
    closed : bool
        Count only closed (re-entrant) tours.

    Returns
    -------
    (count, nodes)
        Number of (directed) tours beginning with ``prefix`` and search nodes the kernel visited.

    Raises
    ------
    InvalidJobError
        If ``prefix`` is not a path of knight moves on the board (see :func:`check_prefix`).
    """
    squares = check_prefix(board, prefix)
    nbr, ndeg = knight_graph(board)
    count, nodes = count_kernel().count_completions(
        nbr, ndeg, _prefix_array(board, squares), bool(closed)
    )
    return int(count), int(nodes)


# -- splitting ---------------------------------------------------------------------------------
def split(
    board: Board, start: Square, depth: int, closed: bool = False
) -> list[tuple[Square, ...]]:
    """All prefixes of ``depth`` moves from ``start`` not ruled out by the kernel's tests.

    A branch is dropped only when the kernel's exact tests prove that no tour completes it, so
    the counts of the returned prefixes sum to the count for ``start``. Paths that cover the
    whole board in fewer moves are returned as they are (they are complete tours).

    Returns
    -------
    list of tuple of (row, col)
        Each of ``depth + 1`` squares (start first), in a fixed (deterministic) order.

    Raises
    ------
    InvalidSquareError
        If ``start`` is off the board.
    InvalidJobError
        If ``depth`` is negative.
    """
    start = board.check_square(start)
    if depth < 0:
        raise InvalidJobError(f"split depth must be >= 0, got {depth}")
    nbr, ndeg = knight_graph(board)
    kernel = count_kernel()
    n = board.n_squares
    out: list[tuple[Square, ...]] = []

    def viable(path: list[int]) -> bool:
        return bool(kernel.prefix_viable(nbr, ndeg, np.array(path, dtype=np.int64), bool(closed)))

    def extend(path: list[int]) -> None:
        if not viable(path):
            return
        if len(path) == depth + 1 or len(path) == n:
            out.append(tuple(board.square(v) for v in path))
            return
        for w in board.neighbours[path[-1]]:
            if w not in path:
                extend([*path, w])

    extend([board.index(start)])
    return out


def fold(
    board: Board, start: Square, prefixes: Sequence[tuple[Square, ...]]
) -> list[tuple[tuple[Square, ...], int]]:
    """``prefixes`` of tours from ``start`` up to the board's symmetries that fix ``start``.

    A symmetry of the board that fixes the start square maps the tours beginning with a prefix
    one-to-one onto those beginning with its image (it preserves knight moves), so one prefix
    of each orbit is counted and its count weighed by the orbit's size: the corner of a square
    board is fixed by the diagonal mirror, which halves its work; the centre of an odd square
    board by all 8 symmetries.

    Returns
    -------
    list of (prefix, weight)
        One prefix per orbit (its first in the given order), with the number of given prefixes
        in its orbit; the weights sum to ``len(prefixes)``.
    """
    fixing = [g for g in symmetries(board) if g(start) == start]
    given = set(prefixes)
    kept: dict[tuple[Square, ...], int] = {}
    first: dict[tuple[Square, ...], tuple[Square, ...]] = {}
    for p in prefixes:
        orbit = {tuple(g(s) for s in p) for g in fixing}
        canon = min(orbit)
        if canon not in first:
            first[canon] = p
            kept[p] = len(orbit & given)
    return list(kept.items())


def warm_up() -> None:
    """Load the compiled counting kernel in this process (compiling it on the first run on a
    machine; later a load from numba's cache), so the first sub-job does not pay for it. For a
    worker's process-start hook."""
    count_subjob(Board(3, 4), [(0, 0)])
    split(Board(3, 4), (0, 0), 1)


__all__ = ["knight_graph", "check_prefix", "count_subjob", "split", "fold", "warm_up"]

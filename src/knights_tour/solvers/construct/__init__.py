"""Constructive knight's tours in time linear in the squares, for the boards the search misses.

The ``warnsdorff`` backend tries its heuristic search first and falls back to these
constructions (:func:`closed_tour`, :func:`open_tour`). Every tour is checked by the verifier in
:func:`knights_tour.solvers.api.solve`, like any other.

Method
------
* **Tiling and edge exchanges** (boards with both sides >= 5). The rows and the columns are cut
  into parts of 6, 8 or 10 squares (plus one part of 5, 7, 9 or 11 on an odd side), and every
  block gets a stored closed tour (:mod:`knights_tour.solvers.construct.blocks`). Two cycles in
  neighbouring blocks become one by an *exchange*: remove a tour edge ``a-b`` of one and
  ``c-d`` of the other where ``a-c`` and ``b-d`` are knight moves, and add ``a-c`` and ``b-d``.
  Exchanges across every block border, in union-find order, leave one Hamiltonian cycle; it is
  walked from the start square. This is the joining step of the divide-and-conquer tours of
  Parberry (1997) and of the block constructions of Schwenk (1991) and Cull & De Curtins (1978),
  with the joining edges found by a local search instead of fixed in advance.
* **Open tours on odd × odd boards.** The block holding the start square has odd sides and gets
  an open tour from the start (found by the caller's search on that block of at most 11 × 11);
  the exchanges then join every cycle into that path (an exchange joins a cycle into a path as
  well, keeping the path's ends).
* **3 × n boards** (:mod:`knights_tour.solvers.construct.thin`): on three rows no exchange
  exists, so closed regions are joined through 3 × 4 connectors, using the two edges every
  closed tour of a 3 × k board has beside each corner.

Which boards: :func:`closed_tour` covers every board with a closed tour (Schwenk 1991);
:func:`open_tour` adds the odd × odd boards with sides >= 5 and the 3 × n boards with n odd —
from any majority-colour square for which a block or strip search finds a path. That was every
majority-colour square tried: all of them on 3 × n for odd n from 21 to 79 and n = 101, 201,
2001, and on m × n for odd 5 <= m <= 15, m <= n <= 31 (the tests sample these). On 3 × 17 and
3 × 19 the middle squares (0, 8) and (1, 9) get no construction (their strip is the whole
board); the search finds those tours. 4 × n boards (no closed tours, so no closed blocks) are
left to the search.

References
----------
.. [1] A. J. Schwenk, "Which rectangular chessboards have a knight's tour?", Mathematics
   Magazine 64(5):325-332, 1991.
.. [2] I. Parberry, "An efficient algorithm for the knight's tour problem", Discrete Applied
   Mathematics 73(3):251-260, 1997.
.. [3] P. Cull and J. De Curtins, "Knight's tour revisited", Fibonacci Quarterly 16(3):276-285,
   1978.

This package imports neither Celery nor Redis.
"""

from __future__ import annotations

import numpy as np

from knights_tour.board import Board, Square
from knights_tour.solvers.construct import tiling
from knights_tour.solvers.construct.thin import thin_tour
from knights_tour.solvers.construct.tiling import BlockPath
from knights_tour.solvers.theory import closed_tour_exists


def closed_tour(board: Board, start: Square) -> np.ndarray | None:
    """A closed knight's tour of ``board`` beginning on ``start``, by construction.

    Parameters
    ----------
    board : Board
    start : (row, col)
        Row 0 at the top.

    Returns
    -------
    numpy.ndarray or None
        ``int32`` array of shape ``(rows*cols, 2)`` whose last square is a knight move from
        ``start``; None when the board has no closed tour (Schwenk 1991) — and, on a board that
        has one, only if a construction step failed (not seen on any board tried).
    """
    if not closed_tour_exists(board) or board.n_squares < 2:
        return None
    if 3 in (board.rows, board.cols):
        return thin_tour(board, start, closed=True)
    return tiling.closed_tour(board, start)


def open_tour(board: Board, start: Square, block_path: BlockPath) -> np.ndarray | None:
    """An open knight's tour of ``board`` from ``start``, by construction.

    A board with a closed tour gets :func:`closed_tour` from ``start`` (an open tour from every
    square). Odd × odd boards with sides >= 5 and 3 × n boards with n odd get a tiling around
    the start square (package docstring); other boards (4 × n, and the boards with no open
    tour) None.

    Parameters
    ----------
    board : Board
    start : (row, col)
        On the majority colour if the board has an odd number of squares (colour parity).
    block_path : callable
        ``block_path(block, local_start) -> (n, 2) array or None``: an open tour of a small
        odd × odd block (at most 11 × 11) from the start's place in it, e.g. a bounded search.

    Returns
    -------
    numpy.ndarray or None
        ``int32`` ``(rows*cols, 2)`` open tour from ``start``, or None.
    """
    if closed_tour_exists(board):
        return closed_tour(board, start)
    if board.n_squares % 2 == 0 or (start[0] + start[1]) % 2:
        return None  # no closed tour on an even board (4 x n), or the minority colour
    if 3 in (board.rows, board.cols):
        return thin_tour(board, start, closed=False)
    return tiling.open_tour(board, start, block_path)


def constructible(board: Board, closed: bool) -> bool:
    """Whether :func:`closed_tour` (``closed``) or :func:`open_tour` applies to the board at all
    (a cheap test on the sides; the construction may still return None for some starts of an
    open tour)."""
    if closed_tour_exists(board) and board.n_squares > 1:
        return True
    if closed or (board.rows * board.cols) % 2 == 0:
        return False
    m = min(board.rows, board.cols)
    return m >= 5 or (m == 3 and max(board.rows, board.cols) >= 7)


__all__ = ["closed_tour", "open_tour", "constructible"]

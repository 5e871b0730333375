"""What is *known* about knight's tours: proofs that no tour exists, as pure functions.

Every ``no_tour`` answer of the engine that does not come from a finished search comes from
here, with its source. The CP-SAT backend and the batch runner may reuse these functions.

Facts used
----------
* **Colour parity.** A knight move always changes the colour ``(row + col) % 2`` of the square.
  A tour visits all ``rows*cols`` squares alternating colours, so on a board with an odd number
  of squares it starts and ends on the majority colour (colour 0, the corners' colour), and a
  closed tour (a cycle, of odd length) cannot exist at all.
* **Closed tours** [1]_. An ``m × n`` board with ``m ≤ n`` has a closed knight's tour unless
  (a) ``m`` and ``n`` are both odd; (b) ``m ∈ {1, 2, 4}``; or (c) ``m = 3`` and
  ``n ∈ {4, 6, 8}`` (:func:`closed_tour_exists`).
* **Open tours** [2]_ [3]_. An ``m × n`` board with ``m ≤ n`` has an open knight's tour unless
  ``m = 1 and n > 1``; ``m = 2``; ``m = 3`` and ``n ∈ {3, 5, 6}``; or ``m = n = 4``. (The 1×1
  board has the one-square tour.) (:func:`open_tour_exists`)
* **4 × n boards: no open tour starts on the two middle rows** (:func:`middle_rows_proof`).
  Pósa's outer/inner argument that a 4 × n board has no closed tour [4]_, extended to open
  tours.

On boards that do have tours, another start square may still have none (e.g. some squares of
3×n); for those this module knows nothing, and the answer must come from a finished search
(proof ``exhaustive``), CP-SAT, or a construction that finds a tour.

References
----------
.. [1] A. J. Schwenk, "Which rectangular chessboards have a knight's tour?", Mathematics
   Magazine 64(5):325-332, 1991.
.. [2] P. Cull and J. De Curtins, "Knight's tour revisited", Fibonacci Quarterly
   16(3):276-285, 1978.
.. [3] A. Conrad, T. Hindrichs, H. Morsy and I. Wegener, "Solution of the knight's Hamiltonian
   path problem on chessboards", Discrete Applied Mathematics 50(2):125-134, 1994.
.. [4] I. M. Yaglom and A. M. Yaglom, *Challenging Mathematical Problems with Elementary
   Solutions*, 1964 (L. Pósa's solution for the 4 × n board).

This module imports neither Celery nor Redis.
"""

from __future__ import annotations

from knights_tour.board import Board, Square
from knights_tour.tours.record import Proof

SCHWENK_1991 = (
    'Schwenk 1991, "Which rectangular chessboards have a knight\'s tour?", Math. Magazine '
    "64(5):325-332"
)
OPEN_TOUR_THEOREM = (
    'Cull & De Curtins 1978, "Knight\'s tour revisited", Fibonacci Quart. 16(3); Conrad, '
    "Hindrichs, Morsy & Wegener 1994, \"Solution of the knight's Hamiltonian path problem on "
    'chessboards", Discrete Appl. Math. 50(2)'
)


def parity_proof(board: Board, start: Square, closed: bool = False) -> str | None:
    """The colour-parity argument against a tour from ``start``, or None if it does not apply.

    A knight move changes the colour ``(row + col) % 2``, so a tour alternates colours: on a
    board with an odd number of squares it starts and ends on the majority colour (the
    corners'), and no closed tour (a cycle of odd length) exists.

    Parameters
    ----------
    board : Board
    start : (row, col)
        Row 0 at the top.
    closed : bool
        Whether a closed (re-entrant) tour is asked for.

    Returns
    -------
    str or None
        The argument in words when the board has an odd number of squares and either a closed
        tour is asked for or ``start`` is on the minority colour; else None.
    """
    n = board.n_squares
    if n % 2 == 0:
        return None
    majority, minority = board.colour_counts()
    if closed:
        return (
            f"colour parity: a closed tour alternates colours, so it needs an even number of "
            f"squares; {board.label} has {n}"
        )
    if Board.colour(start) == 1:
        return (
            f"colour parity: {board.label} has {majority} squares of the start's opposite colour "
            f"and {minority} of its own; a tour alternates colours, so it must start on the "
            f"majority colour, and {board.algebraic(start)} is on the minority colour"
        )
    return None


def closed_tour_exists(board: Board) -> bool:
    """Schwenk's theorem: whether the board has a closed knight's tour at all.

    An ``m × n`` board (``m ≤ n``) has one unless ``m`` and ``n`` are both odd,
    ``m ∈ {1, 2, 4}``, or ``m = 3`` and ``n ∈ {4, 6, 8}``.

    Parameters
    ----------
    board : Board

    Returns
    -------
    bool

    References
    ----------
    .. [1] A. J. Schwenk, "Which rectangular chessboards have a knight's tour?", Mathematics
       Magazine 64(5):325-332, 1991.
    """
    m, n = sorted((board.rows, board.cols))
    if m % 2 == 1 and n % 2 == 1:
        return False
    if m in (1, 2, 4):
        return False
    if m == 3 and n in (4, 6, 8):
        return False
    return True


def open_tour_exists(board: Board) -> bool:
    """Whether the board has an open knight's tour from *some* start square.

    An ``m × n`` board (``m ≤ n``) has one unless ``m = 1 and n > 1``, ``m = 2``, ``m = 3`` and
    ``n ∈ {3, 5, 6}``, or ``m = n = 4``; the 1×1 board has the trivial one-square tour.

    Parameters
    ----------
    board : Board

    Returns
    -------
    bool

    References
    ----------
    .. [1] P. Cull and J. De Curtins, "Knight's tour revisited", Fibonacci Quarterly
       16(3):276-285, 1978.
    .. [2] A. Conrad, T. Hindrichs, H. Morsy and I. Wegener, "Solution of the knight's
       Hamiltonian path problem on chessboards", Discrete Applied Mathematics 50(2):125-134,
       1994.
    """
    m, n = sorted((board.rows, board.cols))
    if m == 1:
        return n == 1
    if m == 2:
        return False
    if m == 3 and n in (3, 5, 6):
        return False
    if m == 4 and n == 4:
        return False
    return True


def middle_rows_proof(board: Board, start: Square) -> str | None:
    """Pósa's outer/inner argument against an open tour from ``start`` on a 4 × n (or n × 4)
    board, n >= 2.

    The squares of the two outer rows (2n of them) attack only squares of the two middle rows
    (2n). In a Hamiltonian path on the 4n squares each outer square has path-degree 2, or 1 if
    it is an end, and all its path edges go to middle squares; counting edges, the path has
    ``e - 1`` middle–middle edges where ``e`` is the number of its ends on outer rows. A path
    starting on a middle row has ``e <= 1``, hence ``e = 1`` and no middle–middle edge: it
    alternates middle/outer. It also alternates colours, so every middle square (the even
    positions) would have the start's colour — but the middle rows hold both colours (n >= 2).
    The engine's exhaustive search agrees on every small 4 × n board (tests/solvers/test_theory.py).

    Parameters
    ----------
    board : Board
    start : (row, col)
        Row 0 at the top.

    Returns
    -------
    str or None
        The argument in words; None unless ``start`` is on one of the two middle lines parallel
        to the long side of a 4 × n board.

    References
    ----------
    .. [1] I. M. Yaglom and A. M. Yaglom, *Challenging Mathematical Problems with Elementary
       Solutions*, 1964 (L. Pósa's proof that a 4 × n board has no closed tour, here
       extended to open tours).
    """
    rows, cols = board.rows, board.cols
    if rows == 4 and cols >= 2:
        line, n = start[0], cols
    elif cols == 4 and rows >= 2:
        line, n = start[1], rows
    else:
        return None
    if line not in (1, 2):
        return None
    return (
        f"no open knight's tour of {board.label} starts on {board.algebraic(start)}: on a 4 x n "
        f"board the 2n squares of the outer lines attack only the 2n squares of the middle "
        f"lines, so a tour with an end on a middle line must alternate middle/outer; it also "
        f"alternates colours, so all middle squares would share one colour, but they have both "
        f"(Posa's outer/inner argument for 4 x n boards, Yaglom & Yaglom 1964, extended to "
        f"open tours; here n = {n})"
    )


def no_tour_proof(board: Board, start: Square, closed: bool = False) -> tuple[Proof, str] | None:
    """A proof that no knight's tour of the wanted kind starts on ``start``, if one is known
    without searching.

    Checks, in order: colour parity (:func:`parity_proof`, cheapest and self-contained), then
    :func:`closed_tour_exists` [1]_ (closed) or :func:`open_tour_exists` [2]_ [3]_ (open), then
    the middle rows of 4 × n boards (open; :func:`middle_rows_proof`).

    Parameters
    ----------
    board : Board
    start : (row, col)
        Row 0 at the top; must be on the board.
    closed : bool
        Whether a closed (re-entrant) tour is asked for.

    Returns
    -------
    (Proof, str) or None
        ``(Proof.PARITY, argument)`` or ``(Proof.THEOREM, statement with citation)``; None when
        no proof is known (a tour may or may not exist from this start — search).

    Raises
    ------
    InvalidSquareError
        If ``start`` is off the board.

    References
    ----------
    .. [1] A. J. Schwenk, "Which rectangular chessboards have a knight's tour?", Mathematics
       Magazine 64(5):325-332, 1991.
    .. [2] P. Cull and J. De Curtins, "Knight's tour revisited", Fibonacci Quarterly
       16(3):276-285, 1978.
    .. [3] A. Conrad, T. Hindrichs, H. Morsy and I. Wegener, "Solution of the knight's
       Hamiltonian path problem on chessboards", Discrete Applied Mathematics 50(2):125-134,
       1994.
    """
    start = board.check_square(start)
    parity = parity_proof(board, start, closed)
    if parity is not None:
        return Proof.PARITY, parity
    m, n = sorted((board.rows, board.cols))
    if closed and not closed_tour_exists(board):
        return Proof.THEOREM, (
            f"no closed knight's tour on {board.label}: an m x n board (m <= n) has one unless "
            f"m and n are both odd, m in {{1, 2, 4}}, or m = 3 and n in {{4, 6, 8}} "
            f"({SCHWENK_1991}); here m = {m}, n = {n}"
        )
    if not closed and not open_tour_exists(board):
        return Proof.THEOREM, (
            f"no open knight's tour on {board.label}: an m x n board (m <= n) has one unless "
            f"m = 1 < n, m = 2, m = 3 and n in {{3, 5, 6}}, or m = n = 4 "
            f"({OPEN_TOUR_THEOREM}); here m = {m}, n = {n}"
        )
    if not closed:
        middle = middle_rows_proof(board, start)
        if middle is not None:
            return Proof.THEOREM, middle
    return None


__all__ = [
    "parity_proof",
    "closed_tour_exists",
    "open_tour_exists",
    "middle_rows_proof",
    "no_tour_proof",
    "SCHWENK_1991",
    "OPEN_TOUR_THEOREM",
]

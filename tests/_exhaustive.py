"""The tests' independent answer on small boards: is there a knight's tour from this start
square? Plain exhaustive depth-first search over the Hamiltonian paths (open tours) or cycles
(closed tours) of the knight's graph: no Warnsdorff's rule, no pruning, no theorem, nothing of
the engine but :class:`knights_tour.board.Board`'s move table.

The answers are kept for the test process: the engine's, the construction's and CP-SAT's tests
ask about the same small boards. A closed tour is a Hamiltonian cycle, so it passes through
every square: there is one from any start if and only if there is one from a1, which is
searched once per board.
"""

from __future__ import annotations

import functools

from knights_tour.board import Board, Square


def has_tour(board: Board, start: Square, closed: bool) -> bool:
    """True if ``board`` has a knight's tour from ``start`` (a closed one if ``closed``),
    by exhaustive search (cached per board, start and kind)."""
    if closed:
        return _search(board.rows, board.cols, (0, 0), True) is not None
    return _search(board.rows, board.cols, start, False) is not None


def find_tour(board: Board, start: Square, closed: bool) -> list[Square] | None:
    """The first knight's tour of ``board`` from ``start`` (a closed one if ``closed``) that
    the exhaustive search meets, as squares in visiting order, or None if there is none."""
    path = _search(board.rows, board.cols, start, closed)
    return None if path is None else [board.square(i) for i in path]


@functools.cache
def _search(rows: int, cols: int, start: Square, closed: bool) -> tuple[int, ...] | None:
    board = Board(rows, cols)
    nb, n, s = board.neighbours, board.n_squares, board.index(start)
    seen = [False] * n
    seen[s] = True
    path = [s]

    def dfs(p: int) -> bool:
        if len(path) == n:
            return not closed or s in nb[p]
        for q in nb[p]:
            if not seen[q]:
                seen[q] = True
                path.append(q)
                if dfs(q):
                    return True
                path.pop()
                seen[q] = False
        return False

    return tuple(path) if dfs(s) else None

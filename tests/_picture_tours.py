"""Tours for the picture tests (render, svg, report), made WITHOUT the project's engine, so the
picture tests do not depend on it: a tour from the literature typed in, and a tiny plain
backtracking search (Warnsdorff's 1823 rule for the move order, backtracking on dead ends).
Every tour used is checked with the project's verifier before a test relies on it.
"""

from __future__ import annotations

from knights_tour.board import Board
from knights_tour.output.tourfile import parse_step_matrix
from knights_tour.tours.record import Record
from knights_tour.tours.verify import verify_tour

# A 5x5 open knight's tour from the corner, as published with the olympiad problem "knight's
# bypass" (csforschool.com, OlympTask id=31784, sample output for n = 5). Row 0 at the top.
LIT_5X5 = """\
 1 20 17 12  3
16 11  2  7 18
21 24 19  4 13
10 15  6 23  8
25 22  9 14  5
"""


def lit_5x5() -> list[tuple[int, int]]:
    board, tour = parse_step_matrix(LIT_5X5)
    assert board == Board(5, 5)
    assert verify_tour(board, tour, start=(0, 0)).ok
    return tour


def backtrack_tour(
    rows: int, cols: int, start: tuple[int, int], closed: bool = False, node_cap: int = 200_000
) -> list[tuple[int, int]] | None:
    """Depth-first search for a knight's tour from ``start``; moves tried in Warnsdorff order
    (fewest onward moves first, Warnsdorff 1823; ties to the square farther from the centre),
    backtracking on dead ends; for a closed tour a branch is cut when the start square has no
    unvisited neighbour left. Returns the tour
    (list of (row, col)) or None if none was found within ``node_cap`` nodes."""
    board = Board(rows, cols)
    n = board.n_squares
    nbrs = board.neighbours
    s = board.index(start)
    seen = [False] * n
    path = [s]
    seen[s] = True
    nodes = 0

    def far(i: int) -> float:  # tie-break: prefer squares far from the centre (edges first)
        r, c = board.square(i)
        return (r - (rows - 1) / 2) ** 2 + (c - (cols - 1) / 2) ** 2

    def onward(i: int) -> int:
        return sum(1 for j in nbrs[i] if not seen[j])

    def dfs() -> bool:
        nonlocal nodes
        nodes += 1
        if nodes > node_cap:
            return False
        if len(path) == n:
            return not closed or s in nbrs[path[-1]]
        if closed and not any(not seen[j] for j in nbrs[s]):
            return False  # no way back to the start is left
        here = path[-1]
        for j in sorted((j for j in nbrs[here] if not seen[j]), key=lambda j: (onward(j), -far(j))):
            seen[j] = True
            path.append(j)
            if dfs():
                return True
            path.pop()
            seen[j] = False
        return False

    if not dfs():
        return None
    tour = [board.square(i) for i in path]
    assert verify_tour(board, tour, start=start, closed=closed).ok
    return tour


def record(rows, cols, start, tour, *, closed=False, status="found", solver="test", **fields):
    """A JSON record as ``Record.to_dict()`` writes it (every field, in order), as read back
    from a JSON Lines file; ``fields`` sets any other field by its JSON value."""
    board = Board(rows, cols)
    plain = {
        "rows": rows,
        "cols": cols,
        "start": list(start),
        "start_square": board.algebraic(tuple(start)),
        "solver": solver,
        "closed": closed,
        "status": status,
        "tour": [list(sq) for sq in tour] if tour is not None else None,
        "checks": {"verifier": True if tour is not None else None, "cpsat": None},
        "elapsed_s": 0.001,
        "batch_id": "test-batch",
    }
    plain.update(fields)
    rec = Record.from_dict(plain).to_dict()
    assert set(plain) <= set(rec)
    return rec

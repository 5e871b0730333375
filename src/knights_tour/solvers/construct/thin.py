"""Closed and open knight's tours of 3 × n boards, by joining closed tours through connectors.

On three rows no two closed tours can be merged by exchanging a pair of edges (no 4-cycle of
the knight's graph crosses a line between two columns), so the blocks are joined differently:

* **Forced edges.** A corner of a 3 × k board has only two knight moves, so every closed tour
  of it uses both. In particular every closed tour of 3 × k contains the two edges
  ``(0, k-1)-(2, k-2)`` and ``(2, k-1)-(0, k-2)`` inside its last two columns, and their
  mirror images inside its first two columns.
* **Opening.** A closed tour without one such edge is a Hamiltonian path of its board whose two
  ends lie on the side; a whole closed region can therefore be treated as one *forced edge*
  between those two squares (walking it means walking the region).
* **Connector.** Between two closed 3-row regions, a 3 × 4 strip is covered by a Hamiltonian
  cycle of the small graph "strip + the opened edge of each region" that uses both forced
  edges (found by :func:`small_tour`). The result is a closed tour of the three parts together
  that still has the forced edges of its ends, so the joining repeats along the board.

A closed tour of 3 × n (n even >= 10; Schwenk 1991 says these are exactly the 3 × n boards
with one) is stored 3 × k blocks (k = 10..22) joined by connectors. An open tour of 3 × n from a
square ``s`` uses a middle strip around ``s`` instead: a Hamiltonian path of "strip + the
opened regions on either side" from ``s`` (:func:`small_tour` again). The cost is linear in the
squares: the regions are laid by the compiled kernel, the small searches are of fixed size.

This module imports neither Celery nor Redis.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from knights_tour.board import Board, Square
from knights_tour.solvers.construct import kernel as CK
from knights_tour.solvers.construct.blocks import block_tour
from knights_tour.solvers.construct.tiling import neighbour_table

THIN_BLOCKS = tuple(range(10, 23, 2))
"""Widths of the stored closed 3 × k block tours."""
CONNECTOR_WIDTH = 4
"""Width of the strip joining two closed 3-row regions (the narrowest that works)."""
MIDDLE_WIDTHS = tuple(range(5, 24, 2))
"""Widths of the strip around the start square of an open tour of 3 × n, n odd."""
SMALL_NODE_LIMIT = 200_000
"""Default node budget of one :func:`small_tour` search."""
STRIP_BUDGETS = (2_000, 50_000, SMALL_NODE_LIMIT)
"""Node budgets of the passes over the strips of an open 3 × n tour."""


def small_tour(
    squares: list[Square],
    forced: list[tuple[Square, Square]],
    start: Square | None = None,
    node_limit: int = SMALL_NODE_LIMIT,
) -> list[Square] | None:
    """A Hamiltonian cycle (``start`` None) or path from ``start`` of a small graph: the knight
    moves among ``squares`` plus the ``forced`` edges, every one of which the tour must use.

    A forced edge ``x-y`` stands for a whole region walked from ``x`` to ``y``. The search is
    :func:`knights_tour.solvers.construct.kernel.small_search` (depth-first, backtracking,
    Warnsdorff's rule).

    Parameters
    ----------
    squares : list of (row, col)
        The vertices, forced-edge ends included.
    forced : list of ((row, col), (row, col))
        Edges the tour must use; their ends are disjoint.
    start : (row, col), optional
        Start square of an open tour; None asks for a closed tour (from a forced-edge end, or
        from ``squares[0]``).
    node_limit : int
        Give up (return None) after this many squares placed.

    Returns
    -------
    list of (row, col) or None
        The squares in tour order; None if no tour exists or the budget ran out.
    """
    index = {sq: i for i, sq in enumerate(squares)}
    n = len(squares)
    partner = np.full(n, -1, np.int64)
    for x, y in forced:
        partner[index[x]], partner[index[y]] = index[y], index[x]
    at = np.asarray(squares, dtype=np.int64).reshape(n, 2)
    dr = np.abs(at[:, None, 0] - at[None, :, 0])
    dc = np.abs(at[:, None, 1] - at[None, :, 1])
    linked = ((dr == 1) & (dc == 2)) | ((dr == 2) & (dc == 1))
    ends = np.flatnonzero(partner >= 0)
    linked[ends, partner[ends]] = True
    # each vertex's neighbours in the order of ``squares`` (the search's tie-break order)
    n_adj = linked.sum(axis=1)
    v, u = np.nonzero(linked)
    adj = np.full((n, 9), -1, np.int64)
    adj[v, np.arange(len(v)) - np.repeat(np.cumsum(n_adj) - n_adj, n_adj)] = u
    first = start if start is not None else (forced[0][0] if forced else squares[0])
    path = np.empty(n, np.int64)
    status = CK.small_search(adj, n_adj, partner, index[first], start is None, node_limit, path)
    return [squares[i] for i in path] if status == 1 else None


def _apply(
    nb: np.ndarray,
    cols: int,
    tour: list[Square],
    forced: list[tuple[Square, Square]],
    closed: bool,
    offsets: np.ndarray,
) -> None:
    """Write a small tour into ``nb`` at every column offset in ``offsets`` (vectorised): the
    small tour's squares get its neighbours; a forced-edge end keeps its region neighbour and
    swaps its partner for its other neighbour on the small tour (``-1`` if it ends there)."""
    partner = {x: y for x, y in forced} | {y: x for x, y in forced}
    k = len(tour)
    nbrs: dict[Square, list[Square]] = {sq: [] for sq in tour}
    for i, sq in enumerate(tour):
        if closed or i > 0:
            nbrs[sq].append(tour[i - 1])
        if closed or i < k - 1:
            nbrs[sq].append(tour[(i + 1) % k])

    def glob(sq: Square) -> np.ndarray:
        return sq[0] * cols + sq[1] + offsets

    for sq, around in nbrs.items():
        if sq in partner:
            other = [u for u in around if u != partner[sq]]
            new = glob(other[0]) if other else np.full_like(offsets, -1)
            at = glob(sq)
            slot = np.where(nb[at, 0] == glob(partner[sq]), 0, 1)
            nb[at, slot] = new
        else:
            padded: list[Square | None] = [*around, *[None] * (2 - len(around))]
            for j, u in enumerate(padded):
                nb[glob(sq), j] = glob(u) if u is not None else -1


def _left_edge(x: int) -> tuple[Square, Square]:
    """A forced edge inside the first two columns of a closed 3-row region starting at ``x``."""
    return (0, x), (2, x + 1)


def _right_edge(x: int) -> tuple[Square, Square]:
    """A forced edge inside the last two columns of a closed 3-row region ending before ``x``."""
    return (0, x - 1), (2, x - 2)


@cache
def connector() -> list[Square]:
    """The connector: a Hamiltonian cycle of columns ``0..3`` plus the forced edges
    :func:`_right_edge` ``(0)`` and :func:`_left_edge` ``(4)`` (see the module docstring).

    Raises
    ------
    RuntimeError
        If the search finds none (it does; the tests check the constructed tours).
    """
    strip = [(r, c) for r in range(3) for c in range(CONNECTOR_WIDTH)]
    forced = [_right_edge(0), _left_edge(CONNECTOR_WIDTH)]
    cycle = small_tour(strip + [sq for e in forced for sq in e], forced)
    if cycle is None:  # pragma: no cover - a fixed fact, checked by the tests
        raise RuntimeError("no 3-row connector found")
    return cycle


def thin_widths(n: int) -> list[int] | None:
    """Widths of the closed blocks of a 3 × n closed tour (connectors between them), or None
    if ``n`` is odd or below 10."""
    if n % 2 or n < 10:
        return None
    step = THIN_BLOCKS[0] + CONNECTOR_WIDTH
    k = max(0, (n - THIN_BLOCKS[0]) // step)
    while n - k * step > THIN_BLOCKS[-1]:
        k += 1
    rest = n - k * step
    return [THIN_BLOCKS[0]] * k + [rest]


def lay_closed(nb: np.ndarray, cols: int, x0: int, width: int) -> bool:
    """Write a closed tour of the 3-row region of columns ``x0 .. x0 + width - 1`` into ``nb``
    (board width ``cols``). Returns False if ``width`` has no closed tour (odd or < 10)."""
    widths = thin_widths(width)
    if widths is None:
        return False
    shapes = sorted(set(widths))
    tables = []
    for k in shapes:
        tables.append(neighbour_table(block_tour(3, k), k, closed=True).ravel())
    tables.append(np.full(2 * 3 * CONNECTOR_WIDTH, -1, np.int32))  # connectors, filled below
    parts: list[int] = []
    types: list[int] = []
    for i, k in enumerate(widths):
        if i:
            parts.append(CONNECTOR_WIDTH)
            types.append(len(shapes))
        parts.append(k)
        types.append(shapes.index(k))
    sizes = np.array([len(t) for t in tables], np.int64)
    type_off = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    type_cols = np.array(shapes + [CONNECTOR_WIDTH], np.int64)
    col_len = np.array(parts, np.int64)
    col_start = x0 + np.concatenate(([0], np.cumsum(col_len)[:-1])).astype(np.int64)
    CK.place_blocks(
        cols,
        np.zeros(1, np.int64),
        np.full(1, 3, np.int64),
        col_start,
        col_len,
        np.array([types], np.int64),
        type_off,
        type_cols,
        np.concatenate(tables).astype(np.int32),
        nb,
    )
    offsets = col_start[1::2]  # first columns of the connectors
    if len(offsets):
        forced = [_right_edge(0), _left_edge(CONNECTOR_WIDTH)]
        _apply(nb, cols, connector(), forced, True, offsets.astype(np.int64))
    return True


def closed_tour_3xn(n: int, start: Square) -> np.ndarray | None:
    """A closed knight's tour of the 3 × n board (3 rows) from ``start``, or None if ``n`` is
    odd or below 10 (no closed tour: Schwenk 1991). Shape ``(3n, 2)``, int32."""
    nb = np.empty((3 * n, 2), np.int32)
    if not lay_closed(nb, n, 0, n):
        return None
    tour = np.empty((3 * n, 2), np.int32)
    if CK.walk(nb, start[0] * n + start[1], n, tour) != 3 * n:
        return None  # pragma: no cover - would be a construction bug; the verifier judges
    return tour


def _middle_options(n: int, x: int) -> list[tuple[int, int]]:
    """``(left, width)`` of the strip around column ``x``: the regions left and right of it
    have closed tours (width 0 or even >= 10); the start nearest the strip's middle first."""
    out = []
    for width in MIDDLE_WIDTHS:
        for left in range(max(0, x - width + 1), min(x, n - width) + 1):
            right = n - left - width
            if all(w == 0 or (w % 2 == 0 and w >= 10) for w in (left, right)):
                out.append((abs(2 * (x - left) - (width - 1)), width, left))
    out.sort()
    return [(left, width) for _, width, left in out]


def open_tour_3xn(n: int, start: Square) -> np.ndarray | None:
    """An open knight's tour of the 3 × n board from ``start``: closed regions left and right
    of a strip around ``start``, joined by a path search over the strip (module docstring).
    Every strip of :func:`_middle_options` is tried with a small node budget first, then with
    larger ones (:data:`STRIP_BUDGETS`), so a strip without such a path costs little.

    Returns
    -------
    numpy.ndarray or None
        ``(3n, 2)`` int32 tour from ``start``; None if no strip has such a path within the
        budgets (e.g. no open tour starts there at all).
    """
    options = _middle_options(n, start[1])
    for budget in STRIP_BUDGETS:
        for left, width in options:
            right = left + width
            strip = [(r, c) for r in range(3) for c in range(left, right)]
            forced = []
            if left:
                forced.append(_right_edge(left))
            if right < n:
                forced.append(_left_edge(right))
            squares = strip + [sq for e in forced for sq in e]
            path = small_tour(squares, forced, start=start, node_limit=budget)
            if path is None:
                continue
            nb = np.empty((3 * n, 2), np.int32)
            if left:
                lay_closed(nb, n, 0, left)
            if right < n:
                lay_closed(nb, n, right, n - right)
            _apply(nb, n, path, forced, False, np.zeros(1, np.int64))
            tour = np.empty((3 * n, 2), np.int32)
            if CK.walk(nb, start[0] * n + start[1], n, tour) == 3 * n:
                return tour
    return None


def thin_tour(board: Board, start: Square, closed: bool) -> np.ndarray | None:
    """:func:`closed_tour_3xn` or :func:`open_tour_3xn` on a board with 3 rows or 3 columns
    (a 3-column board is solved transposed). None for other boards."""
    if board.rows == 3:
        n, s = board.cols, start
    elif board.cols == 3:
        n, s = board.rows, (start[1], start[0])
    else:
        return None
    tour = closed_tour_3xn(n, s) if closed else open_tour_3xn(n, s)
    if tour is not None and board.rows != 3:
        tour = np.ascontiguousarray(tour[:, ::-1])
    return tour

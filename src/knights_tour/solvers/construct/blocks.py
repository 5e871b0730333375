"""Closed knight's tours of small blocks: the bricks of the constructive tours.

:data:`BLOCK_TOURS` holds one closed knight's tour of each block shape the constructions use:
even × even blocks with sides 6, 8, 10; odd × even blocks with an odd side 5, 7, 9 or 11 and an
even side 6, 8 or 10 (:mod:`knights_tour.solvers.construct.tiling`); and 3 × k blocks,
k = 10, 12, ..., 22 (:mod:`knights_tour.solvers.construct.thin`; 3 × 10 is the smallest 3 × k
board with a closed tour, Schwenk 1991). A block's transpose is read from the same tour with
rows and columns swapped.

Each tour starts on the block's top-left square ``(0, 0)`` and is stored as its moves, one digit
per move: digit ``k`` is the knight move :data:`knights_tour.board.KNIGHT_OFFSETS` ``[k]`` as
``(d_row, d_col)``; the closing move back to ``(0, 0)`` is implied. The tours were found by this
package's own engine (:mod:`knights_tour.solvers.warnsdorff`, closed-tour attempts with varied
tie-breaks), keeping for each shape, among a few hundred distinct tours, one with the most tour
edges inside the two lines along each side (the edges the merging exchanges need);
:func:`knights_tour.solvers.block_search.find_block_tour` repeats that choice. They are fixed
data so that constructed tours do not change when the engine's heuristics do; the tests check
each with the verifier.

This module imports neither Celery nor Redis.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from knights_tour.board import KNIGHT_OFFSETS

BLOCK_TOURS: dict[tuple[int, int], str] = {
    (6, 6): "34217541207652024365703317056431175",
    (6, 8): "34210522706450346703531217056527534121075330765",
    (6, 10): "21464312127064721435656703274227166322075360234656507124460",
    (8, 8): "212343656724707136121434565072321667241630713474610243465607025",
    (8, 10): "3432121707564753430521210705656433507014305331207065336103436506472105257161457",
    (10, 10): (
        "30534341212061436565707012124714343570760564253421636700112364276543125700345703"
        "6410367432310707565"
    ),
    (5, 6): "24712357743127053065420034650",
    (5, 8): "221356174721346560121436567247021245650",
    (5, 10): "3412764216032014365657021313565671214310652307565",
    (7, 6): "33317065430531270742456071253365070214367",
    (7, 8): "2123456507021250343656701214346560712531631356054711366",
    (7, 10): "212354700543067434101023456560712202435741270746654321130705452764470",
    (9, 6): "33300542365707021435246507171243456071612354135670105",
    (9, 8): "34341210530527070565434217713446117661213475474201460310656434312170765",
    (9, 10): (
        "25021214343614603076344657121107564416432206064141467202560653432121707631656543420365070"
    ),
    (11, 6): "32146524421672063250346507070214352436571421707065416123554160105",
    (11, 8): (
        "212553420245067012544701430674364321270707565343421207070565417434341631217070653345770"
    ),
    (11, 10): (
        "25021453642321270645256501216361107656522135020756325644702347113567032711656543"
        "43212170771434347145656147070"
    ),
    (3, 10): "31272136147256561303165652741",
    (3, 12): "30521130250250361465056520250256641",
    (3, 14): "30521125030316472205274165566520250256641",
    (3, 16): "31147521121412052741656527474722121647556652741",
    (3, 18): "30521212163121630527563025756527474722127565561305641",
    (3, 20): "31141205272216475212752112503614663025756557474612146652741",
    (3, 22): "31141205272216475212752021257527412163052755756557474612146652741",
}
"""Block shape ``(rows, cols)`` -> closed tour from ``(0, 0)`` as move digits (module docstring)."""


def block_shapes() -> list[tuple[int, int]]:
    """Every block shape with a stored tour, transposes included."""
    shapes = set(BLOCK_TOURS) | {(c, r) for r, c in BLOCK_TOURS}
    return sorted(shapes)


@cache
def block_tour(rows: int, cols: int) -> np.ndarray:
    """The stored closed tour of a ``rows × cols`` block.

    Parameters
    ----------
    rows, cols : int
        A shape of :func:`block_shapes`.

    Returns
    -------
    numpy.ndarray
        ``int32`` array of shape ``(rows * cols, 2)``: the squares ``(row, col)`` in tour order,
        from ``(0, 0)``, row 0 at the top; the last square is a knight move from the first.
        Read-only (it is cached).

    Raises
    ------
    KeyError
        If no tour of this shape (or its transpose) is stored.
    """
    if (rows, cols) in BLOCK_TOURS:
        moves, transpose = BLOCK_TOURS[(rows, cols)], False
    else:
        moves, transpose = BLOCK_TOURS[(cols, rows)], True
    steps = np.array([KNIGHT_OFFSETS[int(k)] for k in moves], np.int32).reshape(-1, 2)
    tour = np.zeros((len(moves) + 1, 2), np.int32)
    np.cumsum(steps, axis=0, out=tour[1:])
    if transpose:
        tour = np.ascontiguousarray(tour[:, ::-1])
    tour.setflags(write=False)
    return tour


def tour_edges_near_sides(tour: np.ndarray, rows: int, cols: int) -> tuple[int, int, int, int]:
    """How many edges of a closed tour have both ends within two lines of each side of the
    block: ``(left, right, top, bottom)``. Only such edges can take part in an exchange with
    the block across that side (a knight move crosses at most two lines)."""
    nxt = np.roll(tour, -1, axis=0)
    both = np.stack([tour, nxt])
    return (
        int(np.all(both[..., 1] < 2, axis=0).sum()),
        int(np.all(both[..., 1] >= cols - 2, axis=0).sum()),
        int(np.all(both[..., 0] < 2, axis=0).sum()),
        int(np.all(both[..., 0] >= rows - 2, axis=0).sum()),
    )


__all__ = ["BLOCK_TOURS", "block_shapes", "block_tour", "tour_edges_near_sides"]

"""Where the stored block tours of :mod:`knights_tour.solvers.construct.blocks` come from.

:func:`find_block_tour` searches a small block with our own engine (Warnsdorff's rule with the
engine's tie-breaks and restarts) and keeps the closed tour with the most edges along the block's
sides, the edges the constructions exchange. It runs only to regenerate that data, never while
solving; it lives beside the engine rather than in ``construct`` so that ``construct`` does not
import the search that calls it.
"""

from __future__ import annotations

import itertools

import numpy as np

from knights_tour.board import KNIGHT_OFFSETS, Board
from knights_tour.solvers.construct.blocks import tour_edges_near_sides
from knights_tour.solvers.engine import kernel as K
from knights_tour.solvers.warnsdorff_attempts import KernelSearch


def find_block_tour(rows: int, cols: int, tours: int = 400) -> str:
    """Search a block tour the way the stored ones were chosen (see the module docstring):
    closed-tour attempts of the engine with every tie-break and move order from a spread of
    squares, up to ``tours`` distinct tours, keeping the one whose sides have the most edges
    (:func:`tour_edges_near_sides`; only the left and right sides for 3-row blocks).

    Returns
    -------
    str
        The tour from ``(0, 0)`` as move digits, the format of
        :data:`knights_tour.solvers.construct.blocks.BLOCK_TOURS`.

    Raises
    ------
    ValueError
        If no closed tour was found.
    """
    board = Board(rows, cols)
    engine = KernelSearch(board)
    squares = list(board.squares())[:: max(1, board.n_squares // 12)]
    found: dict[bytes, np.ndarray] = {}
    attempts = itertools.product(
        (K.TIE_RANDOM, K.TIE_ROTH, K.TIE_POHL, K.TIE_FIXED), range(16), squares
    )
    for seed, (tie, order, sq) in enumerate(attempts, start=1):
        engine.start(sq, True, tie, order, seed)
        if engine.run(50 * board.n_squares, True, tie, order) != K.FOUND:
            continue
        t = engine.tour_array()
        at = int(np.flatnonzero((t[:, 0] == 0) & (t[:, 1] == 0))[0])
        t = np.roll(t, -at, axis=0)
        found.setdefault(t.tobytes(), t)
        if len(found) >= tours:
            break
    if not found:
        raise ValueError(f"no closed tour of the {rows}x{cols} block found")

    def score(t: np.ndarray) -> tuple[int, int]:
        sides = tour_edges_near_sides(t, rows, cols)
        useful = sides[:2] if rows == 3 else sides
        return min(useful), sum(useful)

    best = max(found.values(), key=score)
    index = {d: k for k, d in enumerate(KNIGHT_OFFSETS)}
    return "".join(
        str(index[(int(b[0] - a[0]), int(b[1] - a[1]))]) for a, b in zip(best[:-1], best[1:])
    )


__all__ = ["find_block_tour"]

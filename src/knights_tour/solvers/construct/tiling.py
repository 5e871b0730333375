"""Tilings of a board by blocks with known tours, merged into one tour (see the package
docstring of :mod:`knights_tour.solvers.construct` for the method and its sources).

A *tiling* splits the rows into consecutive parts and the columns into consecutive parts; block
``(i, j)`` is row part ``i`` × column part ``j``. Part lengths come from fixed sets so that every
block has a stored closed tour (:mod:`knights_tour.solvers.construct.blocks`), except, for open
tours, the one block holding the start square, which gets an open tour from the start.

This module imports neither Celery nor Redis.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import cache

import numpy as np

from knights_tour.board import Board, Square
from knights_tour.solvers.construct import kernel as CK
from knights_tour.solvers.construct.blocks import block_tour

EVEN_PARTS = (6, 8, 10)
"""Even part lengths of ordinary tilings (every even length >= 6 is a sum of them)."""
ODD_PARTS = (5, 7, 9, 11)
"""Odd part lengths of ordinary tilings (at most one odd part per side)."""
THIN_CLOSED_PARTS = (10, 12, 14, 16, 18)
"""Part lengths along a 3-row board (every even length >= 10 is a sum of them)."""
THIN_OPEN_PARTS = tuple(range(7, 22, 2))
"""Lengths of the open-tour block of a 3-row board with an odd number of columns."""

BlockPath = Callable[[Board, Square], "np.ndarray | None"]
"""``block_path(block, start)``: an open tour of ``block`` from ``start`` as an ``(N, 2)`` array,
or None if none was found."""


@cache
def _small_split(length: int, sizes: tuple[int, ...]) -> tuple[int, ...] | None:
    """``length`` as a sum of ``sizes`` with the fewest parts, or None (dynamic programming)."""
    best: list[tuple[int, ...] | None] = [()] + [None] * length
    for total in range(1, length + 1):
        for s in sizes:
            prev = best[total - s] if s <= total else None
            current = best[total]
            if prev is not None and (current is None or len(prev) + 1 < len(current)):
                best[total] = prev + (s,)
    return best[length]


def split(length: int, sizes: tuple[int, ...]) -> list[int] | None:
    """``length`` as a list of parts from ``sizes`` (``[]`` for 0), or None if impossible.

    Long lengths are mostly filled with the middle size (8 for :data:`EVEN_PARTS`), the rest by
    :func:`_small_split`, so the cost is linear in the number of parts."""
    if length < 0:
        return None
    main = sizes[len(sizes) // 2]
    fill = max(0, (length - 4 * max(sizes)) // main)
    rest = _small_split(length - fill * main, sizes)
    return None if rest is None else [main] * fill + list(rest)


def closed_parts(length: int, thin: bool = False) -> list[int] | None:
    """Part lengths for one side of a closed-tour tiling: all even, or one odd part last.

    Parameters
    ----------
    length : int
        The side length.
    thin : bool
        The other side is 3 (parts from :data:`THIN_CLOSED_PARTS`).

    Returns
    -------
    list of int or None
        None if the side cannot be tiled (e.g. shorter than the smallest part).
    """
    if thin:
        return split(length, THIN_CLOSED_PARTS)
    if length % 2 == 0:
        return split(length, EVEN_PARTS)
    for odd in ODD_PARTS:
        rest = split(length - odd, EVEN_PARTS)
        if rest is not None:
            return rest + [odd]
    return None


def odd_part_options(
    length: int, x: int, odd_sizes: tuple[int, ...], even_sizes: tuple[int, ...]
) -> Iterator[tuple[list[int], int]]:
    """Tilings of one side with exactly one odd part, which covers position ``x``.

    Yields ``(parts, k)`` with ``parts[k]`` the odd part, the options with ``x`` nearest the
    middle of the odd part first."""
    options = []
    for odd in odd_sizes:
        for before in range(max(0, x - odd + 1), min(x, length - odd) + 1):
            if before % 2:
                continue
            head = split(before, even_sizes)
            tail = split(length - before - odd, even_sizes)
            if head is not None and tail is not None:
                options.append((abs(2 * (x - before) - (odd - 1)), odd, head, tail))
    options.sort(key=lambda o: (o[0], o[1]))
    for _, odd, head, tail in options:
        yield head + [odd] + tail, len(head)


def neighbour_table(tour: np.ndarray, cols: int, closed: bool) -> np.ndarray:
    """Tour neighbours of each square of a block, by local index ``r * cols + c``: ``(n, 2)``
    int32, ``-1`` for the missing neighbour of a path end."""
    idx = tour[:, 0].astype(np.int32) * cols + tour[:, 1]
    n = len(idx)
    table = np.empty((n, 2), np.int32)
    table[idx[1:], 0] = idx[:-1]  # np.roll by slices: the same table, no copies per call
    table[idx[0], 0] = idx[-1]
    table[idx[:-1], 1] = idx[1:]
    table[idx[-1], 1] = idx[0]
    if not closed:
        table[idx[0], 0] = -1
        table[idx[-1], 1] = -1
    return table


def assemble(
    board: Board,
    row_parts: list[int],
    col_parts: list[int],
    start: Square,
    path_block: tuple[int, int, np.ndarray] | None = None,
) -> np.ndarray | None:
    """Lay the block tours of a tiling, merge them into one tour and walk it from ``start``.

    Parameters
    ----------
    board : Board
    row_parts, col_parts : list of int
        The tiling; every block except ``path_block`` must have a stored closed tour.
    start : (row, col)
        The square the returned tour begins on (for an open tour: the start of the path).
    path_block : (i, j, path), optional
        Block ``(i, j)`` gets the open path ``path`` (local ``(row, col)`` array) instead of a
        closed tour; the result is then an open tour with the path's two ends.

    Returns
    -------
    numpy.ndarray or None
        ``int32`` ``(rows*cols, 2)`` tour from ``start``, or None if the merging left more than
        one component (the caller then tries another tiling or gives up).
    """
    shapes: dict[tuple[int, int], int] = {}
    tables: list[np.ndarray] = []
    type_cols: list[int] = []
    btype = np.empty((len(row_parts), len(col_parts)), np.int64)
    for i, h in enumerate(row_parts):
        for j, w in enumerate(col_parts):
            if path_block is not None and (i, j) == path_block[:2]:
                btype[i, j] = len(tables)
                tables.append(neighbour_table(path_block[2], w, closed=False))
                type_cols.append(w)
                continue
            if (h, w) not in shapes:
                shapes[(h, w)] = len(tables)
                tables.append(neighbour_table(block_tour(h, w), w, closed=True))
                type_cols.append(w)
            btype[i, j] = shapes[(h, w)]
    sizes = np.array([t.size for t in tables], np.int64)
    type_off = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    loc_nb = np.concatenate([t.ravel() for t in tables]).astype(np.int32)
    row_len = np.array(row_parts, np.int64)
    col_len = np.array(col_parts, np.int64)
    row_start = np.concatenate(([0], np.cumsum(row_len)[:-1])).astype(np.int64)
    col_start = np.concatenate(([0], np.cumsum(col_len)[:-1])).astype(np.int64)
    rows, cols = board.rows, board.cols
    nb = np.empty((rows * cols, 2), np.int32)
    CK.place_blocks(
        cols,
        row_start,
        row_len,
        col_start,
        col_len,
        btype,
        type_off,
        np.array(type_cols, np.int64),
        loc_nb,
        nb,
    )
    rblk = np.repeat(np.arange(len(row_parts), dtype=np.int64), row_len)
    cblk = np.repeat(np.arange(len(col_parts), dtype=np.int64), col_len)
    if CK.merge_blocks(rows, cols, row_start, col_start, rblk, cblk, nb) != 1:
        return None
    tour = np.empty((rows * cols, 2), np.int32)
    if CK.walk(nb, start[0] * cols + start[1], cols, tour) != rows * cols:
        return None
    return tour


def closed_tour(board: Board, start: Square = (0, 0)) -> np.ndarray | None:
    """A closed knight's tour of ``board`` by tiling and merging, beginning on ``start``.

    Parameters
    ----------
    board : Board
        Any board with a closed tour by Schwenk's theorem whose sides can be tiled: both sides
        >= 5, or one side 3 and the other even >= 10 (that is, every such board).
    start : (row, col)
        Row 0 at the top.

    Returns
    -------
    numpy.ndarray or None
        ``int32`` array of shape ``(rows*cols, 2)``: the tour from ``start``, its last square a
        knight move from ``start``. None if the board cannot be tiled or a merge failed (not
        seen on any board tried; see the tests).
    """
    rows, cols = board.rows, board.cols
    if rows == 3 or cols == 3:
        if rows * cols % 2:
            return None
        row_parts = [3] if rows == 3 else closed_parts(rows, thin=True)
        col_parts = [3] if cols == 3 else closed_parts(cols, thin=True)
    else:
        if rows % 2 and cols % 2:
            return None
        row_parts, col_parts = closed_parts(rows), closed_parts(cols)
    if row_parts is None or col_parts is None:
        return None
    return assemble(board, row_parts, col_parts, start)


def _side_options(length: int, x: int, thin: bool) -> list[tuple[list[int], int]]:
    if thin:
        return list(odd_part_options(length, x, THIN_OPEN_PARTS, THIN_CLOSED_PARTS))
    return list(odd_part_options(length, x, ODD_PARTS, EVEN_PARTS))


def open_tour(
    board: Board, start: Square, block_path: BlockPath, max_tilings: int = 12
) -> np.ndarray | None:
    """An open knight's tour from ``start`` on a board with an odd number of squares, by
    tiling: the block holding ``start`` (odd × odd) gets an open tour from ``start`` found by
    ``block_path``, every other block a stored closed tour, then all are merged into the path.

    Parameters
    ----------
    board : Board
        Both sides odd, each >= 5 or one of them 3.
    start : (row, col)
        On the majority colour (``(row + col)`` even); the tilings keep colours (every part
        before the start's block has even length), so the start is on the majority colour of
        its block too.
    block_path : callable
        ``block_path(block, local_start) -> (n, 2) array or None``: an open tour of the small
        block (at most 11 × 11, or 3 × 21) from the start's position in it.
    max_tilings : int
        How many tilings to try, the start nearest the middle of its block first (a start
        square of a small block may have no open tour; another tiling moves it within its
        block).

    Returns
    -------
    numpy.ndarray or None
        ``int32`` ``(rows*cols, 2)`` open tour from ``start``; None if the board has an even
        side or a side below 5 other than 3, or no tiling tried worked (``block_path`` found
        no path, or a merge failed).
    """
    rows, cols = board.rows, board.cols
    if rows % 2 == 0 or cols % 2 == 0:
        return None
    if min(rows, cols) >= 5:
        row_opts = _side_options(rows, start[0], False)
        col_opts = _side_options(cols, start[1], False)
    elif rows == 3 and cols >= 5:
        row_opts, col_opts = [([3], 0)], _side_options(cols, start[1], True)
    elif cols == 3 and rows >= 5:
        row_opts, col_opts = _side_options(rows, start[0], True), [([3], 0)]
    else:
        return None
    pairs = sorted(
        ((a, b) for a in range(len(row_opts)) for b in range(len(col_opts))),
        key=lambda ab: (ab[0] + ab[1], ab),
    )
    for a, b in pairs[:max_tilings]:
        (row_parts, i), (col_parts, j) = row_opts[a], col_opts[b]
        r0, c0 = sum(row_parts[:i]), sum(col_parts[:j])
        block = Board(row_parts[i], col_parts[j])
        path = block_path(block, (start[0] - r0, start[1] - c0))
        if path is None:
            continue
        tour = assemble(board, row_parts, col_parts, start, (i, j, np.asarray(path)))
        if tour is not None:
            return tour
    return None

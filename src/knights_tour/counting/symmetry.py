"""Symmetries of a board, as maps of squares (the pure geometry behind symmetric tour counts).

Every symmetry of the board maps the knight's tours from a square one-to-one onto the tours
from its image, so a count per square is needed only once per symmetry class
(:mod:`knights_tour.counting.plan`).
"""

from __future__ import annotations

from collections.abc import Callable

from knights_tour.board import Board, Square


def symmetries(board: Board) -> list[Callable[[Square], Square]]:
    """The symmetries of the board as maps of squares: the dihedral group of the square (8
    maps) for ``n × n``, the Klein four-group (identity, two flips, half turn) otherwise.
    Identity first."""
    R, C = board.rows - 1, board.cols - 1
    maps: list[Callable[[Square], Square]] = [
        lambda s: (s[0], s[1]),
        lambda s: (R - s[0], s[1]),
        lambda s: (s[0], C - s[1]),
        lambda s: (R - s[0], C - s[1]),
    ]
    if board.is_square:
        maps += [
            lambda s: (s[1], s[0]),
            lambda s: (C - s[1], s[0]),
            lambda s: (s[1], R - s[0]),
            lambda s: (C - s[1], R - s[0]),
        ]
    return maps


def representative(board: Board, square: Square) -> Square:
    """The smallest ``(row, col)`` among the images of ``square`` under the board's symmetries."""
    return min(g(square) for g in symmetries(board))


def symmetry_classes(board: Board) -> dict[Square, list[Square]]:
    """Squares grouped by symmetry class: representative -> members (sorted, row-major)."""
    classes: dict[Square, list[Square]] = {}
    for sq in board.squares():
        classes.setdefault(representative(board, sq), []).append(sq)
    return classes


__all__ = ["symmetries", "representative", "symmetry_classes"]

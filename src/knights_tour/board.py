"""Board geometry: sizes, squares, algebraic names, knight moves and square colours.

Conventions used throughout the package:

* A board is ``rows × cols``; square boards (``n × n``) are the common case.
* A square is ``(row, col)``, zero-based, **row 0 at the top** as boards are printed.
* Algebraic names put file letters on columns from the left (``a`` = col 0; after ``z`` come
  ``aa``, ``ab``, … as on spreadsheets) and rank 1 on the **bottom** row. On 8×8, ``(0, 0)`` is
  ``a8`` and ``(7, 0)`` is ``a1``.
* The colour of a square is ``(row + col) % 2``. A knight move always changes colour, so a
  knight's tour alternates colours (the basis of every parity argument here).

This module imports neither Celery nor Redis.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property

from knights_tour.errors import InvalidBoardError, InvalidSquareError

Square = tuple[int, int]
"""A square as ``(row, col)``, zero-based, row 0 at the top."""

KNIGHT_OFFSETS: tuple[tuple[int, int], ...] = (
    (-2, 1),
    (-1, 2),
    (1, 2),
    (2, 1),
    (2, -1),
    (1, -2),
    (-1, -2),
    (-2, -1),
)
"""The eight knight moves as ``(d_row, d_col)``, clockwise from "two up, one right"."""


def is_knight_move(a: Sequence[int], b: Sequence[int]) -> bool:
    """True if a knight moves from square ``a`` to square ``b`` (``(row, col)`` pairs) in one
    move; the board's edges are not checked.

    >>> is_knight_move((0, 0), (2, 1)), is_knight_move((0, 0), (1, 1))
    (True, False)
    """
    dr, dc = abs(a[0] - b[0]), abs(a[1] - b[1])
    return (dr, dc) in ((1, 2), (2, 1))


MAX_SIDE = 100_000
"""Largest side length accepted anywhere (solvers may set tighter limits of their own)."""

_SIZE_RE = re.compile(r"^\s*(\d+)\s*(?:[x×X*]\s*(\d+))?\s*$")
_ALGEBRAIC_RE = re.compile(r"^\s*([a-zA-Z]+)\s*(\d+)\s*$")
_PAIR_RE = re.compile(r"^\s*[(\[]?\s*(-?\d+)\s*[, ]\s*(-?\d+)\s*[)\]]?\s*$")


@dataclass(frozen=True, order=True)
class Board:
    """A ``rows × cols`` board.

    Parameters
    ----------
    rows, cols : int
        Number of rows and columns, each in ``1..MAX_SIDE``.

    Raises
    ------
    InvalidBoardError
        If either side is not an integer in range.

    Examples
    --------
    >>> b = Board(8, 8)
    >>> b.algebraic((7, 0)), b.parse_square("a8")
    ('a1', (0, 0))
    >>> sorted(b.knight_moves((0, 0)))
    [(1, 2), (2, 1)]
    """

    rows: int
    cols: int

    def __post_init__(self) -> None:
        for name, value in (("rows", self.rows), ("cols", self.cols)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidBoardError(f"board {name} must be an integer, got {value!r}")
            if not 1 <= value <= MAX_SIDE:
                raise InvalidBoardError(
                    f"board {name} must be between 1 and {MAX_SIDE}, got {value}"
                )

    # -- size -----------------------------------------------------------------------------
    @property
    def n_squares(self) -> int:
        """Number of squares, ``rows * cols``."""
        return self.rows * self.cols

    @property
    def is_square(self) -> bool:
        """True for ``n × n`` boards."""
        return self.rows == self.cols

    @property
    def label(self) -> str:
        """``"8x8"`` style name, rows first."""
        return f"{self.rows}x{self.cols}"

    def __str__(self) -> str:
        return self.label

    # -- squares --------------------------------------------------------------------------
    def contains(self, square: Square) -> bool:
        """True if ``square`` is ``(row, col)`` on this board."""
        r, c = square
        return 0 <= r < self.rows and 0 <= c < self.cols

    def squares(self) -> Iterator[Square]:
        """All squares in row-major order (top row first)."""
        for r in range(self.rows):
            for c in range(self.cols):
                yield (r, c)

    def index(self, square: Square) -> int:
        """Row-major index ``row * cols + col`` of a square."""
        return square[0] * self.cols + square[1]

    def square(self, index: int) -> Square:
        """The square at row-major ``index`` (inverse of :meth:`index`)."""
        return divmod(index, self.cols)

    @staticmethod
    def colour(square: Square) -> int:
        """Colour class ``(row + col) % 2``; every knight move changes it."""
        return (square[0] + square[1]) % 2

    def colour_counts(self) -> tuple[int, int]:
        """Number of squares of colour 0 and colour 1. Colour 0 (the corners' colour when a side
        is odd) is the majority colour on a board with an odd number of squares."""
        n = self.n_squares
        return (n + 1) // 2, n // 2

    def knight_moves(self, square: Square) -> list[Square]:
        """Squares a knight on ``square`` attacks, in :data:`KNIGHT_OFFSETS` order."""
        r, c = square
        return [
            (r + dr, c + dc)
            for dr, dc in KNIGHT_OFFSETS
            if 0 <= r + dr < self.rows and 0 <= c + dc < self.cols
        ]

    @cached_property
    def neighbours(self) -> tuple[tuple[int, ...], ...]:
        """Knight-move adjacency by row-major index: ``neighbours[i]`` lists the indices a knight
        on square ``i`` attacks. Built once per board; O(rows*cols) memory."""
        return tuple(
            tuple(self.index(t) for t in self.knight_moves(self.square(i)))
            for i in range(self.n_squares)
        )

    # -- algebraic notation ---------------------------------------------------------------
    @staticmethod
    def file_name(col: int) -> str:
        """File letters for a zero-based column: 0 → ``a``, 25 → ``z``, 26 → ``aa``."""
        letters = ""
        n = col + 1
        while n:
            n, rem = divmod(n - 1, 26)
            letters = chr(ord("a") + rem) + letters
        return letters

    @staticmethod
    def file_index(letters: str) -> int:
        """Zero-based column of file letters (inverse of :meth:`file_name`)."""
        n = 0
        for ch in letters.lower():
            n = n * 26 + (ord(ch) - ord("a") + 1)
        return n - 1

    def algebraic(self, square: Square) -> str:
        """Algebraic name of ``square``: file letter from the left, rank 1 at the bottom.

        Raises
        ------
        InvalidSquareError
            If the square is off the board.
        """
        self.check_square(square)
        r, c = square
        return f"{self.file_name(c)}{self.rows - r}"

    def check_square(self, square: object) -> Square:
        """Return ``square`` as a ``(row, col)`` tuple of ints if it is on the board.

        Raises
        ------
        InvalidSquareError
            If it is not a pair of integers or is off the board.
        """
        if (
            not isinstance(square, Sequence)
            or isinstance(square, str)
            or len(square) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in square)
        ):
            raise InvalidSquareError(
                f"a square must be a (row, col) pair of integers, got {square!r}"
            )
        sq = (int(square[0]), int(square[1]))
        if not self.contains(sq):
            raise InvalidSquareError(
                f"square {sq} is off the {self.label} board "
                f"(rows 0..{self.rows - 1}, cols 0..{self.cols - 1})"
            )
        return sq

    def parse_square(self, value: str | Sequence[int]) -> Square:
        """Parse a square given as ``(row, col)``, ``"row,col"`` or an algebraic name (``"a1"``).

        Raises
        ------
        InvalidSquareError
            If the text is malformed or the square is off the board.
        """
        if not isinstance(value, str):
            return self.check_square(value)
        m = _ALGEBRAIC_RE.match(value)
        if m:
            col = self.file_index(m.group(1))
            rank = int(m.group(2))
            if not (0 <= col < self.cols and 1 <= rank <= self.rows):
                raise InvalidSquareError(
                    f"square {value.strip()!r} is off the {self.label} board (files "
                    f"a..{self.file_name(self.cols - 1)}, ranks 1..{self.rows})"
                )
            return (self.rows - rank, col)
        m = _PAIR_RE.match(value)
        if m:
            return self.check_square((int(m.group(1)), int(m.group(2))))
        raise InvalidSquareError(
            f"cannot read square {value!r}: use algebraic notation (e.g. a1) or row,col (e.g. 0,0)"
        )


def parse_board(size: int | str | Sequence[int] | Board) -> Board:
    """Read a board size given as ``n``, ``"n"``, ``"RxC"`` (rows × cols) or ``(rows, cols)``.

    Parameters
    ----------
    size : int, str, (rows, cols) or Board
        A :class:`Board` is returned as it is (it was validated when it was made).

    Returns
    -------
    Board

    Raises
    ------
    InvalidBoardError
        If the size is malformed or out of range.

    See Also
    --------
    parse_board_list : several boards in one string (``"5-12"``, ``"8,6x8"``).

    Examples
    --------
    >>> parse_board("6x8"), parse_board(5), parse_board((3, 4))
    (Board(rows=6, cols=8), Board(rows=5, cols=5), Board(rows=3, cols=4))
    """
    if isinstance(size, Board):
        return size
    if isinstance(size, bool):
        raise InvalidBoardError(f"board size must be n, 'RxC' or (rows, cols), got {size!r}")
    if isinstance(size, int):
        return Board(size, size)
    if isinstance(size, str):
        m = _SIZE_RE.match(size)
        if not m:
            raise InvalidBoardError(
                f"cannot read board size {size!r}: use n (e.g. 8) or RxC (e.g. 6x8)"
            )
        rows = int(m.group(1))
        cols = int(m.group(2)) if m.group(2) is not None else rows
        return Board(rows, cols)
    if isinstance(size, Sequence) and len(size) == 2:
        return Board(size[0], size[1])  # type: ignore[arg-type]
    raise InvalidBoardError(f"board size must be n, 'RxC' or (rows, cols), got {size!r}")


def parse_board_list(spec: str) -> list[Board]:
    """Read a list of boards such as ``"5-12"``, ``"8,10"``, ``"5x6,3x7"`` or ``"5-8,10x12"``.

    A range ``a-b`` means the square boards ``a×a`` … ``b×b``. Duplicates are dropped, order kept.

    Raises
    ------
    InvalidBoardError
        If any part is malformed or out of range, or the range is empty.
    """
    boards: list[Board] = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            raise InvalidBoardError(f"empty board size in {spec!r}")
        m = re.match(r"^(\d+)\s*-\s*(\d+)$", part)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if lo > hi:
                raise InvalidBoardError(f"empty size range {part!r} (start is above end)")
            if hi - lo > 10_000:
                raise InvalidBoardError(f"size range {part!r} is too long")
            boards.extend(Board(n, n) for n in range(lo, hi + 1))
        else:
            try:
                boards.append(parse_board(part))
            except InvalidBoardError as exc:
                if not str(exc).startswith("cannot read board size"):
                    raise
                raise InvalidBoardError(
                    f"cannot read board size {part!r} in {spec!r}: use n (e.g. 8), RxC (e.g. "
                    "6x8), a range of n x n boards a-b (e.g. 5-12), or a comma list of them "
                    "(e.g. 5-8,10,6x8)"
                ) from None
    return list(dict.fromkeys(boards))  # first occurrences, in order

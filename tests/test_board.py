"""Unit tests of board geometry (knights_tour.board) against facts from outside the code.

Facts used: algebraic notation on the 8x8 chessboard (a1 is White's queen-side rook square,
bottom left; a8 top left; h1 bottom right), the number of knight moves from a square (2 from a
corner, 8 in the centre), and the number of edges of the m x n knight's graph,
4mn - 6(m + n) + 8 for m, n >= 2 (the 168 distinct knight moves of the chessboard; count the
2x3 blocks and 3x2 blocks, each holds two moves).
"""

from __future__ import annotations

import pytest

from knights_tour.board import KNIGHT_OFFSETS, Board, parse_board, parse_board_list
from knights_tour.errors import InvalidBoardError, InvalidSquareError, KnightsTourError


@pytest.mark.parametrize(
    "square, name",
    [
        ((0, 0), "a8"),
        ((7, 0), "a1"),
        ((7, 7), "h1"),
        ((0, 7), "h8"),
        ((4, 4), "e4"),
        ((3, 3), "d5"),
    ],
)
def test_algebraic_names_on_8x8(square, name):
    board = Board(8, 8)
    assert board.algebraic(square) == name
    assert board.parse_square(name) == square
    assert board.parse_square(name.upper()) == square


def test_algebraic_names_on_rectangular_and_wide_boards():
    board = Board(3, 30)
    assert board.algebraic((2, 0)) == "a1"
    assert board.algebraic((0, 25)) == "z3"
    assert board.algebraic((0, 26)) == "aa3"
    assert board.algebraic((1, 29)) == "ad2"
    for sq in board.squares():
        assert board.parse_square(board.algebraic(sq)) == sq


@pytest.mark.parametrize("text, square", [("0,0", (0, 0)), ("(2, 3)", (2, 3)), ("7 1", (7, 1))])
def test_row_col_text(text, square):
    assert Board(8, 8).parse_square(text) == square


@pytest.mark.parametrize("text", ["i1", "a9", "a0", "z9", "8,0", "0,8", "-1,0", "", "e", "4", "xx"])
def test_bad_squares_raise(text):
    with pytest.raises(InvalidSquareError) as info:
        Board(8, 8).parse_square(text)
    assert isinstance(info.value, KnightsTourError)


@pytest.mark.parametrize("square", [(8, 0), (0, -1), (1,), (1, 2, 3), ("a", 1), (True, 0), 5])
def test_bad_square_tuples_raise(square):
    with pytest.raises(InvalidSquareError):
        Board(8, 8).check_square(square)


@pytest.mark.parametrize(
    "size, board",
    [
        (8, Board(8, 8)),
        ("5", Board(5, 5)),
        ("6x8", Board(6, 8)),
        ("3 X 4", Board(3, 4)),
        ((3, 7), Board(3, 7)),
        ([4, 5], Board(4, 5)),
    ],
)
def test_parse_board(size, board):
    assert parse_board(size) == board


@pytest.mark.parametrize(
    "size", [0, -3, "0", "8x", "x8", "8x0", "abc", True, 1.5, (1, 2, 3), 100_001]
)
def test_bad_boards_raise(size):
    with pytest.raises(InvalidBoardError):
        parse_board(size)


def test_parse_board_list():
    assert parse_board_list("5-7,6x8,5") == [Board(5, 5), Board(6, 6), Board(7, 7), Board(6, 8)]
    with pytest.raises(InvalidBoardError):
        parse_board_list("7-5")
    with pytest.raises(InvalidBoardError):
        parse_board_list("5,,6")


def test_knight_moves_corner_edge_centre():
    board = Board(8, 8)
    assert sorted(board.knight_moves((0, 0))) == [(1, 2), (2, 1)]  # a8 attacks c7 and b6
    assert len(board.knight_moves((0, 1))) == 3
    assert len(board.knight_moves((4, 4))) == 8
    for sq in board.squares():
        for t in board.knight_moves(sq):
            assert sorted((abs(t[0] - sq[0]), abs(t[1] - sq[1]))) == [1, 2]
            assert Board.colour(t) != Board.colour(sq)  # a knight move changes colour
    assert len(set(KNIGHT_OFFSETS)) == 8


@pytest.mark.parametrize("rows, cols", [(2, 2), (3, 3), (3, 4), (4, 4), (5, 7), (8, 8), (12, 9)])
def test_knight_graph_edge_count(rows, cols):
    board = Board(rows, cols)
    edges = sum(len(nb) for nb in board.neighbours) // 2
    assert edges == 4 * rows * cols - 6 * (rows + cols) + 8
    # adjacency is symmetric
    for i, nb in enumerate(board.neighbours):
        for j in nb:
            assert i in board.neighbours[j]


def test_colour_counts_and_index_round_trip():
    assert Board(5, 5).colour_counts() == (13, 12)
    assert Board(3, 7).colour_counts() == (11, 10)
    assert Board(8, 8).colour_counts() == (32, 32)
    board = Board(5, 5)
    assert sum(1 for sq in board.squares() if Board.colour(sq) == 0) == 13
    board = Board(6, 9)
    assert [board.square(board.index(sq)) for sq in board.squares()] == list(board.squares())

"""Tests of the constructive tours (knights_tour.solvers.construct) against outside facts.

Facts: Schwenk 1991 (which boards have a closed tour: every one of them must get one, none of
the others); colour parity (open tours on odd boards start on the majority colour); the
definition of a tour (every tour goes through the verifier, which trusts nothing else); the
knight's graph itself (a corner of a 3-row board has exactly two moves; no 4-cycle of the
knight's graph crosses a line between two columns of a 3-row board, which is why 3 × n boards
need connectors). Large boards are sampled, not swept.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from _exhaustive import has_tour

from knights_tour.board import Board
from knights_tour.solvers.block_search import find_block_tour
from knights_tour.solvers.construct import closed_tour, constructible, open_tour
from knights_tour.solvers.construct.blocks import BLOCK_TOURS, block_shapes, block_tour
from knights_tour.solvers.construct.thin import _left_edge, _right_edge, connector, small_tour
from knights_tour.solvers.theory import closed_tour_exists
from knights_tour.solvers.warnsdorff import _block_path
from knights_tour.tours.verify import verify_tour


def _is_move(a, b) -> bool:
    return {abs(a[0] - b[0]), abs(a[1] - b[1])} == {1, 2}


def _check_closed(board: Board, start) -> None:
    tour = closed_tour(board, start)
    assert tour is not None, (board, start)
    assert isinstance(tour, np.ndarray) and tour.shape == (board.n_squares, 2)
    verdict = verify_tour(board, tour, start=start, closed=True)
    assert verdict.ok, (board, start, verdict.reason)


@pytest.mark.parametrize("shape", block_shapes())
def test_stored_block_tours_are_closed_tours(shape):
    assert verify_tour(shape, block_tour(*shape), start=(0, 0), closed=True).ok


@pytest.mark.parametrize("m", range(1, 21))
def test_closed_tour_on_exactly_the_boards_of_schwenks_theorem(m):
    """Every m x n board, 1 <= m <= 20, m <= n <= 40: a verified closed tour where Schwenk's
    theorem says one exists, none elsewhere."""
    for n in range(m, 41):
        for board in {Board(m, n), Board(n, m)}:
            start = (board.rows // 2, board.cols // 3)
            if closed_tour_exists(board):
                _check_closed(board, start)
            else:
                assert closed_tour(board, start) is None
                assert not constructible(board, closed=True)


@pytest.mark.parametrize(
    "rows, cols",
    [
        (5, 96),
        (5, 200),
        (5, 1000),
        (5, 2000),
        (7, 200),
        (7, 400),
        (7, 1000),
        (1000, 7),
        (3, 1000),
        (2000, 3),
        (6, 1001),
        (333, 334),
        (1000, 1000),
    ],
)
def test_closed_tours_on_long_and_large_boards(rows, cols):
    """The boards where the search alone missed (5 x n, n = 0 mod 8, and 7 x n) and other long
    or large ones, from random starts."""
    rng = random.Random(rows * 100_003 + cols)
    board = Board(rows, cols)
    for _ in range(3):
        _check_closed(board, (rng.randrange(rows), rng.randrange(cols)))


@pytest.mark.parametrize("m, n", [(m, n) for m in (5, 7, 9, 11) for n in range(m, 20, 2)])
def test_open_tour_from_every_majority_square_of_odd_boards(m, n):
    """Colour parity allows an open tour only from the majority colour of an odd board; the
    construction gives one from every such square (on boards of at most 19 columns)."""
    board = Board(m, n)
    for sq in board.squares():
        if Board.colour(sq) == 1:
            assert open_tour(board, sq, _block_path) is None
            continue
        tour = open_tour(board, sq, _block_path)
        assert tour is not None, sq
        assert verify_tour(board, tour, start=sq).ok, sq


@pytest.mark.parametrize(  # the longest boards: seconds together, out of the fast loop
    "n", [*range(21, 36, 2), *(pytest.param(n, marks=pytest.mark.slow) for n in range(37, 46, 2))]
)
def test_open_tour_from_every_majority_square_of_3xn(n):
    for board in (Board(3, n), Board(n, 3)):
        for sq in board.squares():
            if Board.colour(sq) == 0:
                tour = open_tour(board, sq, _block_path)
                assert tour is not None, (board, sq)
                assert verify_tour(board, tour, start=sq).ok, (board, sq)


@pytest.mark.parametrize(
    "rows, cols, start",
    [
        (5, 2001, (4, 156)),
        (5, 2001, (4, 76)),
        (3, 2001, (0, 1000)),
        (2001, 3, (1000, 2)),
        (7, 1001, (3, 501)),
        (999, 1001, (500, 500)),
        (1001, 5, (0, 0)),
    ],
)
def test_open_tours_on_long_odd_boards(rows, cols, start):
    board = Board(rows, cols)
    tour = open_tour(board, start, _block_path)
    assert tour is not None and verify_tour(board, tour, start=start).ok


def test_open_tour_on_boards_with_a_closed_tour_is_a_rotated_closed_tour():
    board = Board(6, 1000)
    tour = open_tour(board, (2, 400), _block_path)
    assert verify_tour(board, tour, start=(2, 400), closed=True).ok


def test_no_construction_where_it_does_not_apply():
    assert open_tour(Board(4, 1000), (0, 0), _block_path) is None  # no closed 4-row blocks
    assert open_tour(Board(5, 5), (0, 1), _block_path) is None  # minority colour
    assert not constructible(Board(4, 1000), closed=False)
    assert constructible(Board(5, 1001), closed=False)
    assert not constructible(Board(5, 1001), closed=True)


def test_three_row_boards_need_connectors():
    """No 4-cycle a-b-d-c of the knight's graph on three rows has a, b left of a line between
    two columns and c, d right of it, so two closed tours of 3-row blocks side by side cannot
    be joined by exchanging two edges; on five rows such 4-cycles exist."""

    def crossing_4_cycles(rows: int) -> int:
        left = [(r, c) for r in range(rows) for c in (0, 1)]
        right = [(r, c) for r in range(rows) for c in (2, 3)]
        return sum(
            1
            for a, b in itertools.permutations(left, 2)
            for c, d in itertools.permutations(right, 2)
            if _is_move(a, b) and _is_move(c, d) and _is_move(a, c) and _is_move(b, d)
        )

    assert crossing_4_cycles(3) == 0
    assert crossing_4_cycles(5) > 0


@pytest.mark.parametrize("k", [10, 12, 31, 200])
def test_corner_edges_of_3_row_boards_are_forced(k):
    """A corner of a 3 x k board has exactly two knight moves, so every closed tour uses both:
    the edges the connectors open are in every closed tour."""
    board = Board(3, k)
    assert sorted(board.knight_moves((0, k - 1))) == [(1, k - 3), (2, k - 2)]
    assert sorted(board.knight_moves((0, 0))) == [(1, 2), (2, 1)]
    if k % 2 == 0:
        tour = [tuple(sq) for sq in closed_tour(board, (0, 0)).tolist()]
        edges = {frozenset(p) for p in zip(tour, tour[1:] + tour[:1])}
        for a, b in (_right_edge(k), _left_edge(0)):
            assert frozenset((a, b)) in edges


def test_connector_is_a_cycle_through_both_forced_edges():
    cycle = connector()
    strip = {(r, c) for r in range(3) for c in range(4)}
    forced = {frozenset(_right_edge(0)), frozenset(_left_edge(4))}
    assert set(cycle) == strip | {sq for e in forced for sq in e} and len(cycle) == 16
    steps = list(zip(cycle, cycle[1:] + cycle[:1]))
    assert all(_is_move(a, b) or frozenset((a, b)) in forced for a, b in steps)
    assert forced <= {frozenset(p) for p in steps}


@pytest.mark.parametrize("rows, cols", [(3, 4), (3, 5), (4, 4), (3, 7), (4, 5), (3, 8)])
def test_small_tour_agrees_with_brute_force_on_open_tours(rows, cols):
    board = Board(rows, cols)
    squares = list(board.squares())
    for sq in squares:
        path = small_tour(squares, [], start=sq, node_limit=10**7)
        if path is None:  # the claim the construction cannot prove itself: there is none
            assert not has_tour(board, sq, closed=False), sq
        else:  # a verified tour proves there is one
            assert verify_tour(board, path, start=sq).ok, sq


@pytest.mark.parametrize("rows, cols", [(3, 10), (5, 6), (4, 5), (3, 8), (4, 4)])
def test_small_tour_agrees_with_brute_force_on_closed_tours(rows, cols):
    board = Board(rows, cols)
    cycle = small_tour(list(board.squares()), [], node_limit=10**7)
    assert (cycle is not None) == closed_tour_exists(board)  # Schwenk 1991
    if cycle is None:  # the exhaustive search confirms there is none
        assert not has_tour(board, (0, 0), closed=True)
    else:  # a verified closed tour proves there is one
        assert verify_tour(board, cycle, closed=True).ok


def test_the_stored_6x6_block_tour_is_reproduced_by_the_engine():
    """The stored block tours are data the engine found; the search that found them still
    finds the same one (provenance of BLOCK_TOURS)."""
    assert find_block_tour(6, 6) == BLOCK_TOURS[(6, 6)]

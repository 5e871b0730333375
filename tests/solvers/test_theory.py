"""Tests of knights_tour.solvers.theory: the proofs that no tour exists.

The theorems (Schwenk 1991 for closed tours; Cull & De Curtins 1978 / Conrad et al. 1994 for
open tours) are checked against the engine's *complete search* on every small board — an
independent route to the same facts — and colour parity against its definition. Known
consequences from the literature: 3x10 is the smallest 3 x n board with a closed tour, 3x4 the
smallest board (other than 1x1) with an open tour.
"""

from __future__ import annotations

import pytest

from knights_tour.board import Board
from knights_tour.errors import InvalidSquareError
from knights_tour.solvers.theory import (
    SCHWENK_1991,
    closed_tour_exists,
    middle_rows_proof,
    no_tour_proof,
    open_tour_exists,
    parity_proof,
)
from knights_tour.solvers.warnsdorff import search
from knights_tour.tours.record import Proof, Status

SMALL = [(m, n) for m in range(1, 6) for n in range(m, 9) if m * n <= 32]


@pytest.mark.parametrize("m, n", SMALL)
def test_schwenk_agrees_with_exhaustive_search(m, n):
    """A closed tour is a cycle through every square, so one complete search from any square
    decides whether the board has one."""
    for rows, cols in {(m, n), (n, m)}:
        board = Board(rows, cols)
        r = search(board, (0, 0), closed=True, exhaustive=True)
        assert r.status in (Status.FOUND, Status.NO_TOUR)
        assert (r.status == Status.FOUND) == closed_tour_exists(board), (rows, cols)
        if r.status == Status.NO_TOUR:
            assert r.proof == Proof.EXHAUSTIVE


@pytest.mark.parametrize("m, n", [(m, n) for m, n in SMALL if m * n <= 25])
def test_open_tour_theorem_agrees_with_exhaustive_search(m, n):
    board = Board(m, n)
    found = [search(board, sq, exhaustive=True).status == Status.FOUND for sq in board.squares()]
    assert any(found) == open_tour_exists(board)
    assert open_tour_exists(Board(n, m)) == open_tour_exists(board)


def test_known_boards():
    assert closed_tour_exists(Board(3, 10)) and closed_tour_exists(Board(10, 3))
    assert not closed_tour_exists(Board(3, 8)) and not closed_tour_exists(Board(4, 100))
    assert closed_tour_exists(Board(5, 6)) and closed_tour_exists(Board(8, 8))
    assert open_tour_exists(Board(3, 4)) and open_tour_exists(Board(3, 7))
    assert not open_tour_exists(Board(4, 4)) and not open_tour_exists(Board(2, 100))
    assert open_tour_exists(Board(1, 1)) and not open_tour_exists(Board(1, 2))
    assert open_tour_exists(Board(4, 5)) and open_tour_exists(Board(5, 5))


def test_parity():
    five = Board(5, 5)
    assert parity_proof(five, (0, 0)) is None  # corner: majority colour
    detail = parity_proof(five, (0, 1))
    assert detail is not None and "minority" in detail and "b5" in detail
    assert parity_proof(five, (0, 0), closed=True) is not None
    assert parity_proof(Board(8, 8), (0, 1)) is None
    assert parity_proof(Board(8, 8), (0, 1), closed=True) is None
    # on every odd board exactly the minority colour is excluded for open tours
    for board in (Board(3, 5), Board(7, 7), Board(9, 11)):
        excluded = [sq for sq in board.squares() if parity_proof(board, sq) is not None]
        assert len(excluded) == board.colour_counts()[1] == board.n_squares // 2
        assert all(Board.colour(sq) == 1 for sq in excluded)


def test_no_tour_proof_kinds_and_citations():
    proof, detail = no_tour_proof(Board(5, 5), (0, 1))
    assert proof == Proof.PARITY
    proof, detail = no_tour_proof(Board(7, 9), (0, 0), closed=True)
    assert proof == Proof.PARITY
    proof, detail = no_tour_proof(Board(4, 5), (0, 0), closed=True)
    assert proof == Proof.THEOREM and SCHWENK_1991 in detail
    proof, detail = no_tour_proof(Board(8, 3), (0, 0), closed=True)
    assert proof == Proof.THEOREM and "Schwenk 1991" in detail
    proof, detail = no_tour_proof(Board(4, 4), (1, 1))
    assert proof == Proof.THEOREM and "Conrad" in detail and "Cull & De Curtins 1978" in detail
    proof, detail = no_tour_proof(Board(6, 3), (0, 0))
    assert proof == Proof.THEOREM
    assert no_tour_proof(Board(8, 8), (0, 0)) is None
    assert no_tour_proof(Board(8, 8), (0, 0), closed=True) is None
    assert no_tour_proof(Board(3, 4), (0, 0)) is None
    assert no_tour_proof(Board(1, 1), (0, 0)) is None  # the one-square tour
    with pytest.raises(InvalidSquareError):
        no_tour_proof(Board(5, 5), (5, 0))


@pytest.mark.parametrize(  # 4x8: exhausting some outer starts takes ~15 s; 4x7 a few
    "n", [*range(2, 7), pytest.param(7, marks=pytest.mark.slow)]
)
def test_middle_rows_of_4xn_agree_with_exhaustive_search(n):
    """Posa's outer/inner argument: no open tour from the middle rows of 4 x n. The complete
    search agrees on every middle square; where the board has open tours, they start on outer
    squares, so the argument never excludes all starts of such a board."""
    for board in (Board(4, n), Board(n, 4)):
        outer_found = False
        for sq in board.squares():
            proof = middle_rows_proof(board, sq)
            r = search(board, sq, exhaustive=True)
            if proof is not None:
                assert r.status == Status.NO_TOUR and "Posa" in proof, (board, sq)
                assert no_tour_proof(board, sq)[0] == Proof.THEOREM
            outer_found = outer_found or r.status == Status.FOUND
        assert outer_found == open_tour_exists(board)
    assert middle_rows_proof(Board(4, 50), (1, 20)) is not None
    assert middle_rows_proof(Board(50, 4), (20, 2)) is not None
    assert middle_rows_proof(Board(4, 50), (0, 20)) is None
    assert middle_rows_proof(Board(5, 50), (1, 20)) is None

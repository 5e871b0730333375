"""Tests of the ``cpsat`` backend against facts from outside the code.

Facts used: colour parity (on a board with an odd number of squares an open tour starts on the
majority colour); no open knight's tour exists on 3×3 or 4×4 (Cull & De Curtins 1978; the
smallest boards with open tours are 1×1, 3×4, 3×7, 4×5 and 5×5 up); Schwenk 1991: an m×n board,
m ≤ n, has a closed tour unless m and n are both odd, m ∈ {1, 2, 4}, or m = 3 and n ∈ {4, 6, 8}
(so 6×6 and 5×6 have closed tours and 4×5 has none); on 4×n no open tour starts on an inner row
(Pósa's argument for 4×n, as in Schwenk 1991, applied to paths: see the test); and, on the
smallest rectangles, an exhaustive depth-first search written here, independent of CP-SAT.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from _exhaustive import has_tour

from knights_tour.board import Board
from knights_tour.solvers import get_solver
from knights_tour.solvers.api import solve
from knights_tour.solvers.cpsat import SOLVER_PARAMETERS, check_tour
from knights_tour.solvers.cpsat import solve as cpsat_solve
from knights_tour.tours.record import Proof, Record, Status
from knights_tour.tours.verify import verify_tour

LIMIT = 30.0


@pytest.mark.parametrize(
    ("size", "start"),
    [("5x5", (0, 0)), ("6x6", (0, 0)), ("6x6", (2, 3)), ("3x4", (0, 0)), ("4x5", (0, 0))],
)
def test_finds_verified_open_tour(size: str, start: tuple[int, int]) -> None:
    result = solve(size, start, solver="cpsat", time_limit_s=LIMIT)
    assert result.status == Status.FOUND, result.reason
    assert result.checks.verifier is True
    assert tuple(int(v) for v in result.tour[0]) == start
    assert verify_tour(size, result.tour, start=start).ok


def test_registry_resolves_to_this_backend() -> None:
    assert get_solver("cpsat") is cpsat_solve


def test_parity_start_has_no_tour() -> None:
    # (0, 1) is on the minority colour of 5x5 (13 squares of colour 0, 12 of colour 1).
    assert Board.colour((0, 1)) == 1
    result = solve(5, (0, 1), solver="cpsat", time_limit_s=LIMIT)
    assert result.status == Status.NO_TOUR
    assert result.proof == Proof.CPSAT
    assert result.tour is None


def test_every_minority_colour_start_of_7x7_is_refuted() -> None:
    # Colour parity: 7x7 has 25 squares of colour 0 and 24 of colour 1; an open tour alternates
    # colours, so with an odd number of squares it starts and ends on colour 0. Refuting the 24
    # other starts needs the LP relaxation of the model (a search without it is far slower),
    # so this also guards the solver parameters. Every tour found must verify.
    board = Board(7, 7)
    for start in board.squares():
        result = cpsat_solve(board, start, time_limit_s=LIMIT)
        if Board.colour(start) == 1:
            assert result.status == Status.NO_TOUR, start
            assert result.proof == Proof.CPSAT
        elif result.status == Status.FOUND:
            assert verify_tour(board, result.tour, start=start).ok, start
        else:
            assert result.status == Status.NO_TOUR, (start, result.status)


@pytest.mark.parametrize("n", [3, 4])
def test_no_open_tour_on_3x3_and_4x4(n: int) -> None:
    board = Board(n, n)
    for start in board.squares():
        result = cpsat_solve(board, start, time_limit_s=LIMIT)
        assert result.status == Status.NO_TOUR, (n, start)
        assert result.proof == Proof.CPSAT


def test_closed_tour_on_6x6_is_closed() -> None:
    result = solve(6, (0, 0), solver="cpsat", closed=True, time_limit_s=LIMIT)
    assert result.status == Status.FOUND
    assert verify_tour(6, result.tour, start=(0, 0), closed=True).ok


def test_closed_tour_on_5x6_exists_schwenk() -> None:
    result = solve("5x6", (2, 2), solver="cpsat", closed=True, time_limit_s=LIMIT)
    assert result.status == Status.FOUND
    assert verify_tour("5x6", result.tour, start=(2, 2), closed=True).ok


def test_no_closed_tour_on_4x5_schwenk() -> None:
    result = solve("4x5", (0, 0), solver="cpsat", closed=True, time_limit_s=LIMIT)
    assert result.status == Status.NO_TOUR
    assert result.proof == Proof.CPSAT


def test_no_closed_tour_on_odd_board() -> None:
    # 5x5 has 25 squares: a closed tour would alternate colours around an odd cycle.
    result = solve(5, (0, 0), solver="cpsat", closed=True, time_limit_s=LIMIT)
    assert result.status == Status.NO_TOUR


def test_one_square_board() -> None:
    result = solve(1, (0, 0), solver="cpsat", time_limit_s=LIMIT)
    assert result.status == Status.FOUND
    assert result.tour.tolist() == [[0, 0]]
    # A one-square tour has no closing knight move, so the closed model is infeasible,
    # in agreement with the verifier (which rejects it as closed).
    closed = solve(1, (0, 0), solver="cpsat", closed=True, time_limit_s=LIMIT)
    assert closed.status == Status.NO_TOUR
    assert not verify_tour(1, [(0, 0)], closed=True).ok


@pytest.mark.parametrize("size", ["2x2", "1x5", "2x7"])
def test_boards_without_enough_moves(size: str) -> None:
    # 1xn, 2xn boards (n > 1) have squares with at most two knight moves in a line: no tour
    # (2x2 and 1xn have no knight moves at all, which add_circuit cannot take directly).
    for closed in (False, True):
        result = solve(size, (0, 0), solver="cpsat", closed=closed, time_limit_s=LIMIT)
        assert result.status == Status.NO_TOUR, (size, closed)


def test_3x3_centre_square_is_not_ignored() -> None:
    # The centre of 3x3 has no knight moves; the 8 outer squares form a knight cycle.
    # The model must not drop the isolated square and report a tour of the other eight.
    board = Board(3, 3)
    ring = board.knight_moves((0, 0))
    assert ring and (1, 1) not in ring and board.knight_moves((1, 1)) == []
    for closed in (False, True):
        for start in ((0, 0), (1, 1)):  # from the ring, and from the isolated square itself
            result = cpsat_solve(board, start, closed=closed, time_limit_s=LIMIT)
            assert result.status == Status.NO_TOUR, (start, closed)
            assert result.proof == Proof.CPSAT


@pytest.mark.parametrize(
    "size",
    [
        "3x4",
        "3x5",
        "3x6",
        "3x7",
        pytest.param("3x8", marks=pytest.mark.slow),  # the searches: seconds, not the fast loop
        "4x4",
        pytest.param("4x5", marks=pytest.mark.slow),
    ],
)
def test_every_start_agrees_with_exhaustive_search(size: str) -> None:
    board = Board(*map(int, size.split("x")))
    found = 0
    for start in board.squares():
        for closed in (False, True):
            expected = has_tour(board, start, closed)  # a closed tour: searched once per board
            result = cpsat_solve(board, start, closed=closed, time_limit_s=LIMIT)
            assert result.status == (Status.FOUND if expected else Status.NO_TOUR), (
                size,
                start,
                closed,
            )
            if expected:
                assert verify_tour(board, result.tour, start=start, closed=closed).ok
                found += 1
    # Cull & De Curtins 1978: 3x5, 3x6 and 4x4 have no open tour, 3x4, 3x7, 3x8, 4x5 have one.
    assert (found > 0) == (size in ("3x4", "3x7", "3x8", "4x5"))


@pytest.mark.parametrize(
    "n", [5, 6, 7, 8, *(pytest.param(n, marks=pytest.mark.slow) for n in (9, 10))]
)
def test_no_open_tour_from_inner_rows_of_4xn(n: int) -> None:
    # Outer squares O (rows 0 and 3) have knight moves only to inner squares I, |O| = |I| = 2n.
    # In an open tour with e_O ends on O and e_I on I, the 4n - e_O path edges at O all end on
    # I, whose path degrees sum to 4n - e_I, so e_O >= e_I. If e_O = e_I = 1, all 4n - 1 edges
    # join O and I: the tour alternates O, I as well as the colours, so all of O would share a
    # colour, which it does not. Hence both ends lie on O, and no tour starts on rows 1 or 2.
    # (These are the starts the search alone is slowest to refute.)
    board = Board(4, n)
    for start in [(r, c) for r in (1, 2) for c in range(n)]:
        result = cpsat_solve(board, start, time_limit_s=LIMIT)
        assert result.status == Status.NO_TOUR, start
    corner = cpsat_solve(board, (0, 0), time_limit_s=LIMIT)
    assert corner.status == Status.FOUND
    assert verify_tour(board, corner.tour, start=(0, 0)).ok


@pytest.mark.parametrize(
    ("size", "exists"),
    [
        ("4x6", False),
        ("4x9", False),
        ("4x12", False),
        ("4x16", False),  # m = 4: never
        ("3x8", False),
        ("3x10", True),
        ("3x12", True),  # m = 3: n >= 10, n even
        ("5x8", True),
        ("5x9", False),
        ("6x7", True),  # both odd: never
    ],
)
def test_closed_tours_on_rectangles_schwenk(size: str, exists: bool) -> None:
    board = Board(*map(int, size.split("x")))
    result = cpsat_solve(board, (0, 0), closed=True, time_limit_s=LIMIT)
    assert result.status == (Status.FOUND if exists else Status.NO_TOUR), size
    if exists:
        assert verify_tour(board, result.tour, start=(0, 0), closed=True).ok
        assert check_tour(board, result.tour, (0, 0), closed=True) is True


def test_one_search_worker_per_job() -> None:
    # Jobs run one per Celery worker process, which already occupy the cores.
    assert SOLVER_PARAMETERS["num_workers"] == 1


def test_check_tour_accepts_verified_tour_and_rejects_broken_ones() -> None:
    board = Board(5, 5)
    result = solve(board, (0, 0), solver="cpsat", time_limit_s=LIMIT)
    assert check_tour(board, result.tour, (0, 0)) is True  # the array a solver returns
    tour = [tuple(int(v) for v in sq) for sq in result.tour]
    assert verify_tour(board, tour, start=(0, 0)).ok
    assert check_tour(board, tour, (0, 0)) is True
    # swap two squares in the middle: non-knight steps
    broken = list(tour)
    broken[5], broken[6] = broken[6], broken[5]
    assert not verify_tour(board, broken).ok
    assert check_tour(board, broken, (0, 0)) is False
    # truncated (a square missing)
    assert check_tour(board, tour[:-1], (0, 0)) is False
    # a repeated square instead of the last one
    assert check_tour(board, [*tour[:-1], tour[-3]], (0, 0)) is False
    # the reverse is a tour, but from another start square
    assert verify_tour(board, tour[::-1]).ok
    assert check_tour(board, tour[::-1], (0, 0)) is False
    assert check_tour(board, tour[::-1], tour[-1]) is True
    # an open 5x5 tour is never closed (odd board)
    assert check_tour(board, tour, (0, 0), closed=True) is False
    assert check_tour(board, [], (0, 0)) is False
    assert check_tour(board, [*tour[:-1], (9, 9)], (0, 0)) is False


def test_check_tour_closed() -> None:
    board = Board(6, 6)
    result = solve(board, (0, 0), solver="cpsat", closed=True, time_limit_s=LIMIT)
    assert check_tour(board, result.tour, (0, 0), closed=True) is True
    assert check_tour(board, result.tour, (0, 0), closed=False) is True  # a closed tour is open too
    # rotating a closed tour keeps it closed but changes the start square
    rotated = np.roll(result.tour, -1, axis=0)
    assert rotated.tolist() == result.tour.tolist()[1:] + result.tour.tolist()[:1]
    assert check_tour(board, rotated, tuple(int(v) for v in rotated[0]), closed=True) is True
    assert check_tour(board, rotated, (0, 0), closed=True) is False


def test_time_limit_gives_unknown() -> None:
    result = cpsat_solve(Board(30, 30), (0, 0), time_limit_s=0.001)
    assert result.status == Status.UNKNOWN
    assert result.reason == "time_limit"
    assert result.tour is None


def test_record_round_trips() -> None:
    result = solve(5, (0, 1), solver="cpsat", time_limit_s=LIMIT)
    record = result.to_dict()
    assert record["status"] == "no_tour" and record["proof"] == "cpsat"
    assert record["solver"] == "cpsat" and record["cpsat_model_status"] == "INFEASIBLE"
    assert record["cpsat_status"] is None  # no cross-check was asked for
    assert Record.from_dict(json.loads(json.dumps(record))) == result


def test_a_tour_check_out_of_time_is_undecided_not_a_rejection() -> None:
    """With too little time CP-SAT cannot even load the 50x50 model (about 20,000 arcs): the
    check answers None (undecided), and a cross-check under a tight job budget then reports
    no mismatch for the engine's verified tour (it did report one when None read as False)."""
    from knights_tour.batches.jobs import Job, run_job

    board = Board(50, 50)
    tour = solve(board, (0, 0)).tour
    assert verify_tour(board, tour, start=(0, 0)).ok
    assert check_tour(board, tour, (0, 0), time_limit_s=1e-4) is None
    rec = run_job(Job(50, 50, (0, 0), verify="cpsat", time_limit_s=0.05))
    assert rec.status == Status.FOUND and rec.cpsat_tour_accepted is not False
    assert not rec.mismatch and rec.checks.cpsat is not False

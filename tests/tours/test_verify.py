"""Unit tests of the verifier (knights_tour.tours.verify), list path and numpy (N, 2) path.

The reference tour is from the literature: the closed 8x8 knight's tour of L. Euler (1759),
OEIS A226697 (Gardner, *Mathematical Magic Show*, 1989, fig. 86), written below as a 1-based
step-number matrix, rank 8 first (so the knight starts on a4 and ends on b6, a knight move away).
Every broken tour below is derived from it by one edit, and each kind of violation must be named.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from knights_tour.board import Board
from knights_tour.errors import InvalidBoardError, InvalidSquareError
from knights_tour.tours.record import Status, TourResult
from knights_tour.tours.verify import is_closed, verify_tour

EULER_1759 = """
37 62 43 56 35 60 41 50
44 55 36 61 42 49 34 59
63 38 53 46 57 40 51 48
54 45 64 39 52 47 58 33
 1 26 15 20  7 32 13 22
16 19  8 25 14 21  6 31
27  2 17 10 29  4 23 12
18  9 28  3 24 11 30  5
"""


def euler_tour() -> list[tuple[int, int]]:
    """Euler's tour as a list of (row, col), row 0 = rank 8, in step order."""
    steps = [[int(v) for v in line.split()] for line in EULER_1759.strip().splitlines()]
    where = {steps[r][c]: (r, c) for r in range(8) for c in range(8)}
    assert sorted(where) == list(range(1, 65))
    return [where[k] for k in range(1, 65)]


# both representations of a tour go through the same checks with the same messages
AS = {"list": lambda t: [tuple(sq) for sq in t], "array": lambda t: np.array(t, dtype=np.int64)}


@pytest.fixture(params=sorted(AS))
def form(request):
    return AS[request.param]


def test_euler_tour_is_a_closed_tour_from_a4(form):
    tour = euler_tour()
    assert Board(8, 8).algebraic(tour[0]) == "a4"
    assert verify_tour(8, form(tour), start="a4", closed=True).ok
    assert verify_tour("8x8", form(tour[::-1]), closed=True).ok  # reversed cycle
    rotated = tour[10:] + tour[:10]  # a closed tour can start anywhere
    assert verify_tour(8, form(rotated), start=rotated[0], closed=True).ok
    assert is_closed(tour)


def test_wrong_length(form):
    v = verify_tour(8, form(euler_tour()[:-1]))
    assert not v.ok and v.reason == "tour has 63 squares, a 8x8 board needs 64"
    assert "needs 64" in verify_tour(8, form(euler_tour() + [(0, 0)])).reason
    assert "needs 36" in verify_tour(6, form(euler_tour())).reason


def test_repeated_square(form):
    tour = euler_tour()
    tour[40] = tour[5]
    v = verify_tour(8, form(tour))
    sq = tour[5]
    assert not v.ok
    assert v.reason == f"square {Board(8, 8).algebraic(sq)} {sq} is visited twice (steps 6 and 41)"


def test_off_board_square(form):
    tour = euler_tour()
    tour[20] = (8, 3)
    v = verify_tour(8, form(tour))
    assert not v.ok and v.reason == "step 21 (8, 3) is off the 8x8 board"
    tour[20] = (2, -1)
    assert "step 21 (2, -1) is off" in verify_tour(8, form(tour)).reason


def test_first_violation_wins_between_repeat_and_off_board(form):
    tour = euler_tour()
    tour[30] = tour[2]  # repeat at step 31
    tour[50] = (0, 9)  # off the board at step 51
    assert "visited twice (steps 3 and 31)" in verify_tour(8, form(tour)).reason
    tour = euler_tour()
    tour[30] = (9, 9)  # off the board first
    tour[50] = tour[2]
    assert verify_tour(8, form(tour)).reason == "step 31 (9, 9) is off the 8x8 board"


def test_non_knight_step(form):
    tour = euler_tour()
    tour[9], tour[19] = tour[19], tour[9]  # still all 64 squares once, but broken moves
    v = verify_tour(8, form(tour))
    assert (
        not v.ok
        and v.reason.startswith("step 9 -> 10 (")
        and v.reason.endswith("is not a knight move")
    )


def test_wrong_start(form):
    v = verify_tour(8, form(euler_tour()), start="h1")
    assert not v.ok and v.reason == "tour starts on a4, not on h1"
    v = verify_tour(8, form(euler_tour()), start=(4, 0))
    assert v.ok


def test_not_closed(form):
    # an open 5x5 tour: by colour parity no tour of a board with an odd number of squares is
    # closed, so the closure check must reject it (and only that check)
    tour_5x5 = [
        (0, 0),
        (1, 2),
        (0, 4),
        (2, 3),
        (4, 4),
        (3, 2),
        (4, 0),
        (2, 1),
        (0, 2),
        (1, 4),
        (3, 3),
        (4, 1),
        (2, 0),
        (0, 1),
        (1, 3),
        (3, 4),
        (4, 2),
        (3, 0),
        (1, 1),
        (0, 3),
        (2, 4),
        (4, 3),
        (3, 1),
        (1, 0),
        (2, 2),
    ]
    assert verify_tour(5, form(tour_5x5), start="a5").ok
    v = verify_tour(5, form(tour_5x5), closed=True)
    assert not v.ok and v.reason == (
        "tour is not closed: last square c3 is not a knight move from the first a5"
    )


def test_array_shape_and_dtype_errors():
    tour = euler_tour()
    assert "shape (N, 2)" in verify_tour(8, np.array(tour, dtype=float)).reason
    assert "shape (N, 2)" in verify_tour(8, np.zeros((64, 3), dtype=int)).reason
    assert "shape (N, 2)" in verify_tour(8, np.zeros(128, dtype=int)).reason
    assert verify_tour(8, np.array(tour, dtype=np.int32)).ok
    assert verify_tour(8, np.array(tour, dtype=np.uint16)).ok


def test_list_shape_errors():
    tour = euler_tour()
    assert "not a (row, col) pair" in verify_tour(8, tour[:5] + ["a1"] + tour[6:]).reason
    assert "not a (row, col) pair" in verify_tour(8, tour[:5] + [(1.0, 2.0)] + tour[6:]).reason
    assert "not a (row, col) pair" in verify_tour(8, [(0, 0, 0)] + tour[1:]).reason
    assert verify_tour(8, None).reason == "no tour given"
    assert verify_tour(1, [(0, 0)]).ok
    assert not verify_tour(1, [(0, 0)], closed=True).ok


def test_bad_board_or_start_raise():
    with pytest.raises(InvalidBoardError):
        verify_tour("0", euler_tour())
    with pytest.raises(InvalidSquareError):
        verify_tour(8, euler_tour(), start="z9")


def test_result_record_accepts_numpy_tour():
    tour = np.array(euler_tour(), dtype=np.int32)
    r = TourResult(
        rows=8,
        cols=8,
        start=(4, 0),
        solver="warnsdorff",
        closed=True,
        status=Status.FOUND,
        tour=tour,
    )
    record = json.loads(r.to_json())
    assert record["tour"] == [list(sq) for sq in euler_tour()]
    back = TourResult.from_dict(record)
    assert isinstance(back.tour, np.ndarray) and back.tour.shape == (64, 2)
    assert back.tour.tolist() == [list(sq) for sq in euler_tour()] and back == r
    assert verify_tour(8, back.tour, start=(4, 0), closed=True).ok

"""Tests of knights_tour.solvers.warnsdorff_attempts: the restart schedule and the move orders.

Facts from outside the code: Luby's universal restart sequence (Luby, Sinclair & Zuckerman
1993; OEIS A182105), and that the 8 knight moves taken in angular order are a cycle, of which
there are 8 rotations in each direction.
"""

from __future__ import annotations

import itertools
import math

from knights_tour.board import KNIGHT_OFFSETS, Board
from knights_tour.solvers.warnsdorff_attempts import (
    ORDERS,
    attempt_schedule,
    closed_search_starts,
    luby,
)

A182105 = [
    1,
    1,
    2,
    1,
    1,
    2,
    4,
    1,
    1,
    2,
    1,
    1,
    2,
    4,
    8,
    1,
    1,
    2,
    1,
    1,
    2,
    4,
    1,
    1,
    2,
    1,
    1,
    2,
    4,
    8,
    16,
]
"""The first 31 terms of Luby's sequence (OEIS A182105)."""


def test_luby_is_the_universal_restart_sequence():
    assert [luby(i) for i in range(1, len(A182105) + 1)] == A182105


def test_attempt_budgets_are_luby_times_the_squares_plus_16():
    n_sq = Board(8, 8).n_squares
    attempts = list(itertools.islice(attempt_schedule(n_sq), len(A182105)))
    assert [budget for *_, budget in attempts] == [(n_sq + 16) * t for t in A182105]
    assert [seed for _, _, seed, _ in attempts] == list(range(1, len(A182105) + 1))
    assert all(0 <= order < 16 for _, order, _, _ in attempts)


def test_the_16_move_orders_are_the_rotations_of_the_angular_cycle_both_ways():
    angle = {k: math.atan2(dr, dc) for k, (dr, dc) in enumerate(KNIGHT_OFFSETS)}
    assert len(set(ORDERS)) == 16
    ways = []
    for order in ORDERS:
        assert sorted(order) == list(range(8))
        turns = [
            (angle[b] - angle[a]) % (2 * math.pi) for a, b in zip(order, order[1:] + order[:1])
        ]
        # once round the circle, one way or the other, visiting every move in angular order
        one_way = math.isclose(sum(turns), 2 * math.pi)
        other_way = math.isclose(sum(2 * math.pi - t for t in turns), 2 * math.pi)
        assert one_way != other_way
        ways.append(one_way)
    assert sum(ways) == 8


def test_closed_attempts_start_in_the_centre_and_on_the_asked_square():
    board = Board(8, 8)
    starts = closed_search_starts(board, (0, 0))
    assert starts[-1] == (0, 0) and len(starts) == 4
    assert all(max(abs(r - 3.5), abs(c - 3.5)) <= 1 for r, c in starts[:3])
    assert closed_search_starts(board, (4, 4))[-1] == (4, 4)

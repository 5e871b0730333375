"""The frontier DP's cost estimate against what the DP measures: its transitions (deterministic)
on boards in and out of the estimate's table, and the published 7x7 count's wall time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knights_tour.board import Board
from knights_tour.core.count_method import dp_count
from knights_tour.service.estimate import DP_TRANSITIONS, count_concerns, dp_count_s, dp_transitions
from knights_tour.settings import Settings

SEVEN = Path(__file__).resolve().parents[2] / "docs" / "counts" / "7x7-open.json"


def _measured(board: Board) -> int:
    return dp_count(board, halves=False).nodes


@pytest.mark.parametrize(
    "rows, cols",
    [(4, 8), (4, 14), (5, 5), (3, 20)],  # 4x8 and 4x14 are not in the table
)
def test_estimated_transitions_within_2x_of_the_dp(rows, cols):
    board = Board(rows, cols)
    ratio = dp_transitions(board) / _measured(board)
    assert 0.5 <= ratio <= 2.0, ratio


@pytest.mark.slow
@pytest.mark.parametrize("rows, cols", [(5, 7), (6, 6)])  # 5x7 is not in the table
def test_estimated_transitions_within_2x_on_larger_boards(rows, cols):
    board = Board(rows, cols)
    ratio = dp_transitions(board) / _measured(board)
    assert 0.5 <= ratio <= 2.0, ratio


def test_the_table_holds_the_published_7x7_transitions():
    record = json.loads(SEVEN.read_text())
    whole = record["processes"][0]
    assert dict(DP_TRANSITIONS[7])[7] == whole["transitions"]
    assert record["total"] == 165_575_218_320  # OEIS A165134(7): the run counted the right thing


def test_7x7_time_within_2x_of_the_measured_count_and_not_confirmed_by_default():
    record = json.loads(SEVEN.read_text())
    measured_s = record["processes"][0]["wall_s"]
    estimate_s = dp_count_s(Board(7, 7))
    assert 0.5 <= estimate_s / measured_s <= 2.0
    # 45 min measured: under the default one hour, so `ktour count 7` need not ask
    assert count_concerns(estimate_s, 1, Settings()) == []
    alone_s = record["start_a1_alone"]["wall_s"]  # the costliest class: the corner
    assert 0.5 <= dp_count_s(Board(7, 7), one_class=True) / alone_s <= 2.0


def test_growth_and_boards_without_tours():
    assert dp_transitions(Board(2, 9)) == 0.0  # no knight's tour on a 2-wide board
    sizes = [Board(7, 7), Board(7, 8), Board(7, 9)]
    costs = [dp_transitions(b) for b in sizes]
    assert costs == sorted(costs) and costs[0] < costs[1]
    assert dp_transitions(Board(8, 3)) == dp_transitions(Board(3, 8))  # narrow side across

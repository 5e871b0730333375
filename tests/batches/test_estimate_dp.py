"""The frontier DP's cost estimate against what the DP measures: its transitions (deterministic)
on boards held out of the estimate's tables (a board in a table would only compare the table
with itself), and the published 7x7 count's wall time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knights_tour.batches.estimate import (
    DP_GROWTH_EXPONENT_7,
    DP_HALVES_TRANSITIONS,
    DP_TRANSITIONS,
    count_concerns,
    dp_count_s,
    dp_count_transitions,
    dp_transitions,
)
from knights_tour.board import Board
from knights_tour.counting.method import count_paths_trivial, dp_count, dp_uses_halves
from knights_tour.counting.symmetry import symmetry_classes
from knights_tour.settings import Settings

SEVEN = Path(__file__).resolve().parents[2] / "docs" / "counts" / "7x7-open.json"


def _measured(board: Board) -> int:
    return dp_count(board, halves=False).nodes


def _held_out(board: Board, table: dict[int, tuple[tuple[int, int], ...]]) -> bool:
    narrow, long_side = sorted((board.rows, board.cols))
    return long_side not in dict(table.get(narrow, ()))


@pytest.mark.parametrize("rows, cols", [(4, 8), (4, 14), (3, 14)])
def test_estimated_full_sweeps_within_2x_of_the_dp(rows, cols):
    board = Board(rows, cols)
    assert _held_out(board, DP_TRANSITIONS)
    ratio = dp_transitions(board) / _measured(board)
    assert 0.5 <= ratio <= 2.0, ratio


@pytest.mark.slow
@pytest.mark.parametrize("rows, cols", [(5, 7)])
def test_estimated_full_sweeps_within_2x_on_larger_boards(rows, cols):
    board = Board(rows, cols)
    assert _held_out(board, DP_TRANSITIONS)
    ratio = dp_transitions(board) / _measured(board)
    assert 0.5 <= ratio <= 2.0, ratio


@pytest.mark.parametrize("rows, cols", [(3, 8), (3, 10), (4, 7), (8, 4)])
def test_the_estimate_of_what_ktour_count_runs_within_2x(rows, cols):
    """``ktour count --method dp`` runs ``dp_count``'s default (halves up to 36 squares): its
    estimate, whole grid and each class that needs a search alone, within 2x of it."""
    board = Board(rows, cols)
    assert _held_out(board, DP_HALVES_TRANSITIONS) and dp_uses_halves(board)
    ratio = dp_count_transitions(board, halves=True) / dp_count(board).nodes
    assert 0.5 <= ratio <= 2.0, ratio
    one = dp_count_transitions(board, one_class=True, halves=True)
    for rep in symmetry_classes(board):
        if not count_paths_trivial(board, rep):
            ratio = one / dp_count(board, rep).nodes
            assert 0.5 <= ratio <= 2.0, (rep, ratio)


@pytest.mark.slow
@pytest.mark.parametrize("start", [(2, 2), (0, 0)])
def test_one_class_of_6x6_within_2x(start, dp_6x6_checkpoints):
    """One class of 6x6 runs the whole grid's lower half and its own upper half (the table
    holds the whole grid only). The session's 6x6 counts share their checkpoints: a half read
    back from them counts its recorded transitions, the same as sweeping it again."""
    assert dp_uses_halves(Board(6, 6))
    one = dp_count_transitions(Board(6, 6), one_class=True, halves=True)
    ratio = one / dp_count(Board(6, 6), start, checkpoint_dir=dp_6x6_checkpoints).nodes
    assert 0.5 <= ratio <= 2.0, ratio


def test_boards_too_short_for_halves_are_estimated_as_full_sweeps():
    board = Board(3, 4)  # no cut the halves meet at: swept whole
    assert not dp_uses_halves(board) and not dp_uses_halves(Board(5, 8))  # 40 squares
    assert dp_count_transitions(board) == dp_transitions(board)
    assert dp_count(board).extra.trunks and not dp_count(board).extra.lower_halves


def test_the_table_holds_the_published_7x7_transitions():
    record = json.loads(SEVEN.read_text())
    whole = record["in_process"]["processes"][0]  # one process: every transition in it
    assert dict(DP_TRANSITIONS[7])[7] == whole["transitions"]
    assert record["total"] == 165_575_218_320  # OEIS A165134(7): the run counted the right thing


def test_7x7_time_within_2x_of_the_measured_count_and_not_confirmed_by_default():
    record = json.loads(SEVEN.read_text())
    measured_s = record["in_process"]["processes"][0]["wall_s"]  # one process, as estimated
    estimate_s = dp_count_s(Board(7, 7))
    assert 0.5 <= estimate_s / measured_s <= 2.0
    # 45 min measured: under the default one hour, so `ktour count 7` need not ask
    assert count_concerns(estimate_s, 1, Settings()) == []
    alone_s = record["start_a1_alone"]["wall_s"]  # the costliest class: the corner
    assert 0.5 <= dp_count_s(Board(7, 7), one_class=True) / alone_s <= 2.0


def test_wider_than_7_extrapolates_the_7x7_measurement_at_its_own_squares():
    t7 = dict(DP_TRANSITIONS[7])[7]  # 7x7: 49 squares
    assert dp_transitions(Board(8, 8)) == pytest.approx(t7 * (64 / 49) ** DP_GROWTH_EXPONENT_7)
    assert dp_transitions(Board(7, 8)) < dp_transitions(Board(8, 8))


def test_growth_and_boards_without_tours():
    assert dp_transitions(Board(2, 9)) == 0.0  # no knight's tour on a 2-wide board
    sizes = [Board(7, 7), Board(7, 8), Board(7, 9)]
    costs = [dp_transitions(b) for b in sizes]
    assert costs == sorted(costs) and costs[0] < costs[1]
    assert dp_transitions(Board(8, 3)) == dp_transitions(Board(3, 8))  # narrow side across

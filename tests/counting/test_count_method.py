"""Choosing the count method, and the DP count that ``ktour count`` runs, against the
enumeration and OEIS A165134."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from knights_tour.board import Board
from knights_tour.counting.dp_jobs import dp_plan, dp_run_trunk
from knights_tour.counting.frontier_run import SweepOptions
from knights_tour.counting.method import choose_method, dp_count
from knights_tour.counting.plan import count_tours
from knights_tour.errors import InvalidJobError


def test_auto_enumerates_up_to_6x6_and_uses_the_dp_beyond():
    assert choose_method(Board(5, 5)).method == "enumerate"
    assert choose_method(Board(6, 6)).method == "enumerate"
    big = choose_method(Board(7, 7))
    assert big.method == "dp" and "frontier" in big.reason
    assert choose_method(Board(7, 7), closed=True).method == "enumerate"
    assert choose_method(Board(9, 9)).method == "enumerate"  # frontier too wide


def test_forced_methods_and_refusals():
    assert choose_method(Board(5, 5), method="dp").method == "dp"
    assert choose_method(Board(7, 7), method="enumerate").method == "enumerate"
    with pytest.raises(InvalidJobError):
        choose_method(Board(5, 5), closed=True, method="dp")
    with pytest.raises(InvalidJobError):
        choose_method(Board(9, 9), method="dp")
    with pytest.raises(InvalidJobError):
        choose_method(Board(5, 5), method="guess")


@pytest.mark.parametrize("halves", [False, True])
def test_dp_count_grid_equals_enumeration(halves, tmp_path):
    board = Board(5, 5)
    report = dp_count(board, checkpoint_dir=tmp_path, halves=halves)
    assert report.grid == count_tours(board).grid
    assert report.total == 1728  # OEIS A165134(5)
    assert report.extra.peak_rss_bytes > 0
    again = dp_count(board, checkpoint_dir=tmp_path, halves=halves)  # from the checkpoints
    assert again.grid == report.grid


@pytest.mark.parametrize(
    "rows, cols", [(3, 4), (4, 3), (2, 5), (3, 5), (3, 6), (3, 7), (4, 4), (4, 5), (3, 8)]
)
def test_dp_count_on_short_boards_equals_enumeration(rows, cols):
    """Boards of three or four rows, where a cut below the first row leaves squares whose
    knight moves all cross it (the halves could not meet there): the count the command runs
    (halves where they can meet, full sweeps otherwise) is the enumeration's, class by class
    too (each class alone gets its own cut)."""
    board = Board(rows, cols)
    ref = count_tours(board)
    report = dp_count(board)
    assert report.grid == ref.grid
    assert report.total == ref.total
    for rep in ref.classes:
        assert dp_count(board, rep).grid == count_tours(board, rep).grid


def test_dp_count_on_3x4_counts_its_16_directed_tours():
    assert dp_count(Board(3, 4)).total == 16 == count_tours(Board(3, 4)).total


def test_dp_count_one_class():
    report = dp_count(Board(5, 6), (4, 5))
    ref = count_tours(Board(5, 6), (4, 5))
    assert report.grid == ref.grid
    assert report.total is None


def test_trunk_shared_by_the_starts_of_a_colour(tmp_path):
    board = Board(4, 7)
    report = dp_count(board, checkpoint_dir=tmp_path, halves=False)
    assert report.grid == count_tours(board).grid
    assert len(report.extra.trunks) == 2  # one per colour (7 is odd)
    assert list(tmp_path.glob("trunk*/kept-*.npy"))  # branch points kept on disk
    again = dp_count(board, checkpoint_dir=tmp_path, halves=False)
    assert again.grid == report.grid


def test_classes_counted_on_disk_need_no_trunk(tmp_path):
    board = Board(4, 7)
    ref = count_tours(board).grid
    assert dp_count(board, checkpoint_dir=tmp_path, halves=False).grid == ref
    again = dp_count(board, checkpoint_dir=tmp_path, halves=False)
    assert again.grid == ref and again.extra.trunks == []
    swept = [f for f in again.extra.dp_classes if f.method.startswith("full sweep")]
    assert swept and all("resumed from its checkpoint" in f.method for f in swept)
    one = dp_count(board, (0, 0), checkpoint_dir=tmp_path, halves=False)
    # a trunk for this class alone would differ from the shared one: none is run
    assert one.grid[0][0] == ref[0][0] and one.extra.trunks == []


def test_a_trunk_resumed_past_a_start_still_counts_it(tmp_path):
    board = Board(4, 7)
    ref = count_tours(board).grid
    assert dp_count(board, checkpoint_dir=tmp_path, halves=False).grid == ref
    for kept in tmp_path.glob("trunk*/kept-*.npy"):
        kept.unlink()  # the trunk resumes at its end, its branch points lost
    for done in tmp_path.glob("full-*"):
        shutil.rmtree(done)  # and no class has a checkpoint of its own
    assert dp_count(board, checkpoint_dir=tmp_path, halves=False).grid == ref


def test_boards_above_6x6_share_trunks_not_halves():
    board = Board(3, 13)  # 39 squares, a narrow frontier
    report = dp_count(board)
    assert report.extra.trunks and not report.extra.lower_halves
    assert report.grid == count_tours(board).grid


@pytest.mark.process  # a fresh interpreter: not the fast loop
def test_trunks_then_each_class_alone_in_another_process(tmp_path):
    """The DP as a small DAG: the trunks first (their branch layers kept on disk), then each
    start class as a job of its own in a fresh process that has only the disk."""
    board = Board(4, 7)
    ref = count_tours(board)
    plan = dp_plan(board)
    trunks = [
        dp_run_trunk(board, None, group, SweepOptions(checkpoint_dir=tmp_path))
        for group, keep in enumerate(plan.trunks)
        if keep
    ]
    assert trunks and None not in trunks
    assert list(tmp_path.glob("trunk*/kept-*.npy"))
    reps = [tail.representative for tail in plan.tails]
    code = (
        "import json, sys\n"
        "from knights_tour.board import Board\n"
        "from knights_tour.counting.dp_jobs import dp_run_tail\n"
        f"reps = {reps!r}\n"
        "opts = {'checkpoint_dir': sys.argv[1]}\n"
        "print(json.dumps([dp_run_tail(Board(4, 7), None, r, opts)[0] for r in reps]))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    counts = {**plan.trivial, **dict(zip(reps, json.loads(run.stdout), strict=True))}
    assert counts == ref.class_counts
    # the classes' sweeps began at the trunk's layers, not at the first layer
    firsts = [
        json.loads(m.read_text())["layers"][0]["step"]
        for m in tmp_path.glob("full-*/manifest.json")
    ]
    assert firsts and max(firsts) > 0
    # the trunks' work is not done again: the whole count now runs no trunk
    assert dp_count(board, checkpoint_dir=tmp_path, halves=False).extra.trunks == []

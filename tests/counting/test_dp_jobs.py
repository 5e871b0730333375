"""The frontier-DP count split into jobs (one per trunk, one per start class), run one by one
as workers would, against OEIS A165134 (5×5: 304 per corner, 64 in the centre, 1728 in all)."""

from __future__ import annotations

import pytest
from _counts_facts import OEIS_5X5
from _killed import Killed, killed_at

from knights_tour.board import Board
from knights_tour.counting.dp_jobs import dp_plan, dp_run_tail, dp_run_trunk
from knights_tour.counting.frontier_run import SweepOptions
from knights_tour.errors import InvalidJobError


def test_7x7_plan_one_trunk_and_six_classes_waiting_for_its_layers():
    plan = dp_plan(Board(7, 7))
    # the majority-colour classes of the late images are taken at layers 25, 33, 39, 41, 47, 49
    assert plan.trunks == [(23, 31, 37, 39, 45, 47)]
    assert [(t.representative, t.after) for t in plan.tails] == [
        ((3, 3), 23),
        ((2, 2), 31),
        ((1, 3), 37),
        ((1, 1), 39),
        ((0, 2), 45),
        ((0, 0), 47),
    ]
    assert set(plan.trivial.values()) == {0}  # the minority colour: no search
    one = dp_plan(Board(7, 7), (6, 6))  # a corner alone: its own trunk
    assert [t.representative for t in one.tails] == [(0, 0)] and one.trunks == [(47,)]


def test_5x5_jobs_one_by_one_equal_a165134(tmp_path):
    board = Board(5, 5)
    plan = dp_plan(board)
    for group, keep in enumerate(plan.trunks):
        trunk = dp_run_trunk(board, None, group, SweepOptions(checkpoint_dir=tmp_path))
        assert trunk is not None and sorted(trunk.kept) == list(keep)
    counts = dict(plan.trivial)
    for tail in plan.tails:
        counts[tail.representative], fig = dp_run_tail(
            board, None, tail.representative, SweepOptions(checkpoint_dir=tmp_path)
        )
        assert "trunk's layer" in fig.method  # started from the kept layer
    assert counts[(0, 0)] == 304 and counts[(2, 2)] == 64
    assert sum(counts[rep] * len(m) for rep, m in plan.classes.items()) == 1728
    # the folders the jobs wrote are exactly those the count names (what --fresh removes)
    written = {d for d in tmp_path.iterdir() if d.is_dir()}
    assert written and set(dp_plan(board).sweep_dirs(tmp_path)) == written
    corner = set(dp_plan(board, (4, 4)).sweep_dirs(tmp_path))  # a corner alone: its own trunk
    assert len(corner) == 2 and len(corner & written) == 1  # the corner's full sweep is shared
    assert dp_plan(board, (4, 4)).remove_sweeps(tmp_path) == 1  # --fresh of the corner alone
    assert {d for d in tmp_path.iterdir() if d.is_dir()} == written - corner


def test_a_progress_exception_stops_a_trunk_and_the_next_call_resumes(tmp_path):
    board = Board(5, 5)

    with pytest.raises(Killed):
        dp_run_trunk(board, None, 0, SweepOptions(checkpoint_dir=tmp_path, progress=killed_at(10)))
    trunk = dp_run_trunk(board, None, 0, SweepOptions(checkpoint_dir=tmp_path))
    assert trunk is not None and trunk.resumed_from == 10
    count, _ = dp_run_tail(board, None, (0, 0), SweepOptions(checkpoint_dir=tmp_path))
    assert count == 304


def test_a_tail_without_its_trunks_layer_sweeps_from_the_start(tmp_path):
    count, fig = dp_run_tail(Board(5, 5), None, (2, 2), SweepOptions(checkpoint_dir=tmp_path))
    assert count == 64 and fig.method == "full sweep"


def test_not_a_searched_class_is_refused(tmp_path):
    with pytest.raises(InvalidJobError):
        dp_run_tail(
            Board(5, 5), None, (0, 1), SweepOptions(checkpoint_dir=tmp_path)
        )  # minority colour


def test_a_trunk_killed_while_keeping_a_layer_keeps_it_when_resumed(tmp_path, monkeypatch):
    """The layer a class starts from is on disk before the trunk's checkpoint says the trunk
    is past it: a trunk killed in between resumes before that layer and keeps it, so the class
    still starts from the trunk's layer (not from its first layer)."""
    from knights_tour.counting.frontier_store import Checkpoints

    board = Board(5, 5)
    plan = dp_plan(board)
    k = plan.trunks[0][0]
    real = Checkpoints.save_kept

    def killed_at_k(self, step, parts):
        if step == k:
            raise Killed
        return real(self, step, parts)

    monkeypatch.setattr(Checkpoints, "save_kept", killed_at_k)
    with pytest.raises(Killed):
        dp_run_trunk(board, None, 0, SweepOptions(checkpoint_dir=tmp_path))
    monkeypatch.setattr(Checkpoints, "save_kept", real)
    trunk = dp_run_trunk(board, None, 0, SweepOptions(checkpoint_dir=tmp_path))
    assert trunk is not None and trunk.resumed_from < k and k in trunk.kept
    tail = next(t for t in plan.tails if t.after == k)
    count, fig = dp_run_tail(
        board, None, tail.representative, SweepOptions(checkpoint_dir=tmp_path)
    )
    assert f"from the trunk's layer {k + 1}" in fig.method
    r, c = tail.representative
    assert count == OEIS_5X5[r][c] > 0

"""The frontier DP against facts from outside it: the exhaustive enumeration (square by square),
OEIS A165134 (directed open tours of n x n: 1728 for 5, 6,637,920 for 6), the board's
symmetry and colour parity; and its machinery: parts, checkpoints, resume."""

from __future__ import annotations

import pytest
from _killed import Killed, killed_at

from knights_tour.board import Board
from knights_tour.counting import frontier
from knights_tour.counting.frontier_run import count_paths, run_sweep
from knights_tour.counting.method import dp_count
from knights_tour.counting.plan import count_tours
from knights_tour.counting.symmetry import symmetries, symmetry_classes

A165134 = {5: 1728, 6: 6_637_920}


def _dp_grid(board: Board, halves: bool = False) -> list[list[int]]:
    grid = [[0] * board.cols for _ in range(board.rows)]
    for rep, members in symmetry_classes(board).items():
        value = count_paths(board, rep, halves=halves).paths
        for r, c in members:
            grid[r][c] = value
    return grid


@pytest.mark.parametrize("halves", [False, True])
def test_5x5_grid_equals_enumeration_and_oeis(halves):
    board = Board(5, 5)
    grid = _dp_grid(board, halves)
    assert grid == count_tours(board).grid
    assert sum(map(sum, grid)) == A165134[5]
    assert all(grid[r][c] == 0 for r in range(5) for c in range(5) if (r + c) % 2 == 1)


def test_5x5_every_square_directly_is_symmetric():
    board = Board(5, 5)
    grid = [[count_paths(board, (r, c)).paths for c in range(5)] for r in range(5)]
    for g in symmetries(board):
        for r in range(5):
            for c in range(5):
                assert grid[r][c] == grid[g((r, c))[0]][g((r, c))[1]]


@pytest.mark.slow
def test_6x6_grid_equals_enumeration(dp_6x6_checkpoints):
    """As ``ktour count --method dp`` counts it: one lower half, met with each class's upper
    half (the 5x5 tests above run each class's own halves; here that would be six times the
    work of the shared lower half for no other fact). The session's other 6x6 counts share
    its checkpoints (``dp_6x6_checkpoints``): the halves one of them swept are read back."""
    board = Board(6, 6)
    report = dp_count(board, checkpoint_dir=dp_6x6_checkpoints)
    assert len(report.extra.lower_halves) == 1
    assert report.grid == count_tours(board).grid
    assert report.total == A165134[6]


@pytest.mark.parametrize("n", [5])
def test_totals_are_half_of_a165134(n):
    assert 2 * count_paths(Board(n, n)).paths == A165134[n]
    assert 2 * count_paths(Board(n, n), halves=True).paths == A165134[n]


@pytest.mark.parametrize(
    "rows,cols",
    [
        (3, 4),
        (3, 7),
        (3, 10),
        (4, 5),
        pytest.param(4, 7, marks=pytest.mark.slow),  # enumerating these takes seconds
        pytest.param(5, 6, marks=pytest.mark.slow),
    ],
)
def test_rectangles_equal_enumeration(rows, cols):
    board = Board(rows, cols)
    ref = count_tours(board).grid
    assert [[count_paths(board, (r, c)).paths for c in range(cols)] for r in range(rows)] == ref


def test_no_paths_without_search():
    assert count_paths(Board(3, 3), (0, 0)).paths == 0  # the centre is isolated
    assert count_paths(Board(4, 4), (0, 0)).paths == 0
    assert count_paths(Board(5, 5), (0, 1)).method == "trivial"  # minority colour


def test_parts_and_checkpoints_resume(tmp_path):
    board = Board(4, 7)  # its widest layers outgrow the table of 2**14 bytes below
    g = frontier.image_graph(board, (0, 0))
    plan = frontier.full_sweep(g, g.square.index((0, 0)))
    whole = run_sweep(plan)
    assert max(ls.parts for ls in whole.layers) == 1
    small = run_sweep(plan, memory_bytes=2**14)  # the smallest table: several parts
    assert max(ls.parts for ls in small.layers) > 1
    assert int(small.counts[0]) == int(whole.counts[0])

    with pytest.raises(Killed):
        run_sweep(plan, checkpoint_dir=tmp_path, progress=killed_at(20))
    again = run_sweep(plan, checkpoint_dir=tmp_path)
    assert again.resumed_from == 20
    assert [ls.states for ls in again.layers] == [ls.states for ls in whole.layers]
    assert int(again.counts[0]) == int(whole.counts[0]) == count_tours(board, (0, 0)).grid[0][0]


def test_a_later_given_layer_is_preferred_to_an_earlier_checkpoint(tmp_path):
    board = Board(4, 7)
    g = frontier.image_graph(board, (0, 0))
    plan = frontier.full_sweep(g, g.square.index((0, 0)))
    whole = run_sweep(plan, keep={14})

    with pytest.raises(Killed):
        run_sweep(plan, checkpoint_dir=tmp_path, progress=killed_at(5))
    later = run_sweep(plan, checkpoint_dir=tmp_path, first_step=15, initial=whole.kept[14])
    assert later.resumed_from == -1 and later.layers[0].step == 15  # not from layer 5
    assert int(later.counts[0]) == int(whole.counts[0]) == count_tours(board, (0, 0)).grid[0][0]
    again = run_sweep(plan, checkpoint_dir=tmp_path, first_step=15, initial=whole.kept[14])
    assert again.resumed_from == plan.n_steps - 1  # its own last layer is later still


def test_frontier_too_wide_is_refused():
    from knights_tour.errors import InvalidJobError

    with pytest.raises(InvalidJobError):
        count_paths(Board(9, 9), (0, 0))


def test_halves_meet_only_where_every_square_next_to_the_cut_has_a_move_on_its_side():
    """On a board three squares across, the middle square of a row moves two rows up or down
    only: cut one or two rows below it, it is finished by the lower half but stays on the
    upper half's frontier, so such a cut is refused and the default moves past it (3x4 has
    none: full sweeps; 3x8 meets four rows down); count_paths with halves still equals the
    enumeration there."""
    from knights_tour.errors import InvalidJobError

    g = frontier.image_graph(Board(3, 4), None)
    assert g.rows == 4 and g.cols == 3  # narrow side across
    assert not frontier.cut_meets(g, 1) and not frontier.cut_meets(g, 2)
    with pytest.raises(InvalidJobError, match="cannot meet"):
        frontier.half_sweeps(g, None, 1)
    assert frontier.default_cut(g, None) is None
    assert frontier.default_cut(frontier.image_graph(Board(3, 8), None), None) == 4
    for rows, cols in [(3, 4), (3, 5), (3, 7)]:
        board = Board(rows, cols)
        for rep in symmetry_classes(board):
            want = count_tours(board, rep).grid[rep[0]][rep[1]]
            assert count_paths(board, rep, halves=True).paths == want, (board.label, rep)

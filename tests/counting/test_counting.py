"""Tests of tour counting (counting.plan, counting.search) against facts from outside the code.

Facts: OEIS A165134 (directed open tours = directed Hamiltonian paths of the n×n knight's graph):
a(4) = 0, a(5) = 1728; its example table (G. Coserea, 2016) gives the 5×5 count per start
square: 304 from each corner, 56 from each of the other majority-colour edge and inner squares,
64 from the centre, 0 from minority-colour squares. Colour parity: on an odd board no tour
starts on a minority-colour square. Tours from a square and from its mirror image are in
one-to-one correspondence. The 3×4 counts are checked against a plain brute-force enumeration
written here, independent of the kernel.
"""

from __future__ import annotations

import json

import pytest
from _counts_facts import OEIS_5X5

from knights_tour.board import Board
from knights_tour.counting.plan import SubJob, assemble, count_tours, plan_count
from knights_tour.counting.search import check_prefix, count_subjob, fold, split
from knights_tour.counting.symmetry import representative, symmetries, symmetry_classes
from knights_tour.errors import InvalidJobError
from knights_tour.tours.verify import verify_tour


def brute_force_tours(board: Board, start: tuple[int, int], closed: bool = False) -> list[list]:
    """Every knight's tour from ``start``, by plain recursion with no pruning at all."""
    n = board.n_squares
    tours: list[list] = []

    def extend(path: list) -> None:
        if len(path) == n:
            if not closed or path[0] in board.knight_moves(path[-1]):
                tours.append(list(path))
            return
        for nxt in board.knight_moves(path[-1]):
            if nxt not in path:
                path.append(nxt)
                extend(path)
                path.pop()

    extend([start])
    return tours


def test_5x5_grid_matches_oeis_a165134() -> None:
    report = count_tours(Board(5, 5))
    assert report.grid == OEIS_5X5
    assert report.total == 1728
    assert "order 8" in report.symmetry_note


def test_4x4_has_no_open_tour() -> None:
    assert count_tours(Board(4, 4)).total == 0


def test_5x5_without_symmetry_agrees() -> None:
    direct = count_tours(Board(5, 5), use_symmetry=False, depth=1)
    assert direct.grid == OEIS_5X5
    assert "no symmetry" in direct.symmetry_note


def test_parity_squares_count_zero_in_the_kernel() -> None:
    board = Board(5, 5)
    for sq in board.squares():
        if Board.colour(sq) == 1:  # minority colour on 5x5
            assert count_subjob(board, [sq]) == (0, 1)  # ruled out at the root, no search


def test_symmetric_squares_counted_directly_agree() -> None:
    # 5x6 is a rectangle: 4 symmetries. Count some squares and their images directly.
    board = Board(5, 6)
    for sq in [(0, 0), (1, 2), (2, 1)]:
        direct = {g(sq): count_subjob(board, [g(sq)])[0] for g in symmetries(board)}
        assert len(set(direct.values())) == 1, direct
    assert count_subjob(board, [(0, 0)])[0] > 0
    # the rectangle's diagonal transpose is NOT a symmetry: (0,1) and (1,0) differ here
    assert count_subjob(board, [(0, 1)])[0] != count_subjob(board, [(1, 0)])[0]


def test_3x4_against_brute_force() -> None:
    board = Board(3, 4)
    report = count_tours(board)
    for sq in board.squares():
        tours = brute_force_tours(board, sq)
        assert all(verify_tour(board, t, start=sq).ok for t in tours)
        assert brute_force_prefix(board, [sq], closed=False) == len(tours)
        assert report.grid[sq[0]][sq[1]] == len(tours), sq
        assert count_subjob(board, [sq])[0] == len(tours)
    assert report.total > 0


def test_closed_counts_match_oeis() -> None:
    # Undirected closed tours: 8 on 5x6 (OEIS A175881, 6 x n, n = 5) and 9862 on 6x6 (OEIS
    # A001230). Each is read from any square in two directions: 16 and 19724 per square.
    board = Board(5, 6)
    assert {count_subjob(board, [sq], closed=True)[0] for sq in board.squares()} == {16}
    assert count_subjob(Board(6, 6), [(2, 3)], closed=True)[0] == 2 * 9862
    # and no closed tour on 4x5 (Schwenk 1991) or on an odd board
    assert count_subjob(Board(4, 5), [(0, 0)], closed=True)[0] == 0
    assert count_tours(Board(5, 5), closed=True).total == 0


def brute_force_prefix(board: Board, prefix: list, closed: bool) -> int:
    """Number of tours beginning with ``prefix``, by plain enumeration with no pruning."""
    n = board.n_squares
    total = 0
    stack = [list(prefix)]
    while stack:
        path = stack.pop()
        if len(path) == n:
            if not closed or path[0] in board.knight_moves(path[-1]):
                total += 1
            continue
        for nxt in board.knight_moves(path[-1]):
            if nxt not in path:
                stack.append([*path, nxt])
    return total


def test_folded_prefixes_weigh_their_mirror_images() -> None:
    # the 6x6 corner's two first moves are mirror images across the diagonal through it; the
    # 5x5 centre is fixed by all 8 symmetries, which map its 8 first moves onto each other
    corner = fold(Board(6, 6), (0, 0), split(Board(6, 6), (0, 0), 1))
    assert corner == [(((0, 0), (1, 2)), 2)]
    centre = fold(Board(5, 5), (2, 2), split(Board(5, 5), (2, 2), 1))
    assert len(centre) == 1 and centre[0][1] == 8
    off_axis = split(Board(6, 6), (0, 1), 2)  # (0, 1) is fixed by the identity alone
    assert fold(Board(6, 6), (0, 1), off_axis) == [(p, 1) for p in off_axis]
    for depth in (1, 2, 3):
        prefixes = split(Board(5, 6), (2, 0), depth)  # on the mirror line of a 5x6 board
        folded = fold(Board(5, 6), (2, 0), prefixes)
        assert sum(w for _, w in folded) == len(prefixes) and len(folded) < len(prefixes)
        assert sum(count_subjob(Board(5, 6), p)[0] * w for p, w in folded) == sum(
            count_subjob(Board(5, 6), p)[0] for p in prefixes
        )


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_folded_count_equals_oeis_with_less_search(depth: int) -> None:
    board = Board(5, 5)
    folded = count_tours(board, depth=depth)
    assert folded.grid == OEIS_5X5
    unfolded = sum(
        count_subjob(board, p)[1] for rep in folded.classes for p in split(board, rep, depth)
    )
    assert folded.nodes < unfolded


def test_split_prefixes_sum_to_the_whole() -> None:
    board = Board(5, 5)
    whole = count_subjob(board, [(0, 0)])[0]
    for depth in (1, 2, 4):
        prefixes = split(board, (0, 0), depth)
        assert all(len(p) == depth + 1 and p[0] == (0, 0) for p in prefixes)
        assert len(set(prefixes)) == len(prefixes)
        assert sum(count_subjob(board, p)[0] for p in prefixes) == whole == 304


def test_dropped_prefixes_really_have_no_tour() -> None:
    # split() drops branches the kernel's tests rule out; check them by brute force (3x4).
    board = Board(3, 4)
    kept = set(split(board, (1, 0), 3))
    for first in board.knight_moves((1, 0)):
        for second in board.knight_moves(first):
            for third in board.knight_moves(second):
                p = ((1, 0), first, second, third)
                if len(set(p)) == 4 and p not in kept:
                    assert brute_force_prefix(board, list(p), closed=False) == 0


def test_symmetry_classes_partition_the_board() -> None:
    for board, n_classes in [
        (Board(5, 5), 6),
        (Board(6, 6), 6),
        (Board(5, 6), 9),
        (Board(3, 4), 4),
    ]:
        classes = symmetry_classes(board)
        members = [sq for m in classes.values() for sq in m]
        assert sorted(members) == sorted(board.squares())
        assert len(classes) == n_classes
        for rep, m in classes.items():
            assert all(representative(board, sq) == rep for sq in m)


def test_start_option_counts_one_class() -> None:
    report = count_tours(Board(5, 5), start=(4, 4))
    assert report.class_counts == {(0, 0): 304}
    assert report.grid[4][4] == 304 and report.grid[2][2] is None
    assert report.total is None


def test_subjob_record_round_trip_and_resume_key() -> None:
    plan = plan_count(Board(5, 5), depth=2)
    keys = [sj.key for sj in plan.subjobs]
    assert len(set(keys)) == len(keys)
    assert any(sj.weight > 1 for sj in plan.subjobs)  # folded by the squares' mirrors
    for sj in plan.subjobs:
        again = SubJob.from_dict(json.loads(json.dumps(sj.to_dict())))
        assert again == sj and again.key == sj.key and again.weight == sj.weight
    with pytest.raises(InvalidJobError):
        SubJob.from_dict(plan.subjobs[0].to_dict() | {"weight": 0})
    # a weight is a number of symmetric prefixes: 2.5 (or "2", or true) is refused, not
    # truncated to 2 (which would undercount the total silently)
    for bad in (2.5, 2.0, "2", True):
        with pytest.raises(InvalidJobError, match="integer"):
            SubJob.from_dict(plan.subjobs[0].to_dict() | {"weight": bad})
    partials = {sj.key: sj.run() for sj in plan.subjobs}
    assert assemble(plan, partials).total == 1728
    # a missing partial count must not be silently summed as zero
    partials.pop(keys[0])
    with pytest.raises(InvalidJobError):
        assemble(plan, partials)


def test_report_is_json() -> None:
    record = count_tours(Board(3, 4)).to_dict()
    assert json.loads(json.dumps(record))["total"] == record["total"]


@pytest.mark.parametrize(
    "prefix", [[], [(0, 0), (0, 1)], [(0, 0), (1, 2), (0, 0)], [(0, 0), (9, 9)]]
)
def test_bad_prefixes_are_rejected(prefix: list) -> None:
    with pytest.raises(InvalidJobError):
        check_prefix(Board(5, 5), prefix)


def test_big_board_refused() -> None:
    with pytest.raises(InvalidJobError):
        plan_count(Board(8, 8))

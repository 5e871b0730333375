"""Tests of the ``warnsdorff`` backend (search engine) against facts from outside the code.

Facts: colour parity (no open tour from the minority colour of an odd board, no closed tour on
an odd board); Schwenk 1991 (closed tours: every asked start must get one where the theorem
says a closed tour exists, e.g. 5 x n and 7 x n for every even n >= 6); Cull & De Curtins 1978
/ Conrad et al. 1994 (open tours: none on 4x4, some on 3x4 and 3x7); existence of open tours
from every majority-colour square of n x n, 5 <= n <= 12 (484 of the 620 start squares; the
other 136 are excluded by parity). An independent brute-force Hamiltonian-path search (plain
recursion, no pruning, in this file) checks the engine's exhaustive answers per start square on
small boards, so the engine's pruning is shown sound there. Every tour goes through the
verifier.
"""

from __future__ import annotations

import json
import random
import time

import numpy as np
import pytest
from _exhaustive import has_tour

from knights_tour.board import Board
from knights_tour.solvers import api, get_solver
from knights_tour.solvers.warnsdorff import HEURISTIC_NODES_PER_SQUARE, search, solve, warm_up
from knights_tour.tours.record import Proof, Status
from knights_tour.tours.verify import verify_tour


def _compiled_kernels() -> dict[str, int]:
    """Name -> number of compiled signatures of every numba kernel the engine runs."""
    from numba.core.registry import CPUDispatcher

    from knights_tour.solvers.construct import kernel as construct_kernel
    from knights_tour.solvers.engine import kernel as engine_kernel

    return {
        f"{mod.__name__}.{name}": len(obj.signatures)
        for mod in (engine_kernel, construct_kernel)
        for name, obj in vars(mod).items()
        if isinstance(obj, CPUDispatcher)
    }


def test_registry_and_warm_up():
    """warm_up() leaves the kernels the engine calls compiled, so jobs of other sizes, open or
    closed, searched or constructed, compile nothing more; it returns the seconds it took
    (measured from outside, it cannot report more)."""
    assert get_solver("warnsdorff") is solve
    began = time.perf_counter()
    took = warm_up()
    outside = time.perf_counter() - began
    assert 0.0 < took <= outside
    after_warm_up = _compiled_kernels()
    assert after_warm_up["knights_tour.solvers.engine.kernel.run_attempt"] >= 1
    assert after_warm_up["knights_tour.solvers.construct.kernel.walk"] >= 1
    for board, start, closed in (
        (Board(7, 7), (0, 0), False),
        (Board(8, 8), (0, 0), True),
        (Board(40, 40), (3, 5), False),
        (Board(30, 32), (0, 0), True),
    ):
        r = solve(board, start, closed=closed)
        assert (
            r.status == Status.FOUND and verify_tour(board, r.tour, start=start, closed=closed).ok
        )
    assert _compiled_kernels() == after_warm_up


@pytest.mark.parametrize("n", range(5, 13))
def test_every_start_square_of_5_to_12_is_decided(n):
    """All 620 start squares of n = 5..12: a verified tour, or no_tour by parity exactly on the
    minority colour of odd boards; never more than 10 * n * n search nodes per start."""
    board = Board(n, n)
    decided = {"found": 0, "parity": 0}
    for sq in board.squares():
        r = api.solve(board, sq)
        minority = n % 2 == 1 and Board.colour(sq) == 1
        if minority:
            assert r.status == Status.NO_TOUR and r.proof == Proof.PARITY, sq
            decided["parity"] += 1
        else:
            assert r.status == Status.FOUND and r.checks.verifier is True, sq
            assert tuple(r.tour[0]) == sq and len(r.tour) == n * n
            assert n * n <= r.nodes <= 10 * n * n, (sq, r.nodes)
            decided["found"] += 1
    assert decided["found"] + decided["parity"] == n * n
    assert decided["parity"] == (n * n // 2 if n % 2 else 0)


@pytest.mark.parametrize("rows, cols", [(3, 3), (5, 5), (5, 7), (7, 7), (9, 9), (3, 11), (1, 1)])
def test_no_closed_tour_on_odd_boards(rows, cols):
    board = Board(rows, cols)
    for sq in [(0, 0), (rows // 2, cols // 2), (0, cols - 1)]:
        r = api.solve(board, sq, closed=True)
        assert r.status == Status.NO_TOUR and r.proof == Proof.PARITY
        assert r.tour is None


def test_no_open_tour_on_4x4_by_theorem_and_by_exhaustive_search():
    board = Board(4, 4)
    for sq in board.squares():
        r = api.solve(board, sq)
        assert r.status == Status.NO_TOUR and r.proof == Proof.THEOREM
        assert "Conrad" in r.proof_detail
        s = search(board, sq, exhaustive=True)
        assert s.status == Status.NO_TOUR and s.proof == Proof.EXHAUSTIVE, sq
        assert s.nodes > 0 and board.algebraic(sq) in s.proof_detail


@pytest.mark.parametrize(
    "rows, cols, closed",
    [
        (3, 4, False),
        (4, 3, False),
        (3, 5, False),
        (3, 6, False),
        (4, 4, False),
        (4, 5, False),
        (3, 7, False),
        (3, 6, True),
        (4, 5, True),
        (3, 8, True),
        (4, 4, True),
    ],
)
def test_exhaustive_answers_match_brute_force(rows, cols, closed):
    """Per start square, the engine's search (no theorem shortcuts) agrees with plain DFS."""
    board = Board(rows, cols)
    for sq in board.squares():
        r = search(board, sq, closed=closed, exhaustive=True)
        expected = has_tour(board, sq, closed)
        assert r.status == (Status.FOUND if expected else Status.NO_TOUR), sq
        if expected:
            assert verify_tour(board, r.tour, start=sq, closed=closed).ok
        else:
            assert r.proof == Proof.EXHAUSTIVE


@pytest.mark.parametrize("rows, cols", [(3, 4), (3, 7), (7, 3), (4, 5), (5, 12), (3, 20), (11, 6)])
def test_open_tours_on_rectangular_boards(rows, cols):
    board = Board(rows, cols)
    r = api.solve(board, (0, 0))
    assert r.status == Status.FOUND and r.checks.verifier is True


@pytest.mark.parametrize("n", [6, 8])
def test_closed_tours_found_from_every_start_and_verified_closed(n):
    board = Board(n, n)
    for sq in board.squares():
        r = api.solve(board, sq, closed=True)
        assert r.status == Status.FOUND and r.checks.verifier is True
        assert tuple(r.tour[0]) == sq
        assert verify_tour(board, r.tour, start=sq, closed=True).ok


@pytest.mark.parametrize("rows, cols", [(3, 10), (5, 6), (6, 5), (3, 12), (10, 10), (12, 7)])
def test_closed_tours_on_rectangular_boards(rows, cols):
    r = api.solve(Board(rows, cols), (0, 0), closed=True)
    assert r.status == Status.FOUND and r.checks.verifier is True


@pytest.mark.parametrize("rows, cols", [(4, 5), (4, 8), (3, 6), (3, 8), (2, 8), (1, 4), (8, 4)])
def test_schwenk_impossible_boards(rows, cols):
    r = api.solve(Board(rows, cols), (0, 0), closed=True)
    assert r.status == Status.NO_TOUR and r.proof == Proof.THEOREM
    assert "Schwenk 1991" in r.proof_detail


def test_closed_3x6_proved_by_exhaustive_search():
    r = search(Board(3, 6), (0, 0), closed=True, exhaustive=True)
    assert r.status == Status.NO_TOUR and r.proof == Proof.EXHAUSTIVE
    r = search(Board(4, 6), (1, 2), closed=True, exhaustive=True)
    assert r.status == Status.NO_TOUR and r.proof == Proof.EXHAUSTIVE


def test_one_square_board():
    r = api.solve(1, (0, 0))
    assert r.status == Status.FOUND and r.tour.tolist() == [[0, 0]] and r.checks.verifier is True


def test_1000x1000_corner_verified():
    r = api.solve(1000, (0, 0))
    assert r.status == Status.FOUND and r.checks.verifier is True
    assert isinstance(r.tour, np.ndarray) and r.tour.shape == (1_000_000, 2)
    assert tuple(r.tour[0]) == (0, 0)
    assert r.nodes >= 1_000_000


def test_large_closed_tour_and_record():
    r = api.solve(Board(250, 260), (0, 0), closed=True)
    assert r.status == Status.FOUND and r.checks.verifier is True
    record = json.loads(r.to_json())
    assert len(record["tour"]) == 250 * 260 and record["tour"][0] == [0, 0]


def test_tiny_node_limit_gives_unknown():
    r = api.solve(8, (0, 0), node_limit=10)
    assert r.status == Status.UNKNOWN and r.reason == "node_limit"
    assert r.nodes <= 10 and r.tour is None and r.proof is None
    r = api.solve(8, (0, 0), node_limit=0)
    assert r.status == Status.UNKNOWN and r.nodes == 0


def test_time_limit_is_honoured():
    # 4x12 has no closed tour (Schwenk 1991), but search() does not know: its complete search is
    # far too long to finish, so the time limit must stop it with an honest "unknown"
    began = time.perf_counter()
    r = search(Board(4, 12), (0, 0), closed=True, exhaustive=True, time_limit_s=0.1)
    took = time.perf_counter() - began
    assert r.status == Status.UNKNOWN and r.reason == "time_limit"
    assert r.nodes > 0
    assert took < 0.1 + 15  # one kernel slice (~1e6 nodes) at most overshoots the limit


def test_result_fields():
    r = api.solve(Board(6, 7), "a1")
    assert r.solver == "warnsdorff" and r.start == (5, 0) and r.start_square == "a1"
    assert r.status == Status.FOUND and r.elapsed_s > 0 and r.restarts >= 1
    record = r.to_dict()
    assert record["nodes"] == r.nodes and record["restarts"] == r.restarts
    assert record["attempts"] is None  # worker starts: only a batch counts them


@pytest.mark.parametrize(
    "rows, cols, start, closed",
    [
        (3, 100, (0, 0), True),
        (100, 3, (50, 1), True),
        (3, 300, (1, 100), False),
        (5, 200, (2, 3), False),
        (6, 1000, (2, 400), False),
    ],
)
def test_thin_boards(rows, cols, start, closed):
    """Long thin boards, where plain Warnsdorff tie-breaks struggle (closed tours on 3 x n exist
    for even n >= 10, Schwenk 1991; a rotated closed tour is an open tour from any square)."""
    r = api.solve(Board(rows, cols), start, closed=closed)
    assert r.status == Status.FOUND and r.checks.verifier is True
    assert tuple(r.tour[0]) == start


def test_middle_rows_of_4xn_answer_by_theorem():
    r = api.solve(Board(4, 50), (1, 20))
    assert r.status == Status.NO_TOUR and r.proof == Proof.THEOREM and "Posa" in r.proof_detail
    r = api.solve(Board(4, 50), (0, 0))
    assert r.status == Status.FOUND and r.checks.verifier is True


@pytest.mark.parametrize("rows", [5, 7])
def test_closed_tours_on_5xn_and_7xn_from_every_asked_start(rows):
    """Schwenk 1991: 5 x n and 7 x n have closed tours for every even n >= 6 (none for odd n,
    by parity). Sampled n up to 1000, including n = 0 (mod 8) for 5 rows and the 7 x n boards
    where Warnsdorff variants alone miss. The work stays linear: the attempts stop after
    HEURISTIC_NODES_PER_SQUARE x N nodes and a construction counts N."""
    rng = random.Random(rows)
    for n in (6, 8, 10, 16, 48, 96, 104, 200, 400, 800, 1000, 7, 201):
        board = Board(rows, n)
        starts = [(rows // 2, n // 2)] + [(rng.randrange(rows), rng.randrange(n)) for _ in range(3)]
        for sq in starts:
            r = api.solve(board, sq, closed=True)
            if n % 2:
                assert r.status == Status.NO_TOUR and r.proof == Proof.PARITY
                continue
            assert r.status == Status.FOUND and r.checks.verifier is True, (n, sq)
            assert tuple(r.tour[0]) == sq
            assert r.nodes <= (HEURISTIC_NODES_PER_SQUARE + 1) * board.n_squares + 64, (n, sq)


@pytest.mark.parametrize(
    "rows, cols, squares",
    [
        (5, 2001, [(4, 156), (4, 76), (2, 1000)]),
        (3, 2001, [(0, 1000), (1, 1), (2, 2000)]),
        (7, 1001, [(3, 501)]),
        (999, 5, [(500, 2)]),
        (4, 2001, [(0, 7), (3, 1000)]),
    ],
)
def test_colour_rule_and_open_tours_on_long_boards(rows, cols, squares):
    """Colour parity on odd boards: no open tour from the minority colour, and (Cull & De
    Curtins 1978; Conrad et al. 1994: these boards have open tours) a verified tour from the
    majority-colour squares asked, among them the ones the search alone left unknown."""
    board = Board(rows, cols)
    rng = random.Random(rows * cols)
    sample = squares + [(rng.randrange(rows), rng.randrange(cols)) for _ in range(4)]
    for sq in sample:
        r = api.solve(board, sq)
        if board.n_squares % 2 and Board.colour(sq) == 1:
            assert r.status == Status.NO_TOUR and r.proof == Proof.PARITY, sq
        elif rows == 4 and sq[0] in (1, 2):
            assert r.status == Status.NO_TOUR and r.proof == Proof.THEOREM, sq
        else:
            assert r.status == Status.FOUND and r.checks.verifier is True, sq
            assert tuple(r.tour[0]) == sq


def test_tour_is_an_array_on_every_board_and_a_list_in_the_record():
    for size in (5, 12, 201):
        r = api.solve(size, (0, 0))
        assert isinstance(r.tour, np.ndarray) and r.tour.shape == (size * size, 2)
        record = json.loads(r.to_json())
        assert record["tour"][:2] == r.tour[:2].tolist() and record["tour"][0] == [0, 0]


def test_construction_respects_the_node_limit():
    """A tour places rows*cols squares, searched or constructed (a construction counts
    rows*cols nodes), so a smaller budget leaves the job unknown."""
    board = Board(5, 96)
    r = api.solve(board, (2, 48), closed=True, node_limit=board.n_squares - 1)
    assert r.status == Status.UNKNOWN and r.reason == "node_limit" and r.tour is None
    assert r.nodes < board.n_squares
    r = api.solve(board, (2, 48), closed=True)
    assert r.status == Status.FOUND and r.checks.verifier is True

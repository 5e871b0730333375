"""The ``warnsdorff`` backend: complete DFS + Warnsdorff's rule, with proofs, restarts and a
constructive fallback.

How a job is answered
---------------------
1. :func:`knights_tour.solvers.theory.no_tour_proof` — colour parity, Schwenk 1991 (closed tours),
   Cull & De Curtins 1978 / Conrad et al. 1994 (open tours), Pósa's outer/inner argument (open
   tours from the middle rows of 4 × n) — gives ``no_tour`` at once.
2. Otherwise a sequence of *attempts* of the compiled kernel
   (:mod:`knights_tour.solvers.engine.kernel`): an iterative depth-first search with
   backtracking whose moves are ordered by Warnsdorff's rule (fewest onward moves first;
   Warnsdorff 1823) with a tie-break that varies between attempts — Roth's "farthest from the
   centre", Pohl's (1967) second-level degree sum, fixed cyclic move orders (Squirrel & Cull
   1996 study fixed move orders; their specific per-(n mod 8) orders are *not* reproduced here)
   and seeded random keys. Attempt budgets follow Luby's restart sequence (Luby, Sinclair &
   Zuckerman 1993) times ``rows*cols + 16``; the node count reported is the total over all
   attempts.
3. On a board where a construction applies (:func:`knights_tour.solvers.construct.constructible`:
   every board with a closed tour, odd × odd boards with sides >= 5, 3 × n with n odd), once
   the attempts have spent :data:`HEURISTIC_NODES_PER_SQUARE` × ``rows*cols`` nodes without a
   tour, the tour is built by :mod:`knights_tour.solvers.construct` in time linear in the
   squares (counted as ``rows*cols`` nodes; the record's ``via`` says so). If the construction
   does not apply to the start (rare, e.g. the middle of 3 × 17) the attempts go on.
4. Every attempt is a *complete* search (all moves are candidates; pruning only cuts branches
   no tour can complete, see the kernel docstring), so an attempt that runs out of branches
   proves ``no_tour`` (proof ``exhaustive``).
5. If the node budget or the time limit runs out first, the answer is ``unknown`` with reason
   ``node_limit`` or ``time_limit`` — never ``no_tour`` without a proof.

Closed (re-entrant) tours: a closed tour through all squares can start anywhere, so the engine
searches mostly from central squares (far more successful than corners) and rotates the cycle
to begin at ``start``. For *open* jobs on boards that have closed tours, every second attempt
looks for a closed tour the same way (a rotated closed tour is an open tour from any square;
the record's ``via`` says so). On 3 × n boards, closed-tour attempts start on the middle square of
an end line and cycle through the 16 fixed move orders, where central starts fail.

Known limits: 4 × n boards have no construction here (no closed blocks exist to build from);
their open tours come from the search alone. Figures (nodes, seconds, decided counts) are in
``benchmarks/README.md`` (``benchmarks/bench_engine.py``).

The attempts themselves (move orders, tie-breaks, budgets, where each starts, the kernel's
state arrays) are :mod:`knights_tour.solvers.warnsdorff_attempts`; this module answers a job
with them.

Tours are returned as numpy ``int32`` arrays of shape ``(N, 2)`` on every board, so the cost
per square does not depend on the size; :func:`knights_tour.tours.verify.verify_tour` and
:meth:`TourResult.to_dict` (a list of ``[row, col]``) accept them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Unpack

import numpy as np

from knights_tour._numba import compile_module, job_clock, loading
from knights_tour.board import Board, Square
from knights_tour.solvers import ENGINE, Limits, construct
from knights_tour.solvers.construct import kernel as construct_kernel
from knights_tour.solvers.engine import kernel as K
from knights_tour.solvers.theory import closed_tour_exists, no_tour_proof
from knights_tour.solvers.warnsdorff_attempts import (
    AttemptPlan,
    KernelSearch,
    attempt_schedule,
    load_search_kernels,
    plain_search,
    run_attempt,
    runs_as_plain_python,
)
from knights_tour.tours.record import Proof, Status, TourResult

NAME = ENGINE.name

HEURISTIC_NODES_PER_SQUARE = 2
"""Nodes per square the attempts may spend before a construction is tried (where one applies)."""

BLOCK_NODES_PER_SQUARE = 50
"""Node budget per square of the search for an open tour of the start's block (construction)."""

NODES_PER_SQUARE = 10
"""Default node budget per job is ``max(NODES_PER_SQUARE * rows * cols, MIN_DEFAULT_NODES)``."""

MIN_DEFAULT_NODES = 20_000_000

BYTES_PER_SQUARE = 24
"""Rough upper bound of the peak memory of a search, per square (state arrays + the tour)."""


def default_node_limit(board: Board) -> int:
    """Default node budget of one job: ``max(10 * rows * cols, 20_000_000)`` nodes."""
    return max(NODES_PER_SQUARE * board.n_squares, MIN_DEFAULT_NODES)


def _block_path(block: Board, start: Square) -> np.ndarray | None:
    """An open tour of a small block from ``start`` by :func:`search`, or None (the
    ``block_path`` of :func:`knights_tour.solvers.construct.open_tour`)."""
    r = search(block, start, node_limit=BLOCK_NODES_PER_SQUARE * block.n_squares + 1000)
    return r.tour if r.status == Status.FOUND else None


def _construction(board: Board, start: Square, closed: bool) -> tuple[np.ndarray, str] | None:
    """The constructed tour from ``start`` and a note on how it was made, or None."""
    if closed:
        tour = construct.closed_tour(board, start)
        note = "construction: closed tour of joined blocks, rotated to the start"
    else:
        tour = construct.open_tour(board, start, _block_path)
        note = (
            "construction: closed tour of joined blocks, rotated to the start"
            if closed_tour_exists(board)
            else "construction: open tour of joined blocks around the start"
        )
    return None if tour is None else (tour, note)


def solve(board: Board, start: Square, **limits: Unpack[Limits]) -> TourResult:
    """Find a knight's tour of ``board`` from ``start`` or prove there is none.

    First :func:`knights_tour.solvers.theory.no_tour_proof` (colour parity; Schwenk 1991 for
    closed tours; Cull & De Curtins 1978 / Conrad et al. 1994 for open tours), then the attempts
    of :func:`search`, with a construction (:mod:`knights_tour.solvers.construct`) after
    :data:`HEURISTIC_NODES_PER_SQUARE` × ``rows*cols`` nodes where one applies.

    Parameters
    ----------
    board : Board
    start : (row, col)
        Start square, row 0 at the top.
    **limits
        The keywords of :class:`~knights_tour.solvers.Limits`:
    closed : bool
        Ask for a closed (re-entrant) tour: the last square a knight move from the first.
    time_limit_s : float, optional
        Wall-clock limit in seconds (checked every ~1e6 nodes); on expiry ``unknown`` with
        reason ``time_limit``.
    exhaustive : bool
        Search to the end (no node budget unless ``node_limit`` is given), so the answer is
        ``found`` or ``no_tour`` (proof ``exhaustive``) unless the time limit runs out.
    node_limit : int, optional
        Total nodes over all attempts, a construction counting ``rows*cols``; default
        :func:`default_node_limit` (or unlimited with ``exhaustive``). On expiry ``unknown``
        with reason ``node_limit``.

    Returns
    -------
    TourResult
        The engine's claim (not yet verified; :func:`knights_tour.solvers.api.solve` verifies
        it). ``tour`` is a numpy ``int32`` array of shape ``(rows*cols, 2)``, rows of
        ``(row, col)``. ``nodes`` counts squares placed on the path over all attempts (start
        squares included; a construction counts ``rows*cols``); ``elapsed_s`` is wall time.
        ``restarts`` is the number of attempts made, ``via`` how a tour not
        searched from ``start`` was made.

    Raises
    ------
    InvalidSquareError
        If ``start`` is off the board.
    TypeError
        For a keyword that is no limit.
    """
    _load_unless_plain(board)
    began = job_clock()
    start = board.check_square(start)
    closed = limits.get("closed", False)
    proof = no_tour_proof(board, start, closed)
    if proof is not None:
        result = TourResult(
            rows=board.rows, cols=board.cols, start=start, solver=NAME, closed=closed
        )
        result.status, result.proof, result.proof_detail = Status.NO_TOUR, proof[0], proof[1]
        result.elapsed_s = job_clock() - began
        return result
    fallback = None
    if construct.constructible(board, closed):
        fallback = partial(_construction, board, start, closed)
    return _search(board, start, began, fallback, **limits)


def search(board: Board, start: Square, **limits: Unpack[Limits]) -> TourResult:
    """The search alone, without the theorem shortcuts and the constructions of :func:`solve`
    (same parameters, :class:`~knights_tour.solvers.Limits`, and result). Used by tests and the
    benchmark to show the search itself proves e.g. "no open tour on 4x4" (proof
    ``exhaustive``). Raises as :func:`solve` does.
    """
    _load_unless_plain(board)
    return _search(board, board.check_square(start), job_clock(), None, **limits)


def _load_unless_plain(board: Board) -> None:
    """Load the compiled kernels (:func:`warm_up`) before a job on ``board`` takes its clock,
    unless they are loaded or the job runs them as plain Python
    (:func:`~knights_tour.solvers.warnsdorff_attempts.runs_as_plain_python`): a job's time
    limit is not spent on loading them."""
    if not _warm and not runs_as_plain_python(board):
        warm_up()


def _too_large(board: Board) -> str | None:
    """Why the engine cannot take the board (index range, free memory), or None."""
    n_sq = board.n_squares
    if (board.rows + 4) * (board.cols + 4) >= 2**31:
        return f"board too large for the engine ({n_sq} squares)"
    if n_sq * BYTES_PER_SQUARE > 1 << 28:  # only big boards can exhaust memory
        try:
            import psutil

            available = psutil.virtual_memory().available
        except Exception:  # pragma: no cover - psutil is a dependency; be robust anyway
            return None
        if n_sq * BYTES_PER_SQUARE > available:
            return (
                f"board too large for available memory ({n_sq} squares, "
                f"~{n_sq * BYTES_PER_SQUARE / 2**30:.1f} GiB needed)"
            )
    return None


def _search(
    board: Board,
    start: Square,
    began: float,
    fallback: Callable[[], tuple[np.ndarray, str] | None] | None,
    closed: bool = False,
    time_limit_s: float | None = None,
    exhaustive: bool = False,
    node_limit: int | None = None,
) -> TourResult:
    """The attempts of one job (module docstring); ``fallback`` is the construction, called
    once after :data:`HEURISTIC_NODES_PER_SQUARE` × ``rows*cols`` nodes if the budget allows.
    A small job in a process that has not loaded the compiled kernels runs them as plain Python
    (:func:`~knights_tour.solvers.warnsdorff_attempts.plain_search`)."""
    with plain_search(board):
        return _attempts(
            board, start, began, fallback, closed, time_limit_s, exhaustive, node_limit
        )


def _attempts(
    board: Board,
    start: Square,
    began: float,
    fallback: Callable[[], tuple[np.ndarray, str] | None] | None,
    closed: bool,
    time_limit_s: float | None,
    exhaustive: bool,
    node_limit: int | None,
) -> TourResult:
    """:func:`_search`'s work, in the kernels' mode it has chosen."""
    result = TourResult(rows=board.rows, cols=board.cols, start=start, solver=NAME, closed=closed)

    def finish(status: Status, **kw: object) -> TourResult:
        result.status = status
        for key, value in kw.items():
            setattr(result, key, value)
        result.elapsed_s = job_clock() - began
        return result

    n_sq = board.n_squares
    if n_sq == 1 and not closed:
        return finish(Status.FOUND, tour=np.array([start], np.int32), nodes=1)
    too_large = _too_large(board)
    if too_large is not None:
        return finish(Status.UNKNOWN, reason=too_large)
    total_budget = _node_budget(board, node_limit, exhaustive)
    deadline = began + time_limit_s if time_limit_s is not None else None
    plan = AttemptPlan(board, start, closed)
    engine = KernelSearch(board)
    nodes = attempts = 0
    for tie, order, seed, budget in attempt_schedule(n_sq):
        left = None if total_budget is None else total_budget - nodes
        if left is not None and left <= 0:
            break
        if fallback is not None and nodes >= HEURISTIC_NODES_PER_SQUARE * n_sq:
            affordable = left is None or left >= n_sq
            made = fallback() if affordable else None
            fallback = None
            if made is not None:
                return finish(
                    Status.FOUND, tour=made[0], nodes=nodes + n_sq, restarts=attempts, via=made[1]
                )
        attempts += 1
        from_sq, att_closed, tie, order, budget = plan.attempt(
            attempts, tie, order, budget if left is None else min(budget, left), left
        )
        engine.start(from_sq, att_closed, tie, order, seed)
        status = run_attempt(engine, budget, att_closed, tie, order, deadline)
        nodes += int(engine.st[K.ST_NODES])
        if status == -1:
            return finish(Status.UNKNOWN, reason="time_limit", nodes=nodes, restarts=attempts)
        if status == K.FOUND:
            return finish(
                Status.FOUND, nodes=nodes, **_found(engine, board, start, from_sq, closed, attempts)
            )
        if status == K.EXHAUSTED and att_closed == closed:
            return finish(
                Status.NO_TOUR,
                proof=Proof.EXHAUSTIVE,
                proof_detail=_exhausted(board, start, from_sq, closed, nodes),
                nodes=nodes,
                restarts=attempts,
            )
    return finish(Status.UNKNOWN, reason="node_limit", nodes=nodes, restarts=attempts)


def _node_budget(board: Board, node_limit: int | None, exhaustive: bool) -> int | None:
    """Nodes all attempts of a job may spend: ``node_limit``, else unlimited (None) for an
    exhaustive job, else :func:`default_node_limit`."""
    if node_limit is not None:
        return max(0, int(node_limit))
    return None if exhaustive else default_node_limit(board)


def _exhausted(board: Board, start: Square, from_sq: Square, closed: bool, nodes: int) -> str:
    """The proof detail of an attempt from ``from_sq`` that ran out of branches after ``nodes``
    nodes; a closed attempt from another square proves it for ``start`` too."""
    detail = (
        f"complete backtracking search from {board.algebraic(from_sq)} found no "
        f"{'closed' if closed else 'open'} tour ({nodes} nodes; only branches no tour "
        "can complete were pruned)"
    )
    if from_sq != start:
        detail += (
            "; a closed tour passes through every square, so none starts on "
            f"{board.algebraic(start)} either"
        )
    return detail


def _found(
    engine: KernelSearch, board: Board, start: Square, from_sq: Square, closed: bool, attempts: int
) -> dict[str, object]:
    """``tour``, ``restarts`` and ``via`` of a found tour; a closed tour searched from another
    square is rotated to begin on ``start``."""
    tour = engine.tour_array()
    found: dict[str, object] = {"restarts": attempts}
    if from_sq != start:
        at = int(np.flatnonzero((tour[:, 0] == start[0]) & (tour[:, 1] == start[1]))[0])
        tour = np.roll(tour, -at, axis=0)
        if not closed:
            found["via"] = "closed tour rotated to the start"
    found["tour"] = tour
    return found


_warm = False


def warm_up() -> float:
    """Compile (or load from numba's on-disk cache) the search and construction kernels by
    solving small boards; call once at worker start so the first job does not pay for it (a
    job that needs them and finds them not loaded calls it before it takes its clock). Timed
    as loading (:func:`knights_tour._numba.loading`). Returns seconds taken."""
    global _warm
    began = time.perf_counter()
    with loading():
        load_search_kernels()
        compile_module(construct_kernel)
        _warm = True
        solve(Board(5, 5), (0, 0))
        solve(Board(6, 6), (0, 0), closed=True)
        construct.closed_tour(Board(6, 12), (0, 0))
        construct.closed_tour(Board(3, 24), (0, 0))
        construct.open_tour(Board(3, 29), (0, 14), _block_path)
        construct.open_tour(Board(5, 15), (2, 8), _block_path)
    return time.perf_counter() - began


__all__ = ["solve", "search", "warm_up", "default_node_limit", "NAME", "HEURISTIC_NODES_PER_SQUARE"]

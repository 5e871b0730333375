"""The attempts of a ``warnsdorff`` job: what each one searches with, from where, for how long,
and the kernel state it runs on (:mod:`knights_tour.solvers.warnsdorff` strings them together).

* **Move orders and tie-breaks.** :data:`ORDERS` are the 16 cyclic move orders; attempts vary
  the kernel's tie-break of Warnsdorff's rule (Warnsdorff 1823): Roth's "farthest from the
  centre", Pohl's (1967) second-level degree sum, fixed cyclic orders (Squirrel & Cull 1996)
  and seeded random keys.
* **Budgets.** :func:`attempt_schedule` gives attempt ``i`` a node budget of Luby's restart
  sequence (Luby, Sinclair & Zuckerman 1993, :func:`luby`) times ``rows*cols + 16``: most
  attempts are cheap and varied, yet the budgets grow without bound, so with an unlimited node
  budget the search is complete.
* **Where.** :class:`AttemptPlan` sends closed-tour attempts (and, for open jobs on boards with
  closed tours, every second attempt) to central squares or, on 3 × n boards, to the middle of
  an end line (:func:`closed_search_starts`).
* **The kernel.** :class:`KernelSearch` holds the state arrays of one board for the compiled
  kernel (:mod:`knights_tour.solvers.engine.kernel`), allocated once per job;
  :func:`run_attempt` runs a started attempt in slices of :data:`CHUNK_NODES` nodes, checking
  the wall clock between slices.
* **Plain Python first.** Loading the compiled kernels (numba and its on-disk cache) costs a
  fresh process about half a second of CPU, more than the first small jobs of a fresh worker
  take as plain Python (the kernels' own code run by the interpreter, same search, same
  answers: :func:`knights_tour._numba.plain_kernels`). :func:`plain_search` lets a job on a board
  of at most :data:`PLAIN_MAX_SQUARES` squares run so while the kernels are not loaded, until
  the process has searched :data:`PLAIN_NODES` nodes that way; then :func:`run_attempt` loads
  them (:func:`load_search_kernels`) and the search goes on compiled from where it stands.
  Loading is timed (:func:`knights_tour._numba.loading`) and left off the job's clock
  (:func:`knights_tour._numba.job_clock`): a job does not spend its time limit on it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np

from knights_tour._numba import (
    compile_module,
    is_compiled,
    job_clock,
    loading,
    plain_kernels,
    runs_plain,
)
from knights_tour.board import KNIGHT_OFFSETS, Board, Square
from knights_tour.solvers.engine import kernel as K
from knights_tour.solvers.theory import closed_tour_exists

CHUNK_NODES = 1 << 20
"""Nodes per kernel call between wall-clock checks (roughly 10-50 ms)."""

PLAIN_NODES = 5_000
"""Nodes a process may search as plain Python (:func:`plain_search`) before it loads the
compiled kernels: at tens of microseconds a node, about the CPU that loading them costs."""

PLAIN_MAX_SQUARES = 144
"""Largest board (squares) searched as plain Python: a board's set-up and each attempt's start
are loops over its squares."""

PLAIN_CHUNK_NODES = 1_000
"""Nodes per kernel call as plain Python, so the process's :data:`PLAIN_NODES` are counted
closely."""

_plain_nodes_left = PLAIN_NODES
_search_kernels_loaded = False


def runs_as_plain_python(board: Board) -> bool:
    """Whether a job on ``board`` starting now would run the kernels as plain Python: the
    board has at most :data:`PLAIN_MAX_SQUARES` squares, the process has :data:`PLAIN_NODES`
    left and has not compiled the kernels."""
    return board.n_squares <= PLAIN_MAX_SQUARES and _plain_nodes_left > 0 and not is_compiled(K)


def plain_search(board: Board) -> contextlib.AbstractContextManager[None]:
    """A context in which a job on ``board`` runs the kernels as plain Python while they are not
    compiled (module docstring), if :func:`runs_as_plain_python`; else a context that changes
    nothing."""
    return plain_kernels() if runs_as_plain_python(board) else contextlib.nullcontext()


def load_search_kernels() -> None:
    """Load the compiled search kernels in this process, timed as loading
    (:func:`knights_tour._numba.loading`): compile the kernel module and run one short attempt
    on 5x5, whose first calls make numba read each kernel from its on-disk cache (or compile
    it). Idempotent."""
    global _search_kernels_loaded
    if _search_kernels_loaded:
        return
    with loading():
        compile_module(K)
        engine = KernelSearch(Board(5, 5))
        engine.start((0, 0), False, K.TIE_ROTH, 0, 1)
        engine.run(2 * engine.n_sq, False, K.TIE_ROTH, 0)
        engine.tour_array()
    _search_kernels_loaded = True


def _spent_plain(nodes: int) -> None:
    """Count ``nodes`` searched as plain Python; load the compiled kernels once the process's
    :data:`PLAIN_NODES` are spent."""
    global _plain_nodes_left
    _plain_nodes_left -= nodes
    if _plain_nodes_left <= 0:
        load_search_kernels()


def _orders() -> list[tuple[int, ...]]:
    """The 16 cyclic move orders: the 8 rotations of :data:`KNIGHT_OFFSETS` (clockwise) and the
    8 rotations of its reverse (anticlockwise)."""
    cw = list(range(8))
    out = []
    for base in (cw, cw[::-1]):
        for r in range(8):
            out.append(tuple(base[r:] + base[:r]))
    return out


ORDERS = _orders()


def luby(i: int) -> int:
    """The i-th term (i >= 1) of Luby's universal restart sequence 1, 1, 2, 1, 1, 2, 4, 1, ...
    (Luby, Sinclair & Zuckerman 1993, "Optimal speedup of Las Vegas algorithms")."""
    k = 1
    while (1 << k) - 1 < i:
        k += 1
    while True:
        if i == (1 << k) - 1:
            return 1 << (k - 1)
        if i >= 1 << (k - 1):
            i -= (1 << (k - 1)) - 1
            k = 1
            while (1 << k) - 1 < i:
                k += 1
        else:
            k -= 1


_FIRST = [
    (K.TIE_ROTH, 0),
    (K.TIE_POHL, 0),
    (K.TIE_RANDOM, 0),
    (K.TIE_FIXED, 3),
    (K.TIE_ROTH, 9),
    (K.TIE_RANDOM, 5),
    (K.TIE_POHL, 12),
]


def attempt_schedule(n_sq: int) -> Iterator[tuple[int, int, int, int]]:
    """The attempts of one job as ``(tie_break, order_index, seed, budget)``, endless.

    Budgets follow Luby's sequence times ``rows*cols + 16`` (a successful Warnsdorff run without
    backtracking costs ``rows*cols`` nodes), so most attempts are cheap and varied, yet the
    budgets grow without bound: with an unlimited node budget the search is complete."""
    base = n_sq + 16
    i = 0
    while True:
        i += 1
        if i <= len(_FIRST):
            tie, order = _FIRST[i - 1]
        else:
            tie = (K.TIE_RANDOM, K.TIE_ROTH, K.TIE_FIXED, K.TIE_POHL)[i % 4]
            order = (i * 5) % 16
        yield tie, order, i, base * luby(i)


def closed_search_starts(board: Board, start: Square) -> list[Square]:
    """Squares to run closed-tour attempts from, in turn. A closed tour is a cycle through every
    square, so it can be searched from any square and rotated to begin on ``start``; searches
    from central squares succeed far more often than from a corner."""
    cr, cc = board.rows // 2, board.cols // 2
    out: list[Square] = []
    for dr, dc in ((0, 0), (-1, 0), (0, -1), (-1, -1), (1, 1), (-2, 0), (0, -2)):
        sq = (min(max(cr + dr, 0), board.rows - 1), min(max(cc + dc, 0), board.cols - 1))
        if sq not in out:
            out.append(sq)
    if start in out:
        out.remove(start)
    # central squares first (Roth's tie-break from the centre closes the tour greedily on
    # square boards), the asked start every fourth attempt
    return out[:3] + [start]


class AttemptPlan:
    """Where and how each attempt of one job searches (see :mod:`knights_tour.solvers.warnsdorff`).

    A closed tour, rotated, is also an open tour from any square. For open tours on boards that
    have closed ones (Schwenk 1991), every second attempt therefore searches for a closed tour
    from a central square. Such an attempt proves nothing about open tours when it is
    exhausted; it is then just a failed attempt."""

    def __init__(self, board: Board, start: Square, closed: bool) -> None:
        n_sq = board.n_squares
        self.start, self.closed = start, closed
        self.closed_starts = closed_search_starts(board, start)
        self.thin = min(board.rows, board.cols) == 3 and n_sq >= 30
        self.thin_starts = [(1, 0), (0, 1)] if board.rows == 3 else [(0, 1), (1, 0)]
        self.via_closed = not closed and n_sq >= 30 and closed_tour_exists(board)
        self.n_closed = 0

    def attempt(
        self, number: int, tie: int, order: int, budget: int, left: int | None
    ) -> tuple[Square, bool, int, int, int]:
        """``(from_sq, closed, tie, order, budget)`` of attempt ``number`` (1-based)."""
        att_closed = self.closed or (self.via_closed and number % 2 == 0)
        if not att_closed:
            return self.start, False, tie, order, budget
        k = self.n_closed
        self.n_closed += 1
        if self.thin and k % 4 != 3:
            # 3 x n: fixed move orders from the middle square of an end line close the tour
            # with little backtracking where central starts and other tie-breaks fail; cycle
            # through all 16 orders
            j = k - k // 4
            budget = 4 * budget if left is None else min(4 * budget, left)
            return self.thin_starts[j % 2], True, K.TIE_FIXED, (j // 2) % 16, budget
        if not self.closed and k % 2 == 0:
            tie = K.TIE_ROTH  # closes big boards greedily from the centre
        return self.closed_starts[k % len(self.closed_starts)], True, tie, order, budget


class KernelSearch:
    """Reusable state arrays of one board for the compiled kernel (allocated once per job):
    a padded board of ``(rows + 4) * (cols + 4)`` cells, so moves need no bounds checks."""

    def __init__(self, board: Board) -> None:
        self.board = board
        self.rows, self.cols = board.rows, board.cols
        self.W = self.cols + 4
        size = (self.rows + 4) * self.W
        self.n_sq = board.n_squares
        self.visited = np.empty(size, np.uint8)
        self.deg = np.empty(size, np.int8)
        self.pos = np.empty(self.n_sq, np.int32)  # padded indices (< 2**31, checked by search)
        self.cand = np.empty(self.n_sq, np.int32)  # packed move lists (28 bits)
        self.nxt = np.empty(self.n_sq, np.uint8)
        self.st = np.zeros(K.ST_SIZE, np.int64)
        self.moves_cache: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def moves(self, order: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(padded index offsets, d_row, d_col) of the 8 knight moves in move order ``order``."""
        if order not in self.moves_cache:
            mdr = np.array([KNIGHT_OFFSETS[k][0] for k in ORDERS[order]], np.int64)
            mdc = np.array([KNIGHT_OFFSETS[k][1] for k in ORDERS[order]], np.int64)
            self.moves_cache[order] = (mdr * self.W + mdc, mdr, mdc)
        return self.moves_cache[order]

    def start(self, start: Square, closed: bool, tie: int, order: int, seed: int) -> None:
        """Reset the board and begin an attempt on ``start`` (row, col) with tie-break ``tie``
        (a ``K.TIE_*``), move order ``ORDERS[order]`` and random seed ``seed``."""
        K.init_board(self.rows, self.cols, self.moves(order)[0], self.visited, self.deg)
        self.st[K.ST_RNG] = (seed * 0x9E3779B97F4A7C15 + 1) & 0x7FFFFFFFFFFFFFFF or 1
        s = K.padded_index(start[0], start[1], self.W)
        K.start_attempt(s, *self._kernel_args(closed, tie, order))

    def run(self, budget: int, closed: bool, tie: int, order: int) -> int:
        """Continue the started attempt for up to ``budget`` more nodes; returns the kernel's
        status (``K.FOUND``, ``K.EXHAUSTED`` or ``K.RUNNING``); the attempt's node count is in
        ``st[K.ST_NODES]``."""
        return K.run_attempt(budget, *self._kernel_args(closed, tie, order))

    def _kernel_args(self, closed: bool, tie: int, order: int) -> tuple[object, ...]:
        """The arguments :func:`K.start_attempt` and :func:`K.run_attempt` take after their
        first: the attempt's kind, the board, tie-break, moves and the state arrays."""
        return (
            closed,
            self.W,
            self.rows,
            self.cols,
            tie,
            *self.moves(order),
            self.visited,
            self.deg,
            self.pos,
            self.cand,
            self.nxt,
            self.st,
        )

    def tour_array(self) -> np.ndarray:
        """The found path as ``(row, col)`` rows: ``int32`` array of shape ``(rows*cols, 2)``."""
        out = np.empty((self.n_sq, 2), np.int32)
        K.tour_coords(self.pos, self.n_sq, self.W, out)
        return out


def run_attempt(
    engine: KernelSearch, budget: int, closed: bool, tie: int, order: int, deadline: float | None
) -> int:
    """Run the started attempt in slices of :data:`CHUNK_NODES` until it ends, its ``budget``
    is spent (``K.RUNNING``) or the deadline passes (``-1``; ``deadline`` on
    :func:`knights_tour._numba.job_clock`); returns the kernel status."""
    while True:
        if deadline is not None and job_clock() >= deadline:
            return -1
        done = int(engine.st[K.ST_NODES])
        room = budget - done
        if room <= 0:
            return K.RUNNING
        if runs_plain(K.run_attempt):
            status = engine.run(min(room, PLAIN_CHUNK_NODES), closed, tie, order)
            _spent_plain(int(engine.st[K.ST_NODES]) - done)
        else:
            status = engine.run(min(room, CHUNK_NODES), closed, tie, order)
        if status != K.RUNNING:
            return status


__all__ = [
    "ORDERS",
    "CHUNK_NODES",
    "luby",
    "attempt_schedule",
    "closed_search_starts",
    "AttemptPlan",
    "KernelSearch",
    "run_attempt",
    "runs_as_plain_python",
    "plain_search",
    "load_search_kernels",
]

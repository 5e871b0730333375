"""Counting knight's tours per start square (issue 7): the pure part, no Celery, no Redis.

"How many open knight's tours start on this square?" is answered by an exhaustive enumeration
that counts and never stores tours (the compiled kernel
:func:`knights_tour.solvers.engine.count_kernel.count_completions`, exact pruning described there).
A count is split into independent **sub-jobs**: all paths of the first ``depth`` moves from the
start square that the kernel's tests do not already rule out (*prefixes*); each sub-job counts
the tours beginning with its prefix (:func:`count_subjob`) and the partial counts are summed.

Symmetry: every symmetry of the board (the dihedral group: 8 elements for an ``n × n`` board, 4
for a rectangle — identity, the two mirror flips and the half turn) maps the tours from a square
``s`` one-to-one onto the tours from its image, so only one square per symmetry class (its
*representative*, the smallest ``(row, col)`` of the class) is counted and the count is copied
to the rest of the class. Reports say so (:attr:`CountReport.symmetry_note`).

Counts are of **directed** tours read from the start square: an open tour with ends ``s`` and
``t`` counts once for ``s`` and once for ``t``, so the per-square counts of an ``n × n`` board
sum to OEIS A165134(n) (directed Hamiltonian paths of the knight's graph: 1728 for n = 5,
6,637,920 for n = 6). A closed count (``closed=True``) counts directed Hamiltonian cycles read
from the start square (twice the undirected closed tours, the same for every square).

Records crossing the wire are plain JSON (:meth:`SubJob.to_dict`, :meth:`CountReport.to_dict`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from knights_tour.board import Board, Square
from knights_tour.core.symmetry import representative, symmetry_classes
from knights_tour.errors import InvalidJobError
from knights_tour.solvers import count_kernel

DEFAULT_TARGET_SUBJOBS = 12
"""Default number of sub-jobs per counted square that :func:`choose_depth` aims for."""

NO_SPLIT_SQUARES = 25
"""Boards up to this many squares are not split by default (depth 0: one sub-job per counted
square): all of 5×5 takes milliseconds, less than the round trip of one task."""

MAX_DEPTH = 12
"""Largest split depth :func:`choose_depth` goes to."""

MAX_COUNT_SQUARES = 49
"""Boards above this many squares are refused by :func:`plan_count`. 6×6 takes seconds; 7×7
(165,575,218,320 directed open tours, OEIS A165134) is accepted but would take CPU-months at
~10^7 nodes/s; 8×8 (about 1.96e16 tours) is out of reach of exhaustive enumeration."""


# -- the knight's graph as kernel arrays -------------------------------------------------------
@lru_cache(maxsize=32)
def knight_graph(board: Board) -> tuple[np.ndarray, np.ndarray]:
    """``(nbr, ndeg)``: the knight's graph of ``board`` in the kernel's layout.

    ``nbr`` is an int64 array of shape ``(rows*cols, 8)`` (row-major square indices, padded with
    -1), ``ndeg[v]`` the number of knight moves from square ``v``. Cached per board; read-only.
    """
    n = board.n_squares
    nbr = np.full((n, 8), -1, dtype=np.int64)
    ndeg = np.zeros(n, dtype=np.int64)
    for v, targets in enumerate(board.neighbours):
        ndeg[v] = len(targets)
        nbr[v, : len(targets)] = targets
    nbr.setflags(write=False)
    ndeg.setflags(write=False)
    return nbr, ndeg


def check_prefix(board: Board, prefix: Sequence[Sequence[int]]) -> list[Square]:
    """Return ``prefix`` as a list of squares if it is a valid start of a knight's tour.

    Raises
    ------
    InvalidJobError
        If it is empty, longer than the board, has a square off the board, repeats a square, or
        has a step that is not a knight move.
    """
    if len(prefix) == 0:
        raise InvalidJobError("a count prefix needs at least the start square")
    if len(prefix) > board.n_squares:
        raise InvalidJobError(
            f"count prefix has {len(prefix)} squares, the {board.label} board only "
            f"{board.n_squares}"
        )
    squares: list[Square] = []
    seen: set[Square] = set()
    for sq in prefix:
        if len(sq) != 2:
            raise InvalidJobError(f"count prefix square {sq!r} is not a (row, col) pair")
        s = (int(sq[0]), int(sq[1]))
        if not board.contains(s):
            raise InvalidJobError(f"count prefix square {s} is off the {board.label} board")
        if s in seen:
            raise InvalidJobError(f"count prefix visits {s} twice")
        if squares and s not in board.knight_moves(squares[-1]):
            raise InvalidJobError(f"count prefix step {squares[-1]} -> {s} is not a knight move")
        seen.add(s)
        squares.append(s)
    return squares


def _prefix_array(board: Board, prefix: Sequence[Square]) -> np.ndarray:
    return np.array([board.index(s) for s in prefix], dtype=np.int64)


def count_subjob(
    board: Board, prefix: Sequence[Sequence[int]], closed: bool = False
) -> tuple[int, int]:
    """Count the knight's tours of ``board`` whose first squares are ``prefix``.

    Parameters
    ----------
    board : Board
    prefix : sequence of (row, col)
        Start square first, then the first moves (row 0 at the top); at least one square.
    closed : bool
        Count only closed (re-entrant) tours.

    Returns
    -------
    (count, nodes)
        Number of (directed) tours beginning with ``prefix`` and search nodes the kernel visited.

    Raises
    ------
    InvalidJobError
        If ``prefix`` is not a path of knight moves on the board (see :func:`check_prefix`).
    """
    squares = check_prefix(board, prefix)
    nbr, ndeg = knight_graph(board)
    count, nodes = count_kernel().count_completions(
        nbr, ndeg, _prefix_array(board, squares), bool(closed)
    )
    return int(count), int(nodes)


# -- splitting ---------------------------------------------------------------------------------
def split(
    board: Board, start: Square, depth: int, closed: bool = False
) -> list[tuple[Square, ...]]:
    """All prefixes of ``depth`` moves from ``start`` not ruled out by the kernel's tests.

    A branch is dropped only when the kernel's exact tests prove that no tour completes it, so
    the counts of the returned prefixes sum to the count for ``start``. Paths that cover the
    whole board in fewer moves are returned as they are (they are complete tours).

    Returns
    -------
    list of tuple of (row, col)
        Each of ``depth + 1`` squares (start first), in a fixed (deterministic) order.

    Raises
    ------
    InvalidSquareError
        If ``start`` is off the board.
    InvalidJobError
        If ``depth`` is negative.
    """
    start = board.check_square(start)
    if depth < 0:
        raise InvalidJobError(f"split depth must be >= 0, got {depth}")
    nbr, ndeg = knight_graph(board)
    kernel = count_kernel()
    n = board.n_squares
    out: list[tuple[Square, ...]] = []

    def viable(path: list[int]) -> bool:
        return bool(kernel.prefix_viable(nbr, ndeg, np.array(path, dtype=np.int64), bool(closed)))

    def extend(path: list[int]) -> None:
        if not viable(path):
            return
        if len(path) == depth + 1 or len(path) == n:
            out.append(tuple(board.square(v) for v in path))
            return
        for w in board.neighbours[path[-1]]:
            if w not in path:
                extend([*path, w])

    extend([board.index(start)])
    return out


def choose_depth(
    board: Board,
    start: Square,
    target_subjobs: int = DEFAULT_TARGET_SUBJOBS,
    closed: bool = False,
    max_depth: int = MAX_DEPTH,
) -> int:
    """The smallest split depth giving at least ``target_subjobs`` prefixes for ``start``
    (or ``max_depth``, or the first depth at which every remaining branch is a complete tour or
    none is left)."""
    for depth in range(0, max_depth + 1):
        prefixes = split(board, start, depth, closed)
        if len(prefixes) >= target_subjobs:
            return depth
        if all(len(p) == board.n_squares for p in prefixes):
            return depth  # nothing left to split: every branch is complete or ruled out
    return max_depth


# -- plans and reports -------------------------------------------------------------------------
@dataclass(frozen=True)
class SubJob:
    """One independent piece of a count: the tours of ``board`` that begin with ``prefix``.

    ``key`` names it stably (start square and prefix as row-major indices) so a resubmitted
    batch can tell which sub-jobs already have a stored partial count.
    """

    rows: int
    cols: int
    closed: bool
    prefix: tuple[Square, ...]

    @property
    def board(self) -> Board:
        return Board(self.rows, self.cols)

    @property
    def start(self) -> Square:
        return self.prefix[0]

    @property
    def key(self) -> str:
        """``"5x5:o:0.7.14"`` — board, ``o``pen/``c``losed, prefix as row-major indices."""
        board = self.board
        path = ".".join(str(board.index(s)) for s in self.prefix)
        return f"{board.label}:{'c' if self.closed else 'o'}:{path}"

    def run(self) -> tuple[int, int]:
        """``(count, nodes)`` of this sub-job (see :func:`count_subjob`)."""
        return count_subjob(self.board, self.prefix, self.closed)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record: rows, cols, closed, prefix (list of [row, col]), key."""
        return {
            "rows": self.rows,
            "cols": self.cols,
            "closed": self.closed,
            "prefix": [[r, c] for r, c in self.prefix],
            "key": self.key,
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> SubJob:
        """Inverse of :meth:`to_dict`.

        Raises
        ------
        InvalidJobError
            If a field is missing or the prefix is not a knight path on the board.
        """
        try:
            board = Board(int(record["rows"]), int(record["cols"]))
            prefix = check_prefix(board, record["prefix"])
            return cls(board.rows, board.cols, bool(record.get("closed", False)), tuple(prefix))
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InvalidJobError):
                raise
            raise InvalidJobError(f"malformed count sub-job record: {exc}") from exc


@dataclass
class CountPlan:
    """What to count: the symmetry classes to count and their sub-jobs.

    ``classes`` maps each counted representative to all squares of its class (the squares that
    get its count); ``subjobs`` lists every sub-job of every counted representative.
    """

    board: Board
    closed: bool
    depth: int
    classes: dict[Square, list[Square]]
    subjobs: list[SubJob]
    use_symmetry: bool = True

    @property
    def symmetry_note(self) -> str:
        """One line saying how symmetry was used, for the output."""
        b = self.board
        if not self.use_symmetry:
            return f"no symmetry used: {len(self.classes)} squares counted directly"
        order = 8 if b.is_square else 4
        group = "dihedral group of the square" if b.is_square else "symmetry group of the rectangle"
        return (
            f"symmetry: {group} (order {order}); counted {len(self.classes)} representative "
            f"square(s), copied to the {sum(len(m) for m in self.classes.values())} square(s) "
            "of their classes"
        )


def plan_count(
    board: Board,
    start: Square | None = None,
    *,
    closed: bool = False,
    depth: int | None = None,
    target_subjobs: int = DEFAULT_TARGET_SUBJOBS,
    use_symmetry: bool = True,
    max_squares: int = MAX_COUNT_SQUARES,
) -> CountPlan:
    """Plan a count for every square of ``board`` (or only ``start``'s class).

    Parameters
    ----------
    board : Board
    start : (row, col), optional
        Count only this square (and, by symmetry, its class); default every square.
    closed : bool
        Count closed tours instead of open ones.
    depth : int, optional
        Moves fixed per sub-job; default 0 for boards up to :data:`NO_SPLIT_SQUARES` squares,
        else :func:`choose_depth` for the first representative.
    target_subjobs : int
        Sub-jobs per counted square that :func:`choose_depth` aims for.
    use_symmetry : bool
        Count one square per symmetry class (default) or every square directly.
    max_squares : int
        Refuse larger boards (exhaustive counting grows exponentially).

    Raises
    ------
    InvalidJobError
        If the board has more than ``max_squares`` squares or ``depth`` is negative.
    InvalidSquareError
        If ``start`` is off the board.
    """
    if board.n_squares > max_squares:
        raise InvalidJobError(
            f"counting tours on {board.label} ({board.n_squares} squares) is out of reach; "
            f"boards up to {max_squares} squares are accepted (7x7 alone has "
            "165,575,218,320 directed open tours, 8x8 about 1.96e16: OEIS A165134)"
        )
    if use_symmetry:
        all_classes = symmetry_classes(board)
    else:
        all_classes = {sq: [sq] for sq in board.squares()}
    if start is not None:
        start = board.check_square(start)
        rep = representative(board, start) if use_symmetry else start
        classes = {rep: all_classes[rep]}
    else:
        classes = all_classes
    if depth is None and board.n_squares <= NO_SPLIT_SQUARES:
        depth = 0
    if depth is None:
        first = next(iter(classes))
        depth = choose_depth(board, first, target_subjobs, closed)
    if depth < 0:
        raise InvalidJobError(f"split depth must be >= 0, got {depth}")
    subjobs = [
        SubJob(board.rows, board.cols, closed, prefix)
        for rep in classes
        for prefix in split(board, rep, depth, closed)
    ]
    return CountPlan(board, closed, depth, classes, subjobs, use_symmetry)


@dataclass
class CountReport:
    """The summed result of a count: per-square grid, total, and how it was obtained.

    ``grid[r][c]`` is the number of directed tours starting on ``(r, c)``, or None for a square
    that was not counted (``--start`` counts one class only). ``total`` is the grid's sum when
    every square was counted, else None.
    """

    rows: int
    cols: int
    closed: bool
    grid: list[list[int | None]]
    class_counts: dict[Square, int]
    classes: dict[Square, list[Square]]
    subjobs: int
    depth: int
    nodes: int
    elapsed_s: float = 0.0
    symmetry_note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def total(self) -> int | None:
        if any(v is None for row in self.grid for v in row):
            return None
        return sum(v for row in self.grid for v in row if v is not None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record: rows, cols, closed, grid, total, classes (representative, members,
        count), subjobs, depth, nodes, elapsed_s, symmetry, plus ``extra``."""
        record: dict[str, Any] = {
            "rows": self.rows,
            "cols": self.cols,
            "closed": self.closed,
            "grid": self.grid,
            "total": self.total,
            "classes": [
                {
                    "representative": [rep[0], rep[1]],
                    "members": [[r, c] for r, c in self.classes[rep]],
                    "count": self.class_counts[rep],
                }
                for rep in self.classes
            ],
            "subjobs": self.subjobs,
            "depth": self.depth,
            "nodes": self.nodes,
            "elapsed_s": round(self.elapsed_s, 6),
            "symmetry": self.symmetry_note,
        }
        for key, value in self.extra.items():
            record.setdefault(key, value)
        return record


def assemble(
    plan: CountPlan,
    partials: Mapping[str, tuple[int, int]] | Iterable[tuple[str, tuple[int, int]]],
    elapsed_s: float = 0.0,
) -> CountReport:
    """Sum sub-job results into the per-square report.

    Parameters
    ----------
    plan : CountPlan
    partials : mapping sub-job key -> (count, nodes)
        One entry per sub-job of the plan (extra keys are ignored).

    Raises
    ------
    InvalidJobError
        If a sub-job of the plan has no partial count (the sum would be wrong).
    """
    table = dict(partials.items() if isinstance(partials, Mapping) else partials)
    missing = [sj.key for sj in plan.subjobs if sj.key not in table]
    if missing:
        raise InvalidJobError(
            f"{len(missing)} of {len(plan.subjobs)} count sub-jobs have no result "
            f"(first: {missing[0]})"
        )
    class_counts = {rep: 0 for rep in plan.classes}
    nodes = 0
    for sj in plan.subjobs:
        count, n = table[sj.key]
        class_counts[sj.start] += int(count)
        nodes += int(n)
    board = plan.board
    grid: list[list[int | None]] = [[None] * board.cols for _ in range(board.rows)]
    for rep, members in plan.classes.items():
        for r, c in members:
            grid[r][c] = class_counts[rep]
    return CountReport(
        rows=board.rows,
        cols=board.cols,
        closed=plan.closed,
        grid=grid,
        class_counts=class_counts,
        classes=dict(plan.classes),
        subjobs=len(plan.subjobs),
        depth=plan.depth,
        nodes=nodes,
        elapsed_s=elapsed_s,
        symmetry_note=plan.symmetry_note,
    )


def warm_up() -> None:
    """Load the compiled counting kernel in this process (compiling it on the first run on a
    machine, about 10 s; later a cache load), so the first sub-job does not pay for it. For a
    worker's process-start hook."""
    count_subjob(Board(3, 4), [(0, 0)])
    split(Board(3, 4), (0, 0), 1)


def count_tours(
    board: Board,
    start: Square | None = None,
    *,
    closed: bool = False,
    depth: int | None = None,
    use_symmetry: bool = True,
) -> CountReport:
    """Count tours in this process, one sub-job after another (the reference for the
    distributed count, and for small boards; 5×5 takes well under a second once compiled).

    Arguments and errors as in :func:`plan_count`.
    """
    began = time.perf_counter()
    plan = plan_count(board, start, closed=closed, depth=depth, use_symmetry=use_symmetry)
    partials = {sj.key: sj.run() for sj in plan.subjobs}
    return assemble(plan, partials, elapsed_s=time.perf_counter() - began)

"""Counting knight's tours per start square: the plan of a count and its report. Pure: no Celery,
no Redis.

A count is split into independent **sub-jobs** (:class:`SubJob`): the tours beginning with one
prefix, a path of the first ``depth`` moves from a counted square, counted by exhaustive
enumeration (:mod:`knights_tour.counting.search`, which also finds the prefixes).
:func:`plan_count` says which squares are counted and lists their sub-jobs; :func:`assemble`
sums the sub-jobs' partial counts into the per-square :class:`CountReport`.

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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from knights_tour.board import Board, Square
from knights_tour.counting.records import CountExtra
from knights_tour.counting.search import check_prefix, count_subjob, fold, split
from knights_tour.counting.symmetry import representative, symmetry_classes
from knights_tour.errors import InvalidJobError

DEFAULT_TARGET_SUBJOBS = 12
"""Sub-jobs per counted square that :func:`plan_count`'s default split aims for on boards above
:data:`FEW_SPLIT_SQUARES` squares."""

MAX_DEPTH = 12
"""Largest split depth :func:`plan_count`'s default split goes to."""

NO_SPLIT_SQUARES = 25
"""Boards up to this many squares are not split by default (depth 0: one sub-job per counted
square): a whole count of such a board costs less than sending one task (timings:
``benchmarks/bench_count.py``)."""

FEW_SPLIT_SQUARES = 36
"""Boards up to this many squares (and above :data:`NO_SPLIT_SQUARES`) aim by default at
:data:`FEW_SUBJOBS_PER_SQUARE` sub-jobs per counted square, not :data:`DEFAULT_TARGET_SUBJOBS`:
their whole count is about a second of kernel time, and each sub-job costs round trips
through Celery and Redis (6x6: 20 sub-jobs instead of 74; ``benchmarks/bench_count_celery.py``)."""

FEW_SUBJOBS_PER_SQUARE = 3
"""Sub-jobs per counted square aimed at on boards up to :data:`FEW_SPLIT_SQUARES` squares."""

MAX_COUNT_SQUARES = 49
"""Boards above this many squares are refused by :func:`plan_count`. 7×7 (165,575,218,320
directed open tours, OEIS A165134) is accepted, though enumerating that many tours one by one
is out of a batch's reach (rates: ``benchmarks/README.md``); 8×8 (about 1.96e16 tours) is out
of reach of exhaustive enumeration."""


@dataclass(frozen=True)
class SubJob:
    """One independent piece of a count: the tours of ``board`` that begin with ``prefix``.

    ``key`` names it stably (start square and prefix as row-major indices) so a resubmitted
    batch can tell which sub-jobs already have a stored partial count. ``weight`` is the number
    of prefixes it stands for (its images under the symmetries that fix the start square, see
    :func:`knights_tour.counting.search.fold`): :func:`assemble` multiplies its count by it.
    """

    rows: int
    cols: int
    closed: bool
    prefix: tuple[Square, ...]
    weight: int = 1

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

    def to_dict(self) -> dict[str, object]:
        """JSON-ready record: rows, cols, closed, prefix (list of [row, col]), weight, key."""
        return {
            "rows": self.rows,
            "cols": self.cols,
            "closed": self.closed,
            "prefix": [[r, c] for r, c in self.prefix],
            "weight": self.weight,
            "key": self.key,
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> SubJob:
        """Inverse of :meth:`to_dict`.

        Raises
        ------
        InvalidJobError
            If a field is missing, the weight is not a positive integer or the prefix is not a
            knight path on the board.
        """
        try:
            board = Board(int(record["rows"]), int(record["cols"]))
            prefix = check_prefix(board, record["prefix"])
            weight = record.get("weight", 1)
            if isinstance(weight, bool) or not isinstance(weight, int) or weight < 1:
                raise InvalidJobError(
                    f"count sub-job weight must be an integer >= 1, got {weight!r}"
                )
            closed = bool(record.get("closed", False))
            return cls(board.rows, board.cols, closed, tuple(prefix), weight)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InvalidJobError):
                raise
            raise InvalidJobError(f"malformed count sub-job record: {exc}") from exc


@dataclass
class CountPlan:
    """What to count: the symmetry classes to count and their sub-jobs.

    ``classes`` maps each counted representative to all squares of its class (the squares that
    get its count); ``subjobs`` lists every sub-job of every counted representative. ``folded``:
    prefixes equal under a symmetry fixing their start square are one weighted sub-job.
    """

    board: Board
    closed: bool
    depth: int
    classes: dict[Square, list[Square]]
    subjobs: list[SubJob]
    use_symmetry: bool = True
    folded: bool = False

    @property
    def symmetry_note(self) -> str:
        """One line saying how symmetry was used, for the output."""
        b = self.board
        if not self.use_symmetry:
            return f"no symmetry used: {len(self.classes)} squares counted directly"
        order = 8 if b.is_square else 4
        group = "dihedral group of the square" if b.is_square else "symmetry group of the rectangle"
        folded = (
            "; first moves equal under a symmetry that fixes their start counted once"
            if self.folded and any(sj.weight > 1 for sj in self.subjobs)
            else ""
        )
        return (
            f"symmetry: {group} (order {order}); counted {len(self.classes)} representative "
            f"square(s), copied to the {sum(len(m) for m in self.classes.values())} square(s) "
            f"of their classes{folded}"
        )


def plan_count(
    board: Board,
    start: Square | None = None,
    *,
    closed: bool = False,
    depth: int | None = None,
    target_subjobs: int | None = None,
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
        else the smallest depth giving ``target_subjobs`` sub-jobs per counted square on
        average.
    target_subjobs : int, optional
        Sub-jobs per counted square that the default depth aims for (default
        :data:`FEW_SUBJOBS_PER_SQUARE` up to :data:`FEW_SPLIT_SQUARES` squares, else
        :data:`DEFAULT_TARGET_SUBJOBS`).
    use_symmetry : bool
        Count one square per symmetry class (default) or every square directly. With symmetry
        the prefixes of a square are also folded by the symmetries that fix it
        (:func:`knights_tour.counting.search.fold`): one weighted sub-job per orbit.
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
    if depth is not None and depth < 0:
        raise InvalidJobError(f"split depth must be >= 0, got {depth}")
    if depth is None:
        if target_subjobs is None:
            few = board.n_squares <= FEW_SPLIT_SQUARES
            target_subjobs = FEW_SUBJOBS_PER_SQUARE if few else DEFAULT_TARGET_SUBJOBS
        depth, subjobs = _default_split(board, classes, closed, use_symmetry, target_subjobs)
    else:
        subjobs = _subjobs(board, classes, depth, closed, use_symmetry)
    return CountPlan(board, closed, depth, classes, subjobs, use_symmetry, folded=use_symmetry)


def _subjobs(
    board: Board, classes: Iterable[Square], depth: int, closed: bool, folded: bool
) -> list[SubJob]:
    """The sub-jobs of ``classes`` split at ``depth``, folded (weighted) or not."""
    out = []
    for rep in classes:
        prefixes = split(board, rep, depth, closed)
        pairs = fold(board, rep, prefixes) if folded else [(p, 1) for p in prefixes]
        out += [SubJob(board.rows, board.cols, closed, p, w) for p, w in pairs]
    return out


def _default_split(
    board: Board, classes: Mapping[Square, Any], closed: bool, folded: bool, target: int
) -> tuple[int, list[SubJob]]:
    """The smallest depth with at least ``target`` sub-jobs per counted square on average (or
    :data:`MAX_DEPTH`, or the first at which every sub-job is a whole tour), and its
    sub-jobs."""
    subjobs: list[SubJob] = []
    for depth in range(MAX_DEPTH + 1):
        subjobs = _subjobs(board, classes, depth, closed, folded)
        if len(subjobs) >= target * len(classes):
            return depth, subjobs
        if all(len(sj.prefix) == board.n_squares for sj in subjobs):
            return depth, subjobs
    return MAX_DEPTH, subjobs


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
    extra: CountExtra = field(default_factory=CountExtra)

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
        for key, value in msgspec.to_builtins(self.extra).items():
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
        class_counts[sj.start] += int(count) * sj.weight
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


def count_tours(
    board: Board,
    start: Square | None = None,
    *,
    closed: bool = False,
    depth: int | None = None,
    use_symmetry: bool = True,
) -> CountReport:
    """Count tours in this process, one sub-job after another (the reference for the
    distributed count, and for small boards).

    Arguments and errors as in :func:`plan_count`.
    """
    began = time.perf_counter()
    plan = plan_count(board, start, closed=closed, depth=depth, use_symmetry=use_symmetry)
    partials = {sj.key: sj.run() for sj in plan.subjobs}
    return assemble(plan, partials, elapsed_s=time.perf_counter() - began)


__all__ = [
    "SubJob",
    "CountPlan",
    "plan_count",
    "CountReport",
    "assemble",
    "count_tours",
    "NO_SPLIT_SQUARES",
    "FEW_SPLIT_SQUARES",
    "FEW_SUBJOBS_PER_SQUARE",
    "MAX_COUNT_SQUARES",
    "DEFAULT_TARGET_SUBJOBS",
]

"""Choosing how ``ktour count`` counts, and counting by the frontier DP.

Two exact methods count the open tours from a square:

* **enumeration** (:mod:`knights_tour.counting.plan`): depth-first search over every tour,
  split into sub-jobs for the workers. Its work grows with the number of tours (about 10^12
  search nodes for 7×7), so it is used where it is fastest: boards of up to
  :data:`ENUMERATION_MAX_SQUARES` squares, and every closed count.
* **frontier DP** (:mod:`knights_tour.counting.frontier_run`): work grows with the number of
  frontier states, not tours; used for open counts on larger boards whose frontier fits a key.
  Every start class is counted by an upper half of its own met with one lower half shared by
  all classes (:func:`knights_tour.counting.frontier.half_sweeps`).

:func:`choose_method` says which and why; :func:`dp_count` runs the DP over the symmetry classes
and returns the same :class:`~knights_tour.counting.plan.CountReport` as an enumeration.
Pure: no Celery, no Redis.
"""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass
from pathlib import Path

from knights_tour.board import Board, Square
from knights_tour.counting import frontier
from knights_tour.counting.frontier_kernel import MAX_SLOTS
from knights_tour.counting.frontier_run import (
    DEFAULT_MEMORY_BYTES,
    ClassDone,
    Progress,
    SweepOptions,
    run_plan,
)
from knights_tour.counting.plan import CountReport
from knights_tour.counting.records import CountExtra
from knights_tour.errors import InvalidJobError

ENUMERATION_MAX_SQUARES = 36
"""Largest board counted by enumeration when the method is ``auto`` (6×6 counts in about a
second on two processes; the DP needs tens of seconds there, see docs/counts)."""

METHODS = ("auto", "enumerate", "dp")

HALVES_MAX_SQUARES = 36
"""Largest board :func:`dp_count` meets in the middle by default."""


@dataclass(frozen=True)
class MethodChoice:
    """The method a count uses (``"enumerate"`` or ``"dp"``) and the reason, in words."""

    method: str
    reason: str


def dp_width(board: Board) -> int:
    """Widest frontier of the DP's full sweep on ``board`` (narrow side across): the number of
    4-bit slots a key needs."""
    return frontier.full_sweep_width(frontier.image_graph(board, None))


def choose_method(board: Board, *, closed: bool = False, method: str = "auto") -> MethodChoice:
    """Pick the counting method.

    Parameters
    ----------
    board : Board
    closed : bool
        Closed tours are counted by enumeration only.
    method : {"auto", "enumerate", "dp"}
        ``auto`` picks; the others force a method (refused where it cannot run).

    Raises
    ------
    InvalidJobError
        An unknown method, the DP for closed tours, or the DP on a board whose frontier is wider
        than a key holds.
    """
    if method not in METHODS:
        raise InvalidJobError(f"unknown count method {method!r}; valid: {', '.join(METHODS)}")
    if method == "enumerate":
        return MethodChoice("enumerate", "enumeration (asked for with --method enumerate)")
    if closed:
        if method == "dp":
            raise InvalidJobError(
                "the frontier DP counts open tours only; closed tours are counted by enumeration"
            )
        return MethodChoice("enumerate", "enumeration: the frontier DP counts open tours only")
    width = dp_width(board)
    if width > MAX_SLOTS:
        if method == "dp":
            raise InvalidJobError(
                f"the frontier DP on {board.label} needs {width} frontier "
                f"slots; its keys hold {MAX_SLOTS}"
            )
        return MethodChoice(
            "enumerate",
            f"enumeration: the DP's frontier ({width} squares) "
            f"is wider than its keys hold ({MAX_SLOTS})",
        )
    if method == "dp":
        return MethodChoice("dp", f"frontier DP (asked for with --method dp; frontier {width})")
    if board.n_squares <= ENUMERATION_MAX_SQUARES:
        return MethodChoice(
            "enumerate", f"enumeration: faster than the DP up to {ENUMERATION_MAX_SQUARES} squares"
        )
    return MethodChoice(
        "dp",
        f"frontier DP: enumeration grows with the number of tours, "
        f"the DP with its frontier ({width} squares) on {board.label}",
    )


def peak_rss_bytes() -> int:
    """Peak resident memory of this process and its waited-for children (bytes; Linux reports
    kilobytes)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) * 1024


def dp_count(
    board: Board,
    start: Square | None = None,
    *,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
    checkpoint_dir: str | Path | None = None,
    progress: Progress | None = None,
    class_done: ClassDone | None = None,
    halves: bool | None = None,
) -> CountReport:
    """Count the directed open tours from every square (or ``start``'s class) by the DP.

    One square per symmetry class of the majority colour is counted (squares of the minority
    colour of an odd board start no open tour: a tour alternates colours, so both its ends are
    of the majority colour). With ``halves`` (default: on boards of up to
    :data:`HALVES_MAX_SQUARES` squares) one lower half is run and met with each class's upper
    half, at the same cut whether one class or all are counted
    (:func:`~knights_tour.counting.frontier.halves_cut`; boards too short for halves are
    swept whole); otherwise each class is one full sweep (on 7×7 the lower half outgrows the
    full sweeps: docs/counts). The sweeps are planned by
    :func:`~knights_tour.counting.frontier.count_plan` and run by
    :func:`~knights_tour.counting.frontier_run.run_plan`.

    Returns
    -------
    CountReport
        ``nodes`` holds the DP's transitions; ``extra`` the method, per-class figures
        (``dp_classes``), ``wall_s`` and ``peak_rss_bytes``.

    Raises
    ------
    InvalidJobError, ArithmeticError, MemoryError
        As in :func:`knights_tour.counting.frontier_run.count_paths`.
    """
    began = time.perf_counter()
    if halves is None:
        halves = board.n_squares <= HALVES_MAX_SQUARES
    plan = frontier.count_plan(board, start, halves=halves)
    opts = SweepOptions(memory_bytes=memory_bytes, checkpoint_dir=checkpoint_dir, progress=progress)
    run = run_plan(plan, opts, class_done)
    wall = time.perf_counter() - began
    extra = CountExtra(
        method="frontier DP",
        dp_classes=run.figures,
        wall_s=round(wall, 3),
        peak_rss_bytes=peak_rss_bytes(),
        lower_halves=[[ls.to_dict() for ls in low.layers] for low in run.lowers],
        trunks=[[ls.to_dict() for ls in tr.layers] for tr in run.trunks],
    )
    return dp_report(
        board, plan.classes, run.counts, len(plan.classes), run.transitions, wall, extra
    )


def dp_report(
    board: Board,
    classes: dict[Square, list[Square]],
    class_counts: dict[Square, int],
    subjobs: int,
    transitions: int,
    elapsed_s: float,
    extra: CountExtra,
) -> CountReport:
    """The report of an open count by the frontier DP, in one process or on the workers:
    each class's count (``class_counts``, by representative) copied to the squares of its
    class (``classes``), with its symmetry note; ``transitions`` stand for the search nodes,
    ``elapsed_s`` is the wall time (seconds), ``extra`` the method's figures."""
    note = (
        f"symmetry: counted {len(classes)} representative square(s) by the frontier DP, "
        f"copied to the {sum(len(m) for m in classes.values())} square(s) of their classes"
    )
    return CountReport(
        board.rows,
        board.cols,
        False,
        _grid(board, classes, class_counts),
        class_counts,
        dict(classes),
        subjobs=subjobs,
        depth=0,
        nodes=transitions,
        elapsed_s=elapsed_s,
        symmetry_note=note,
        extra=extra,
    )


def _grid(
    board: Board, classes: dict[Square, list[Square]], counts: dict[Square, int]
) -> list[list[int | None]]:
    """The per-square grid: each class's count copied to its squares, None elsewhere."""
    grid: list[list[int | None]] = [[None] * board.cols for _ in range(board.rows)]
    for rep, members in classes.items():
        for r, c in members:
            grid[r][c] = counts[rep]
    return grid


def dp_uses_halves(board: Board) -> bool:
    """True if :func:`dp_count`'s default on ``board`` meets halves (up to
    :data:`HALVES_MAX_SQUARES` squares, where :func:`~knights_tour.counting.frontier.halves_cut`
    finds a cut), False where it runs full sweeps: what its cost is estimated by."""
    return board.n_squares <= HALVES_MAX_SQUARES and frontier.halves_cut(board) is not None


def count_paths_trivial(board: Board, square: Square) -> bool:
    """True if the tours from ``square`` are counted without search
    (:func:`knights_tour.counting.frontier.trivial_count`)."""
    return frontier.trivial_count(board, square) is not None


__all__ = [
    "ENUMERATION_MAX_SQUARES",
    "METHODS",
    "MethodChoice",
    "choose_method",
    "dp_width",
    "dp_count",
    "dp_report",
    "dp_uses_halves",
    "peak_rss_bytes",
    "count_paths_trivial",
]

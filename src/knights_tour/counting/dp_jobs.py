"""A frontier-DP count as separate jobs, for workers: one per trunk group and one per searched
start class (the split :func:`knights_tour.counting.method.dp_count` runs in one process with
``halves=False``). :func:`dp_plan` lists the jobs and which trunk layer each class waits for;
:func:`dp_run_trunk` and :func:`dp_run_tail` run one, reading and writing nothing but the
checkpoint directory, so they may run in any process that sees it.

Pure: no Celery, no Redis.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from knights_tour.board import Board, Square
from knights_tour.counting import frontier
from knights_tour.counting.frontier_run import (
    DEFAULT_MEMORY_BYTES,
    Progress,
    SweepOptions,
    SweepResult,
)
from knights_tour.counting.frontier_store import sweep_dir
from knights_tour.counting.method import (
    classes_to_count,
    count_paths_trivial,
    searched_classes,
    trivial_class_counts,
)
from knights_tour.counting.records import ClassFigures
from knights_tour.counting.trunks import (
    TrunkMember,
    class_from_trunk,
    run_trunk,
    trunk_groups,
    trunk_plan,
)
from knights_tour.errors import InvalidJobError


@dataclass(frozen=True)
class DpTail:
    """One searched start class of a DP count as a job: its ``representative``, the trunk
    group it continues (``group``, an index into :attr:`DpPlan.trunks`, or -1 for none) and the
    trunk step whose kept layer it starts from (``after``; -1: from the first layer)."""

    representative: Square
    group: int
    after: int


@dataclass(frozen=True)
class DpPlan:
    """The jobs of a DP count by trunks (:func:`dp_plan`): ``trunks`` (per group, the steps it
    keeps on disk; a group whose every start is taken first has none and no job),
    ``tails`` (one per searched class) and ``trivial`` (the counts of the classes found
    without search, ``trivial_figures`` their report entries), with the count's ``classes``
    (representative -> its squares)."""

    board: Board
    classes: dict[Square, list[Square]]
    trivial: dict[Square, int]
    trunks: list[tuple[int, ...]]
    tails: list[DpTail]
    trivial_figures: list[ClassFigures]


def dp_plan(board: Board, start: Square | None = None) -> DpPlan:
    """The jobs of the DP count of ``board`` (or of ``start``'s class only) by trunks: the
    split :func:`~knights_tour.counting.method.dp_count` with ``halves=False`` runs in one
    process, as separate jobs (a tail may run once its trunk has kept the layer ``after``).
    Run them with :func:`dp_run_trunk` and :func:`dp_run_tail` given the same ``start``.

    Raises
    ------
    InvalidSquareError
        If ``start`` is off the board.
    """
    classes = classes_to_count(board, start)
    searched = [rep for rep in classes if not count_paths_trivial(board, rep)]
    easy = [rep for rep in classes if rep not in searched]
    trivial, trivial_figures = trivial_class_counts(board, easy)
    trunks: list[tuple[int, ...]] = []
    tails: list[DpTail] = []
    for i, (_, members) in enumerate(trunk_groups(board, searched)):
        trunks.append(tuple(sorted({s - 1 for _, _, s in members if s > 0})))
        for rep, _, s in sorted(members, key=lambda m: m[2]):
            tails.append(DpTail(rep, i if s > 0 else -1, s - 1))
    return DpPlan(board, classes, trivial, trunks, tails, trivial_figures)


def _group(board: Board, start: Square | None, index: int) -> tuple[int, list[TrunkMember]]:
    return trunk_groups(board, searched_classes(board, start))[index]


def dp_run_trunk(
    board: Board,
    start: Square | None,
    group: int,
    *,
    checkpoint_dir: str | Path,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
    progress: Progress | None = None,
) -> SweepResult | None:
    """Run trunk ``group`` of :func:`dp_plan` ``(board, start)``, keeping the layer before each
    of its starts on disk (``kept-K.npy`` under ``checkpoint_dir``); resumes from its last
    checkpoint. None when it needs no run (its classes all counted on disk, or none needs
    it). An exception raised by ``progress`` (called after each layer is checkpointed)
    stops it there; the same call later resumes from that layer.

    Raises
    ------
    IndexError
        If there is no such group.
    ArithmeticError, MemoryError
        As in :func:`knights_tour.counting.frontier_run.run_sweep`.
    """
    colour, members = _group(board, start, group)
    opts = SweepOptions(memory_bytes=memory_bytes, checkpoint_dir=checkpoint_dir, progress=progress)
    return run_trunk(members, colour, opts)


def dp_run_tail(
    board: Board,
    start: Square | None,
    square: Square,
    *,
    checkpoint_dir: str | Path,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
    progress: Progress | None = None,
) -> tuple[int, ClassFigures]:
    """Count the class of ``square`` (a representative of :func:`dp_plan` ``(board, start)``):
    its own sweep from the layer its trunk kept on disk, else from its own checkpoints or the
    first layer (right, only slower). ``(count, figures)`` as
    :func:`~knights_tour.counting.method.dp_count`'s ``dp_classes`` entries. ``progress`` as
    in :func:`dp_run_trunk`.

    Raises
    ------
    InvalidJobError
        If ``square`` is not a searched representative of that count.
    ArithmeticError, MemoryError
        As in :func:`knights_tour.counting.frontier_run.run_sweep`.
    """
    opts = SweepOptions(memory_bytes=memory_bytes, checkpoint_dir=checkpoint_dir, progress=progress)
    swept = class_from_trunk(board, searched_classes(board, start), (square[0], square[1]), opts)
    if swept is None:
        raise InvalidJobError(f"{square} is not a searched start class of this DP count")
    return swept


def dp_sweep_dirs(board: Board, start: Square | None, checkpoint_dir: str | Path) -> list[Path]:
    """The folders under ``checkpoint_dir`` where the sweeps of :func:`dp_plan` ``(board,
    start)`` keep their layers: each trunk's and each searched class's own full sweep (a class's
    full sweep is the same plan in every count that searches it, so counts of the whole grid
    and of one start share it). Whether they exist or not; nothing is created."""
    root = Path(checkpoint_dir)
    searched = searched_classes(board, start)
    dirs: list[Path] = []
    for colour, members in trunk_groups(board, searched):
        if max(s for _, _, s in members) > 0:
            dirs.append(sweep_dir(root, trunk_plan(members, colour)))
        dirs.extend(sweep_dir(root, frontier.full_sweep(g, s)) for _, g, s in members)
    return dirs


__all__ = ["DpPlan", "DpTail", "dp_plan", "dp_run_trunk", "dp_run_tail", "dp_sweep_dirs"]

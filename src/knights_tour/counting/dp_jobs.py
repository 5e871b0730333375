"""A frontier-DP count as separate jobs, for workers: one per trunk group and one per searched
start class (the split :func:`knights_tour.counting.method.dp_count` runs in one process with
``halves=False``). :func:`dp_plan` lists the jobs and which trunk layer each class waits for;
:func:`dp_run_trunk` and :func:`dp_run_tail` run one, reading and writing nothing but the
checkpoint directory, so they may run in any process that sees it.

Pure: no Celery, no Redis.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from knights_tour.board import Board, Square
from knights_tour.counting.frontier import TrunkGroup, count_plan
from knights_tour.counting.frontier_run import (
    SweepOptions,
    SweepResult,
    class_from_trunk,
    run_trunk,
    trivial_figures,
)
from knights_tour.counting.frontier_store import sweep_dir
from knights_tour.counting.records import ClassFigures, DpSubJob
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
    """The jobs of a DP count by trunks (:func:`dp_plan`) of ``board`` (``start``'s class
    only when given): ``trunks`` (per group, the steps it keeps on disk; a group whose every
    start is taken first has none and no job), ``tails`` (one per searched class) and
    ``trivial`` (the counts of the classes found without search), with the count's
    ``classes`` (representative -> its squares) and its trunk ``groups``
    (:attr:`knights_tour.counting.frontier.CountPlan.groups`)."""

    board: Board
    start: Square | None
    classes: dict[Square, list[Square]]
    trivial: dict[Square, int]
    trunks: list[tuple[int, ...]]
    tails: list[DpTail]
    groups: list[TrunkGroup]

    @property
    def trivial_figures(self) -> list[ClassFigures]:
        """The report entries of the classes found without search."""
        return trivial_figures(self.trivial)

    def subjobs(self, memory_bytes: int) -> list[DpSubJob]:
        """The sub-jobs: the trunks that run (a group whose starts are all taken first has
        none), then one per searched class, each bounded by ``memory_bytes`` a table."""
        board, start = self.board, self.start
        items = [
            DpSubJob.of(board, start, "trunk", group=i, memory_bytes=memory_bytes)
            for i, keep in enumerate(self.trunks)
            if keep
        ]
        items += [
            DpSubJob.of(
                board,
                start,
                "tail",
                group=t.group,
                square=t.representative,
                after=t.after,
                memory_bytes=memory_bytes,
            )
            for t in self.tails
        ]
        return items

    def sweep_dirs(self, checkpoint_dir: str | Path) -> list[Path]:
        """The folders under ``checkpoint_dir`` where the count's sweeps keep their layers:
        each trunk's and each searched class's own full sweep (a class's full sweep is the
        same plan in every count that searches it, so counts of the whole grid and of one
        start share it). Whether they exist or not; nothing is created."""
        root = Path(checkpoint_dir)
        trunks = [g.trunk for g in self.groups if g.trunk is not None]
        return [sweep_dir(root, p) for p in [*trunks, *(p for g in self.groups for p in g.sweeps)]]

    def remove_sweeps(self, checkpoint_dir: str | Path) -> int:
        """Remove the folders of :meth:`sweep_dirs` that exist (a count started afresh);
        returns how many.

        Raises
        ------
        OSError
            If a folder cannot be removed.
        """
        found = [d for d in self.sweep_dirs(checkpoint_dir) if d.is_dir()]
        for folder in found:
            shutil.rmtree(folder)
        return len(found)


def dp_count_id(plan: DpPlan) -> str:
    """``7x7-open-dp-all`` or ``7x7-open-dp-sq0.0`` (its start's representative): the id of
    the count ``plan`` describes (apart from the enumeration's ids, whose sub-jobs differ)."""
    if plan.start is None:
        return f"{plan.board.label}-open-dp-all"
    rep = next(iter(plan.classes))
    return f"{plan.board.label}-open-dp-sq{rep[0]}.{rep[1]}"


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
    plan = count_plan(board, start)
    tails: list[DpTail] = []
    for i, group in enumerate(plan.groups):
        for rep, _, s in sorted(group.members, key=lambda m: m[2]):
            tails.append(DpTail(rep, i if s > 0 else -1, s - 1))
    trunks = [group.keep for group in plan.groups]
    return DpPlan(board, start, plan.classes, plan.trivial, trunks, tails, plan.groups)


def dp_run_trunk(
    board: Board, start: Square | None, group: int, opts: SweepOptions
) -> SweepResult | None:
    """Run trunk ``group`` of :func:`dp_plan` ``(board, start)``, keeping the layer before each
    of its starts on disk (``kept-K.npy`` under ``opts["checkpoint_dir"]``, which must be a
    folder); resumes from its last checkpoint. None when it needs no run (its classes all
    counted on disk, or none needs it). An exception raised by ``opts["progress"]`` (called
    after each layer is checkpointed) stops it there; the same call later resumes from that
    layer.

    Raises
    ------
    IndexError
        If there is no such group.
    ArithmeticError, MemoryError
        As in :func:`knights_tour.counting.frontier_run.run_sweep`.
    """
    return run_trunk(count_plan(board, start).groups[group], opts)


def dp_run_tail(
    board: Board, start: Square | None, square: Square, opts: SweepOptions
) -> tuple[int, ClassFigures]:
    """Count the class of ``square`` (a representative of :func:`dp_plan` ``(board, start)``):
    its own sweep from the layer its trunk kept on disk, else from its own checkpoints or the
    first layer (right, only slower). ``(count, figures)`` as
    :func:`~knights_tour.counting.method.dp_count`'s ``dp_classes`` entries. ``opts`` as in
    :func:`dp_run_trunk`.

    Raises
    ------
    InvalidJobError
        If ``square`` is not a searched representative of that count.
    ArithmeticError, MemoryError
        As in :func:`knights_tour.counting.frontier_run.run_sweep`.
    """
    swept = class_from_trunk(count_plan(board, start).groups, (square[0], square[1]), opts)
    if swept is None:
        raise InvalidJobError(f"{square} is not a searched start class of this DP count")
    return swept


__all__ = ["DpPlan", "DpTail", "dp_count_id", "dp_plan", "dp_run_trunk", "dp_run_tail"]

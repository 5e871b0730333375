"""The frontier DP's shared trunks: the start classes of a count grouped by the sweep they
share until their square is taken, the trunk sweep that serves a group (keeping the layer before
each start on disk), and a class's own sweep continued from its trunk's layer.

A start ``s`` counted on its *late* image (``s`` taken as late as possible) sees the same sweep
as every other start of its colour on the same image graph until ``s`` is taken; one trunk
(:func:`knights_tour.counting.frontier.trunk_sweep`) therefore serves them all, and each class only
sweeps its own last layers. Used in one process by :mod:`knights_tour.counting.method` and as
separate jobs by :mod:`knights_tour.counting.dp_jobs`.

Pure: no Celery, no Redis.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from knights_tour.board import Board, Square
from knights_tour.counting import frontier
from knights_tour.counting.frontier_run import SweepOptions, SweepResult, run_sweep
from knights_tour.counting.frontier_store import Checkpoints, sweep_done
from knights_tour.counting.records import ClassFigures

TrunkMember = tuple[Square, frontier.Graph, int]
"""A start class in a trunk's group: representative, its late image graph, its step there."""


def trunk_groups(board: Board, reps: list[Square]) -> list[tuple[int, list[TrunkMember]]]:
    """The classes grouped by trunk: every start of one colour (on the same image graph)
    sees the same sweep until its square is taken. ``[(colour, members)]``."""
    groups: dict[tuple[Any, ...], list[TrunkMember]] = {}
    for rep in reps:
        g = frontier.image_graph(board, rep, late=True)
        s = g.square.index(rep)
        groups.setdefault((g.nbrs, g.colour, g.colour[s]), []).append((rep, g, s))
    return [(key[2], members) for key, members in groups.items()]


def trunk_plan(members: list[TrunkMember], colour: int) -> frontier.SweepPlan:
    """The trunk of a group: to its latest start, serving every start of the group."""
    last = max(s for _, _, s in members)
    cands = frozenset(s for _, _, s in members)
    return frontier.trunk_sweep(members[0][1], colour, last, cands)


def group_sweeps(groups: list[tuple[int, list[TrunkMember]]]) -> list[frontier.SweepPlan]:
    """The sweeps of the classes grouped by :func:`trunk_groups`: each group's trunk (where
    one runs: a start is taken after the first step) and each class's own full sweep."""
    plans = []
    for colour, members in groups:
        if max(s for _, _, s in members) > 0:
            plans.append(trunk_plan(members, colour))
        plans.extend(frontier.full_sweep(g, s) for _, g, s in members)
    return plans


def run_trunk(members: list[TrunkMember], colour: int, opts: SweepOptions) -> SweepResult | None:
    """Run a group's trunk, keeping the layer before each start (on disk with checkpoints);
    None when none is needed (every class of the group counted on disk, or all taken
    first)."""
    ckpt = opts["checkpoint_dir"]
    plans = [frontier.full_sweep(g, s) for _, g, s in members]
    if ckpt is not None and all(sweep_done(p, ckpt) for p in plans):
        return None
    if max(s for _, _, s in members) == 0:
        return None
    keep = {s - 1 for _, _, s in members if s > 0}
    return run_sweep(trunk_plan(members, colour), keep=keep, **opts)


def class_sweep(
    rep: Square, g: frontier.Graph, s: int, initial: np.ndarray | None, opts: SweepOptions
) -> tuple[int, ClassFigures]:
    """A class's own sweep from the trunk's layer ``initial`` (before step ``s``); without it
    (a trunk resumed past this start without keeping its layer) the class's own checkpoints
    resume it, or it is swept from the first layer. ``(count, figures)``."""
    first = s if initial is not None else 0
    res = run_sweep(frontier.full_sweep(g, s), first_step=first, initial=initial, **opts)
    count = int(res.counts[0]) if len(res.keys) else 0
    how = f"full sweep from the trunk's layer {s}" if first else "full sweep"
    if res.resumed_from >= 0:
        how += f", resumed from its checkpoint after step {res.resumed_from}"
    return count, ClassFigures(
        representative=rep,
        count=count,
        method=how,
        peak_states=res.peak_states,
        transitions=res.transitions,
        layers=[ls.to_dict() for ls in res.layers],
    )


def class_from_trunk(
    board: Board, searched: list[Square], rep: Square, opts: SweepOptions
) -> tuple[int, ClassFigures] | None:
    """The class of ``rep`` (one of the representatives ``searched``, grouped by trunk as
    :func:`trunk_groups` does) swept by :func:`class_sweep` from the layer its trunk kept on
    disk under ``opts["checkpoint_dir"]`` (without it, from its own checkpoints or the first
    layer); None if ``rep`` is not among ``searched``."""
    for colour, members in trunk_groups(board, searched):
        for r, g, s in members:
            if r == rep:
                initial = None
                if s > 0:
                    root = opts["checkpoint_dir"]
                    assert root is not None  # a trunk's layer is kept on disk only
                    trunk = Checkpoints(Path(root), trunk_plan(members, colour))
                    initial = trunk.load_kept(s - 1)
                return class_sweep(r, g, s, initial, opts)
    return None


__all__ = [
    "TrunkMember",
    "trunk_groups",
    "trunk_plan",
    "group_sweeps",
    "run_trunk",
    "class_sweep",
    "class_from_trunk",
]

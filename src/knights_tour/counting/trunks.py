"""Running the frontier DP's shared trunks: the trunk sweep that serves a group of start classes
(:class:`knights_tour.counting.frontier.TrunkGroup`, keeping the layer before each start on disk),
and a class's own sweep continued from its trunk's layer. Used in one process by
:mod:`knights_tour.counting.method` and as separate jobs by :mod:`knights_tour.counting.dp_jobs`.

Pure: no Celery, no Redis.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from knights_tour.board import Square
from knights_tour.counting.frontier import SweepPlan, TrunkGroup
from knights_tour.counting.frontier_run import SweepOptions, SweepResult, run_sweep
from knights_tour.counting.frontier_store import Checkpoints, sweep_done
from knights_tour.counting.records import ClassFigures


def run_trunk(group: TrunkGroup, opts: SweepOptions) -> SweepResult | None:
    """Run a group's trunk, keeping the layer before each start (on disk with checkpoints);
    None when none is needed (every class of the group counted on disk, or all taken
    first)."""
    ckpt = opts["checkpoint_dir"]
    if ckpt is not None and all(sweep_done(p, ckpt) for p in group.sweeps):
        return None
    if group.trunk is None:
        return None
    return run_sweep(group.trunk, keep=set(group.keep), **opts)


def class_sweep(
    rep: Square, plan: SweepPlan, s: int, initial: np.ndarray | None, opts: SweepOptions
) -> tuple[int, ClassFigures]:
    """A class's own sweep ``plan`` from the trunk's layer ``initial`` (before step ``s``);
    without it (a trunk resumed past this start without keeping its layer) the class's own
    checkpoints resume it, or it is swept from the first layer. ``(count, figures)``."""
    first = s if initial is not None else 0
    res = run_sweep(plan, first_step=first, initial=initial, **opts)
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
    groups: list[TrunkGroup], rep: Square, opts: SweepOptions
) -> tuple[int, ClassFigures] | None:
    """The class of ``rep`` (a member of one of ``groups``) swept by :func:`class_sweep` from
    the layer its trunk kept on disk under ``opts["checkpoint_dir"]`` (without it, from its own
    checkpoints or the first layer); None if ``rep`` is in no group."""
    for group in groups:
        for (r, _, s), plan in zip(group.members, group.sweeps, strict=True):
            if r == rep:
                initial = None
                if s > 0:
                    root = opts["checkpoint_dir"]
                    assert root is not None and group.trunk is not None  # kept on disk only
                    initial = Checkpoints(Path(root), group.trunk).load_kept(s - 1)
                return class_sweep(r, plan, s, initial, opts)
    return None


__all__ = ["run_trunk", "class_sweep", "class_from_trunk"]

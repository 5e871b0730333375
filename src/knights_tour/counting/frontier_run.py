"""Running the frontier DP: layers in bounded memory, checkpoints, the count per start square,
and the sweeps of a whole count's plan.

Planning is :mod:`knights_tour.counting.frontier`, the compiled steps
:mod:`knights_tour.counting.frontier_kernel` and
:mod:`knights_tour.counting.frontier_join`. A *layer* is the set of states after a step:
two ``uint64`` arrays (packed keys, counts), no order. Each step expands a layer into an
open-addressing table (``16`` bytes a slot, at most 70 % full) and compacts it.

Memory: when the next layer's table would pass ``memory_bytes``, the step is redone in more
*parts*: pass ``j`` keeps only the successors whose key hashes to part ``j``, so one table holds
one part at a time (the input is read once per part). With a ``checkpoint_dir`` every layer is
written there (one ``.npy`` file of ``(key, count)`` rows per part, then a manifest, atomically)
and the next step reads it memory-mapped, so the previous layer is on disk, not in the heap; a
run that is killed resumes from the last complete layer (the manifest names the plan, so a
different count never resumes from it; files: :mod:`knights_tour.counting.frontier_store`).

A count's plan (:class:`knights_tour.counting.frontier.CountPlan`) runs here too: in one process
every sweep of it (:func:`run_plan`), or piece by piece as the workers' jobs do
(:mod:`knights_tour.counting.dp_jobs`): a group's trunk (:func:`run_trunk`), keeping the layer
before each of its starts, and a class's own sweep continued from it (:func:`class_from_trunk`).

Pure: no Celery, no Redis.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Required, TypedDict

import numpy as np
from msgspec import UNSET

from knights_tour.board import Board, Square
from knights_tour.counting import frontier
from knights_tour.counting import frontier_join as fj
from knights_tour.counting import frontier_kernel as fk
from knights_tour.counting.frontier_store import Checkpoints, LayerStat, plan_digest, sweep_done
from knights_tour.counting.records import ClassFigures
from knights_tour.errors import InvalidJobError

DEFAULT_MEMORY_BYTES = 8 * 2**30
"""Default bound on one step's hash table (bytes)."""
MAX_FILL = 0.7
"""Largest fraction of a table's slots in use before it grows."""
ENTRY_BYTES = 16


@dataclass
class SweepResult:
    """The last layer of a sweep (``keys``, ``counts``) and its per-step figures."""

    name: str
    keys: np.ndarray
    counts: np.ndarray
    layers: list[LayerStat] = field(default_factory=list)
    resumed_from: int = -1
    kept: dict[int, np.ndarray] = field(default_factory=dict)

    @property
    def peak_states(self) -> int:
        return max((ls.states for ls in self.layers), default=len(self.keys))

    @property
    def transitions(self) -> int:
        return sum(ls.transitions for ls in self.layers)

    @property
    def seconds(self) -> float:
        return sum(ls.seconds for ls in self.layers)


Progress = Callable[[str, LayerStat, int], None]
"""``progress(sweep_name, layer_stat, n_steps)`` after every step."""


class SweepOptions(TypedDict, total=False):
    """How every sweep of a count runs: :func:`run_sweep`'s keywords of the same names (its
    defaults where left out)."""

    checkpoint_dir: Required[str | Path | None]
    memory_bytes: int
    progress: Progress | None


def _expand_part(
    plan: frontier.SweepPlan,
    k: int,
    inputs: list[np.ndarray],
    part: int,
    nparts: int,
    max_logcap: int,
) -> tuple[np.ndarray, int] | None:
    """One part of step ``k``: its compacted ``(n, 2)`` rows and the transitions generated, or
    None if its table would need more than ``2**max_logcap`` slots."""
    est = sum(len(a) for a in inputs) * 2 // nparts + 1024
    logcap = min(max_logcap, max(10, int(np.ceil(np.log2(est / MAX_FILL)))))
    tkeys = np.full(1 << logcap, fk.EMPTY, dtype=np.uint64)
    tcounts = np.zeros(1 << logcap, dtype=np.uint64)
    fill = 0
    trans = 0
    for arr in inputs:
        keys = np.ascontiguousarray(arr[:, 0])
        counts = np.ascontiguousarray(arr[:, 1])
        i = 0
        while i < len(keys):
            i, fill, tr, overflow = fk.expand(
                keys,
                counts,
                i,
                k,
                *plan.tables,
                part,
                nparts,
                tkeys,
                tcounts,
                logcap,
                fill,
                int(MAX_FILL * (1 << logcap)),
            )
            trans += tr
            if overflow:
                raise ArithmeticError(f"{plan.name} step {k}: a path count passed 2**64")
            if i < len(keys):
                if logcap >= max_logcap:
                    return None
                logcap += 1
                tkeys, tcounts = fk.rehash(tkeys, tcounts, logcap)
    ok, oc = fk.compact(tkeys, tcounts, fill)
    return np.stack([ok, oc], axis=1), trans


def run_sweep(
    plan: frontier.SweepPlan,
    *,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
    checkpoint_dir: str | Path | None = None,
    progress: Progress | None = None,
    first_step: int = 0,
    initial: np.ndarray | None = None,
    keep: Collection[int] = (),
) -> SweepResult:
    """Run every step of ``plan`` from the empty start state (or its last checkpoint).

    Parameters
    ----------
    plan : SweepPlan
    memory_bytes : int
        Bound on one step's hash table in bytes (``16`` bytes a slot); a step whose next layer
        needs more is split into parts (passes over the input), doubling the parts until each
        fits.
    checkpoint_dir : path, optional
        Write every layer there and resume from the last one found.
    progress : callable, optional
        Called after every step (see :data:`Progress`).
    first_step, initial : int, (n, 2) uint64 array
        Start at step ``first_step`` from the layer ``initial`` (``(key, count)`` rows, e.g. a
        trunk's layer) instead of step 0 from the empty state.
    keep : steps
        Also return the layers after these steps (:attr:`SweepResult.kept`); with a
        checkpoint directory they are kept there as ``kept-K.npy``.

    Returns
    -------
    SweepResult
        Its ``keys``/``counts`` are the last layer.

    Raises
    ------
    ArithmeticError
        If a count passes ``2**64``.
    MemoryError
        If one part would need a table above ``memory_bytes`` even with 4096 parts.
    """
    max_logcap = max(12, int(np.floor(np.log2(max(memory_bytes, 1) / ENTRY_BYTES))))
    store = Checkpoints(Path(checkpoint_dir), plan) if checkpoint_dir is not None else None
    start = np.array([[0, 1]], dtype=np.uint64) if initial is None else initial
    inputs, stats, first, resumed, kept = _resume(store, [start], first_step, keep)
    nparts = 1
    for k in range(first, plan.n_steps):
        began = time.perf_counter()
        parts, trans, nparts = _run_step(plan, k, inputs, nparts, max_logcap, memory_bytes)
        stat = LayerStat(k, sum(len(p) for p in parts), trans, time.perf_counter() - began, nparts)
        stats.append(stat)
        if store is None:
            inputs = parts
            if k in keep:
                kept[k] = np.concatenate(inputs)
        else:
            if k in keep:  # before the layer's manifest: a sweep resumed past k finds it
                kept[k] = store.save_kept(k, parts)
            inputs = store.save(k, parts, stats)
        if progress is not None:
            progress(plan.name, stat, plan.n_steps)
        nparts = max(1, nparts // 2)
    layer = np.concatenate(inputs) if len(inputs) > 1 else np.asarray(inputs[0])
    return SweepResult(
        plan.name,
        np.ascontiguousarray(layer[:, 0]),
        np.ascontiguousarray(layer[:, 1]),
        stats,
        resumed,
        kept,
    )


def _resume(
    store: Checkpoints | None, inputs: list[np.ndarray], first: int, keep: Collection[int]
) -> tuple[list[np.ndarray], list[LayerStat], int, int, dict[int, np.ndarray]]:
    """Where a sweep starts: ``(inputs, stats, first step, step resumed from or -1, kept
    layers)``: from the last checkpoint in ``store`` unless it is behind step ``first``, else
    from ``inputs`` at ``first``."""
    stats: list[LayerStat] = []
    resumed = -1
    kept: dict[int, np.ndarray] = {}
    if store is not None:
        found = store.load_last()
        if found is not None and found[0] + 1 >= first:  # never behind the given layer
            resumed, inputs, stats = found
            first = resumed + 1
        kept = {k: got for k in keep if (got := store.load_kept(k)) is not None}
    return inputs, stats, first, resumed, kept


def _run_step(
    plan: frontier.SweepPlan,
    k: int,
    inputs: list[np.ndarray],
    nparts: int,
    max_logcap: int,
    memory_bytes: int,
) -> tuple[list[np.ndarray], int, int]:
    """Step ``k`` in ``nparts`` parts, doubling them until each part's table fits in
    ``2**max_logcap`` slots; returns ``(parts, transitions, parts used)``.

    Raises
    ------
    MemoryError
        If a part does not fit even in 4096 parts.
    """
    while True:
        parts: list[np.ndarray] = []
        trans = 0
        for j in range(nparts):
            got = _expand_part(plan, k, inputs, j, nparts, max_logcap)
            if got is None:
                break
            parts.append(got[0])
            trans = got[1]
        else:
            return parts, trans, nparts
        nparts *= 2
        if nparts > 4096:
            raise MemoryError(f"{plan.name} step {k}: a part exceeds {memory_bytes} bytes")


def join_halves(
    g: frontier.Graph,
    upper: frontier.SweepPlan,
    lower: frontier.SweepPlan,
    up: SweepResult,
    low: SweepResult,
) -> tuple[int, int]:
    """The number of Hamiltonian paths made of an upper and a lower state (see
    :mod:`knights_tour.counting.frontier_join`); returns ``(count, pairs_checked)``.

    Raises
    ------
    ArithmeticError
        If the sum passes ``2**64``.
    """
    ufr = upper.frontier_after[-1]
    lfr = lower.frontier_after[-1]
    if sorted(ufr) != sorted(lfr):
        raise InvalidJobError("the two halves do not end on the same interface")
    slot_map = np.array([ufr.index(v) for v in lfr], dtype=np.int64)
    lkeys = fj.reslot(low.keys, len(lfr), slot_map)
    sig = fj.signatures(lkeys, len(ufr))
    order = np.argsort(sig, kind="stable")
    sig, lkeys, lcounts = sig[order], lkeys[order], low.counts[order]
    logcap = max(4, int(np.ceil(np.log2(2 * len(np.unique(sig)) + 1))))
    gkeys, gfirst, gend = fj.group_index(sig, logcap)
    need = frontier.end_colours(g)
    assert need is not None
    end_ok = np.array([need[g.colour[v]] > 0 for v in ufr], dtype=np.bool_)
    total, pairs, overflow = fj.join(
        up.keys, up.counts, len(ufr), lkeys, lcounts, gkeys, gfirst, gend, logcap, end_ok
    )
    if overflow:
        raise ArithmeticError("the joined path count passed 2**64")
    return int(total), int(pairs)


@dataclass
class DPCount:
    """A frontier-DP count: undirected Hamiltonian paths with an end on ``start`` (= directed
    open tours from ``start``), or all undirected paths when ``start`` is None."""

    board: Board
    start: Square | None
    paths: int
    method: str
    sweeps: list[SweepResult]
    pairs: int = 0
    elapsed_s: float = 0.0

    @property
    def peak_states(self) -> int:
        return max((s.peak_states for s in self.sweeps), default=0)

    @property
    def transitions(self) -> int:
        return sum(s.transitions for s in self.sweeps)

    def to_dict(self) -> dict[str, object]:
        """The count as a JSON-ready dict: start, paths, method, pairs, elapsed_s, peak_states,
        transitions and each sweep's layers."""
        return {
            "start": None if self.start is None else list(self.start),
            "paths": self.paths,
            "method": self.method,
            "pairs": self.pairs,
            "elapsed_s": round(self.elapsed_s, 3),
            "peak_states": self.peak_states,
            "transitions": self.transitions,
            "sweeps": {s.name: [ls.to_dict() for ls in s.layers] for s in self.sweeps},
        }


def count_paths(
    board: Board,
    start: Square | None = None,
    *,
    halves: bool = False,
    cut: int | None = None,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
    checkpoint_dir: str | Path | None = None,
    progress: Progress | None = None,
) -> DPCount:
    """Count the open knight's tours of ``board`` from ``start`` by the frontier DP.

    Parameters
    ----------
    board : Board
    start : (row, col), optional
        The fixed end; None counts undirected Hamiltonian paths (half the directed tours).
    halves : bool
        Meet two halves in the middle (:func:`frontier.half_sweeps`) instead of one full sweep.
    cut : int, optional
        With ``halves``: the rows of the image above the cut (default
        :func:`frontier.default_cut`).
    memory_bytes, checkpoint_dir, progress
        As in :func:`run_sweep`.

    Returns
    -------
    DPCount
        ``paths`` = directed open tours from ``start`` (or undirected paths if no start).

    Raises
    ------
    InvalidSquareError
        If ``start`` is off the board.
    InvalidJobError
        If the board's frontier is wider than the kernel's keys hold, or the start does not lie
        above ``cut``.
    """
    began = time.perf_counter()
    if start is not None:
        start = board.check_square(start)
    g = frontier.image_graph(board, start, late=not halves)
    s = None if start is None else g.square.index(start)
    trivial = frontier.trivial_paths(g, s)
    if trivial is not None:
        return DPCount(board, start, trivial, "trivial", [], 0, time.perf_counter() - began)
    if halves and cut is None:
        cut = frontier.default_cut(g, s)
    opts = SweepOptions(memory_bytes=memory_bytes, checkpoint_dir=checkpoint_dir, progress=progress)
    if not halves or cut is None:
        res = run_sweep(frontier.full_sweep(g, s), **opts)
        paths = int(res.counts[0]) if len(res.keys) else 0
        return DPCount(
            board, start, paths, "frontier DP, one sweep", [res], 0, time.perf_counter() - began
        )
    upper, lower = frontier.half_sweeps(g, s, cut)
    up = run_sweep(upper, **opts)
    low = run_sweep(lower, **opts)
    paths, pairs = join_halves(g, upper, lower, up, low)
    return DPCount(
        board,
        start,
        paths,
        f"frontier DP, two halves met below row {cut}",
        [up, low],
        pairs,
        time.perf_counter() - began,
    )


def run_trunk(group: frontier.TrunkGroup, opts: SweepOptions) -> SweepResult | None:
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
    rep: Square, plan: frontier.SweepPlan, s: int, initial: np.ndarray | None, opts: SweepOptions
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
    groups: list[frontier.TrunkGroup], rep: Square, opts: SweepOptions
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


def trivial_figures(trivial: dict[Square, int]) -> list[ClassFigures]:
    """The report entries of the classes counted without search (``trivial``: representative
    -> count, :attr:`knights_tour.counting.frontier.CountPlan.trivial`)."""
    return [
        ClassFigures(
            representative=rep, count=count, method="no search (colour or isolated square)"
        )
        for rep, count in trivial.items()
    ]


ClassDone = Callable[[Square, int, float], None]
"""``class_done(representative, count, seconds)`` after each start class."""


@dataclass
class PlanRun:
    """A count's plan run (:func:`run_plan`): each class's count (``counts``, by
    representative) and report entry (``figures``: the trivial classes first, then the others
    in the order counted), and the sweeps that served several classes: the lower halves run
    (``lowers``) and the trunks run (``trunks``)."""

    counts: dict[Square, int]
    figures: list[ClassFigures]
    lowers: list[SweepResult] = field(default_factory=list)
    trunks: list[SweepResult] = field(default_factory=list)

    @property
    def transitions(self) -> int:
        """The DP's transitions over every sweep run: the shared ones and each class's own."""
        shared = sum(sw.transitions for sw in [*self.lowers, *self.trunks])
        return shared + sum(f.transitions for f in self.figures if f.transitions is not UNSET)


def run_plan(
    plan: frontier.CountPlan, opts: SweepOptions, class_done: ClassDone | None = None
) -> PlanRun:
    """Run every sweep of a count's ``plan`` in this process: by halves, one lower half per
    distinct plan (one for all classes at a common cut) met with each class's upper half; by
    trunks, each group's trunk, then its classes' own sweeps from the trunk's layers, latest
    start first. ``opts`` as in :func:`run_sweep`; ``class_done`` is told of each searched
    class as it is counted.

    Raises
    ------
    InvalidJobError, ArithmeticError, MemoryError
        As in :func:`run_sweep` and :func:`join_halves`.
    """
    run = PlanRun(dict(plan.trivial), trivial_figures(plan.trivial))

    def counted(rep: Square, count: int, fig: ClassFigures, began: float) -> None:
        run.counts[rep] = count
        fig.seconds = round(time.perf_counter() - began, 3)
        run.figures.append(fig)
        if class_done is not None:
            class_done(rep, count, time.perf_counter() - began)

    lowers: dict[str, SweepResult] = {}
    for h in plan.halves:
        t0 = time.perf_counter()
        digest = plan_digest(h.lower)
        if digest not in lowers:
            lowers[digest] = run_sweep(h.lower, **opts)
        up = run_sweep(h.upper, **opts)
        count, pairs = join_halves(h.graph, h.upper, h.lower, up, lowers[digest])
        fig = ClassFigures(
            representative=h.representative,
            count=count,
            method=f"two halves met below row {plan.cut} of the image",
            upper_peak_states=up.peak_states,
            pairs=pairs,
            transitions=up.transitions,
        )
        counted(h.representative, count, fig, t0)
    run.lowers = list(lowers.values())
    for group in plan.groups:
        tr = run_trunk(group, opts)
        if tr is not None:
            run.trunks.append(tr)
        classes = zip(group.members, group.sweeps, strict=True)
        for (rep, _, s), sweep in sorted(classes, key=lambda m: -m[0][2]):
            t0 = time.perf_counter()
            initial = tr.kept.get(s - 1) if tr is not None and s > 0 else None
            counted(rep, *class_sweep(rep, sweep, s, initial, opts), t0)
    return run


__all__ = [
    "DEFAULT_MEMORY_BYTES",
    "SweepResult",
    "SweepOptions",
    "DPCount",
    "run_sweep",
    "join_halves",
    "count_paths",
    "run_trunk",
    "class_sweep",
    "class_from_trunk",
    "trivial_figures",
    "ClassDone",
    "PlanRun",
    "run_plan",
]

"""Planning the frontier DP: vertex orders, board images and the kernel's per-step tables.

The frontier (path-structure) dynamic programme counts Hamiltonian paths of the knight's graph
without listing them (method and sources in
:mod:`knights_tour.counting.frontier_kernel`). This module decides *what* the kernel runs:

* a **step** introduces one vertex and decides a set of edges between it and vertices introduced
  before (used by the path or not); every edge of the graph is decided by exactly one step of
  exactly one plan;
* a **sweep** (:class:`SweepPlan`) is a sequence of steps with the tables the kernel reads;
* the count of the paths with one end on ``start`` is either one full sweep (every vertex, all
  its edges to earlier vertices: :func:`full_sweep`) or two **halves** met in the middle
  (:func:`half_sweeps`): the *upper* half takes the rows above a cut and then, deciding only
  the edges that cross the cut, the two rows below it (the *interface*); the *lower* half takes
  the rows below the cut bottom-up, deciding the edges among them. Both end on the interface and
  :func:`knights_tour.counting.frontier_join.join` pairs their states (meet in the middle,
  as in the bidirectional transfer-matrix counts of self-avoiding walks: I. Jensen, 2003).

Symmetry: a board symmetry maps the paths from ``s`` one-to-one onto the paths from its image,
so a start square is counted on the image that puts it highest (in the upper half, and with the
narrow side across for rectangles).

The plan of a whole count (:func:`count_plan`) is made here too: the start classes it counts,
those found without search, and the sweeps of the others, either two halves each met at one
cut common to the board (:func:`halves_cut`) or full sweeps that share *trunks*
(:class:`TrunkGroup`): a start ``s`` counted on its *late* image (``s`` taken as late as
possible) sees the same sweep as every other start of its colour on the same image graph until
``s`` is taken, so one trunk (:func:`trunk_sweep`) serves them all and each class sweeps only
its own last layers. Running a plan is :mod:`knights_tour.counting.frontier_run`. Pure: no
Celery, no Redis.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from knights_tour.board import Board, Square
from knights_tour.counting import frontier_kernel as fk
from knights_tour.counting.symmetry import representative, symmetry_classes
from knights_tour.errors import InvalidJobError

Edge = tuple[int, int]


@dataclass(frozen=True)
class Graph:
    """The knight's graph of a board seen through a symmetry: vertex ``i`` is the square at
    row-major position ``i`` of the *image* board (``rows × cols``), ``square[i]`` the square of
    the original board it stands for."""

    rows: int
    cols: int
    square: tuple[Square, ...]
    nbrs: tuple[tuple[int, ...], ...]
    colour: tuple[int, ...]

    @property
    def n(self) -> int:
        return self.rows * self.cols


def _images(board: Board) -> list[tuple[int, int, Callable[[int, int], Square]]]:
    """``(rows, cols, to_original)`` for every symmetry image of ``board`` with the narrow side
    across (cols <= rows): ``to_original(r, c)`` is the original square shown at ``(r, c)``."""
    R, C = board.rows, board.cols
    out: list[tuple[int, int, Callable[[int, int], Square]]] = []
    for transpose in (False, True):
        rows, cols = (C, R) if transpose else (R, C)
        if cols > rows or (transpose and not board.is_square and R >= C):
            continue
        for flip_r in (False, True):
            for flip_c in (False, True):

                def to_orig(
                    r: int, c: int, t=transpose, fr=flip_r, fc=flip_c, rr=rows, cc=cols
                ) -> Square:
                    r2 = rr - 1 - r if fr else r
                    c2 = cc - 1 - c if fc else c
                    return (c2, r2) if t else (r2, c2)

                out.append((rows, cols, to_orig))
    return out


def _graph(board: Board, rows: int, cols: int, to_orig: Callable[[int, int], Square]) -> Graph:
    square = tuple(to_orig(r, c) for r in range(rows) for c in range(cols))
    index = {sq: i for i, sq in enumerate(square)}
    nbrs = tuple(tuple(sorted(index[m] for m in board.knight_moves(sq))) for sq in square)
    return Graph(rows, cols, square, nbrs, tuple(Board.colour(sq) for sq in square))


@lru_cache(maxsize=16)
def _image_graphs(board: Board) -> tuple[Graph, ...]:
    """The graph of every image of :func:`_images`, in its order: built once per board for the
    start classes of a count, which each pick one."""
    return tuple(_graph(board, rows, cols, to_orig) for rows, cols, to_orig in _images(board))


@lru_cache(maxsize=64)
def image_graph(board: Board, start: Square | None, late: bool = False) -> Graph:
    """The image of ``board`` a count from ``start`` runs on: narrow side across, ``start`` in
    the highest row it can reach (then the leftmost column), or with ``late`` as late in the
    row-major order as it can be (a full sweep that meets the fixed end last keeps fewer states
    on most squares); the identity image when there is no start."""
    best: tuple[int, Graph] | None = None
    for g in _image_graphs(board):
        if start is None:
            return g
        rank = -g.square.index(start) if late else g.square.index(start)
        if best is None or rank < best[0]:
            best = (rank, g)
    assert best is not None
    return best[1]


@dataclass
class SweepPlan:
    """One sweep: steps (vertex introduced, edges decided) and the kernel's tables.

    ``frontier_after[k]`` lists the frontier vertices after step ``k`` in slot order; ``tables``
    is the tuple of arrays :func:`frontier_kernel.expand` takes after ``k`` (``scal, back, o2n,
    newcol, newrem1, adj_static, adj_col, adj_fs``)."""

    name: str
    vertices: list[int]
    tables: tuple[np.ndarray, ...]
    frontier_after: list[list[int]]
    last_is_final: bool

    @property
    def n_steps(self) -> int:
        return len(self.vertices)

    @property
    def max_frontier(self) -> int:
        return max((len(f) for f in self.frontier_after), default=0)


def end_colours(g: Graph) -> tuple[int, int] | None:
    """End-point colours of a Hamiltonian path: (black, white) ends, or None if there is none
    (colour classes differ by more than one)."""
    t = sum(1 - 2 * c for c in g.colour)
    return {1: (2, 0), 0: (1, 1), -1: (0, 2)}.get(t)


def trivial_paths(g: Graph, s: int | None) -> int | None:
    """The count of :func:`knights_tour.counting.frontier_run.count_paths` from vertex ``s``
    (any end when None) when no sweep is needed: 1 on one square; 0 for a colour imbalance
    above one, an isolated square, or a start of the colour no path ends on. None otherwise."""
    if g.n == 1:
        return 1
    need = end_colours(g)
    if need is None or any(len(nb) == 0 for nb in g.nbrs):
        return 0
    if s is not None and need[g.colour[s]] == 0:
        return 0
    return None


def build_sweep(
    g: Graph,
    name: str,
    steps: Sequence[tuple[int, Sequence[int]]],
    start: int | None,
    final: bool,
    reserve: int | None = None,
    candidates: frozenset[int] = frozenset(),
) -> SweepPlan:
    """The kernel tables of a sweep.

    Parameters
    ----------
    g : Graph
    steps : sequence of (vertex, earlier vertices it is joined to by the edges this step decides)
    start : vertex index of the fixed path end, or None
    final : True if the sweep decides every edge (its last step completes the path)
    reserve : colour (0 or 1) of a path end that some untaken start square will be, without
        naming it (the trunk shared by the start squares of that colour), or None
    candidates : the start squares the reserved end may be (all untaken while the sweep runs)

    Raises
    ------
    InvalidJobError
        If a frontier exceeds :data:`frontier_kernel.MAX_SLOTS` slots or a step lists more
        untaken neighbours of the frontier than the kernel holds.
    """
    need = end_colours(g)
    assert need is not None
    state = _SweepState(g)
    tables = _Tables.empty(len(steps))
    frontier_after: list[list[int]] = []
    for k, (v, joins) in enumerate(steps):
        old = state.take(v, joins)
        if len(state.frontier) > fk.MAX_SLOTS or len(old) > fk.MAX_SLOTS:
            raise InvalidJobError(
                f"{name}: frontier of {len(state.frontier)} vertices exceeds "
                f"the kernel's {fk.MAX_SLOTS} slots"
            )
        slot_old = {u: i for i, u in enumerate(old)}
        slot_new = {u: j for j, u in enumerate(state.frontier)}
        tables.slots(k, g, state, slot_old, slot_new, [slot_old[u] for u in joins])
        static, adj = _untaken(g, state.taken, state.undecided, slot_new, start, candidates)
        if len(adj) > fk.MAX_ADJ:
            raise InvalidJobError(f"{name}: {len(adj)} untaken vertices next to the frontier")
        tables.untaken(k, adj)
        tables.scal[k] = [
            len(old),
            len(joins),
            fk.DANGLE if v == start else fk.ISO,
            slot_new.get(v, -1),
            len(state.frontier),
            len(adj),
            static[0],
            static[1],
            state.bw,
            1 if final and k == len(steps) - 1 else 0,
            need[0],
            need[1],
            int(reserve == 0),
            int(reserve == 1),
            static[2],
        ]
        frontier_after.append(list(state.frontier))
    return SweepPlan(name, [v for v, _ in steps], tables.as_tuple(), frontier_after, final)


class _SweepState:
    """What a sweep has done after each step: the vertices taken, the edges still undecided
    (and their number per vertex), the frontier in slot order, and the taken vertices'
    black-minus-white count ``bw``."""

    def __init__(self, g: Graph) -> None:
        self.g = g
        self.und = [len(g.nbrs[v]) for v in range(g.n)]  # undecided edges per vertex
        self.undecided = {(min(a, b), max(a, b)) for a in range(g.n) for b in g.nbrs[a]}
        self.taken: set[int] = set()
        self.frontier: list[int] = []
        self.bw = 0

    def take(self, v: int, joins: Sequence[int]) -> list[int]:
        """Take ``v``, deciding its edges to ``joins``; returns the frontier before."""
        old = list(self.frontier)
        for u in joins:
            self.undecided.discard((min(u, v), max(u, v)))
            self.und[u] -= 1
            self.und[v] -= 1
        self.taken.add(v)
        self.bw += 1 - 2 * self.g.colour[v]
        self.frontier = [u for u in old + [v] if self.und[u] > 0]
        return old


@dataclass
class _Tables:
    """The kernel's per-step arrays (one row per step; see :class:`SweepPlan`)."""

    scal: np.ndarray
    back: np.ndarray
    o2n: np.ndarray
    newcol: np.ndarray
    newrem1: np.ndarray
    adj_static: np.ndarray
    adj_col: np.ndarray
    adj_fs: np.ndarray

    @classmethod
    def empty(cls, n_steps: int) -> _Tables:
        return cls(
            np.zeros((n_steps, fk.N_SCALARS), np.int64),
            np.full((n_steps, 8), -1, np.int64),
            np.full((n_steps, 16), -1, np.int64),
            np.zeros((n_steps, 16), np.int64),
            np.zeros((n_steps, 16), np.int64),
            np.zeros((n_steps, fk.MAX_ADJ), np.int64),
            np.zeros((n_steps, fk.MAX_ADJ), np.int64),
            np.zeros((n_steps, fk.MAX_ADJ), np.int64),
        )

    def slots(
        self,
        k: int,
        g: Graph,
        state: _SweepState,
        slot_old: dict[int, int],
        slot_new: dict[int, int],
        back: list[int],
    ) -> None:
        """Step ``k``'s slot tables: the old slots joined to the new vertex, where each old
        slot goes, and each new slot's colour and whether it has one undecided edge left."""
        self.back[k, : len(back)] = back
        for u, i in slot_old.items():
            self.o2n[k, i] = slot_new.get(u, -1)
        for u, j in slot_new.items():
            self.newcol[k, j] = g.colour[u]
            self.newrem1[k, j] = 1 if state.und[u] == 1 else 0

    def untaken(self, k: int, adj: list[tuple[int, int, int]]) -> None:
        """Step ``k``'s untaken vertices next to the frontier (see :func:`_untaken`)."""
        for a, (st, cu, fs) in enumerate(adj):
            self.adj_static[k, a], self.adj_col[k, a], self.adj_fs[k, a] = st, cu, fs

    def as_tuple(self) -> tuple[np.ndarray, ...]:
        return (
            self.scal,
            self.back,
            self.o2n,
            self.newcol,
            self.newrem1,
            self.adj_static,
            self.adj_col,
            self.adj_fs,
        )


def _untaken(
    g: Graph,
    taken: set[int],
    undecided: set[Edge],
    slot_new: dict[int, int],
    start: int | None,
    candidates: frozenset[int] = frozenset(),
) -> tuple[tuple[int, int, int], list[tuple[int, int, int]]]:
    """The untaken vertices as the kernel's pruning sees them: ``(black, white, candidates)``
    end points forced whatever the state (the untaken start; a vertex with at most one untaken
    neighbour and no frontier neighbour; how many of those are start candidates), and per
    untaken vertex next to the frontier ``(untaken neighbours, colour + 2 if a candidate, bit
    mask of frontier slots joined to it by an undecided edge)``."""
    forced = [0, 0]
    cand = 0
    adj = []
    for u in range(g.n):
        if u in taken:
            continue
        st = fs = 0
        for w in g.nbrs[u]:  # one pass over the neighbours (this runs for every step of a plan)
            if w not in taken:
                st += 1
            elif ((u, w) if u < w else (w, u)) in undecided:
                fs += 1 << slot_new[w]
        if u == start:
            forced[g.colour[u]] += 1
        elif fs:
            adj.append((st, g.colour[u] + 2 * (u in candidates), fs))
        elif st <= 1:
            forced[g.colour[u]] += 1
            cand += u in candidates
    return (forced[0], forced[1], cand), adj


def full_sweep(g: Graph, start: int | None) -> SweepPlan:
    """Every vertex in row-major order of the image, each deciding all its edges to earlier
    vertices; the last step completes the path."""
    steps = [(v, [u for u in g.nbrs[v] if u < v]) for v in range(g.n)]
    return build_sweep(g, "full", steps, start, final=True)


def trunk_sweep(g: Graph, colour: int, n_steps: int, candidates: frozenset[int]) -> SweepPlan:
    """The first ``n_steps`` steps of :func:`full_sweep` shared by every start square of
    ``colour`` not taken before step ``n_steps``: the start is a reserved end of that colour,
    not named (so its layers hold every state of each of those starts, and a few more). A
    start's own sweep continues from the trunk's layer just before its square is taken.
    ``candidates``: the start squares sharing the trunk (the reserved end is one of those
    still untaken); when no forced end is one of them, the reserved end is one more.

    Raises
    ------
    InvalidJobError
        If ``candidates`` is empty (a reserved end that may be any square would have to count
        as at most one forced end; name the starts instead).
    """
    if not candidates:
        raise InvalidJobError("a trunk needs the start squares it serves")
    steps = [(v, [u for u in g.nbrs[v] if u < v]) for v in range(n_steps)]
    return build_sweep(
        g, f"trunk{colour}", steps, None, final=False, reserve=colour, candidates=candidates
    )


def full_sweep_width(g: Graph) -> int:
    """Widest frontier of :func:`full_sweep` on ``g`` (the slots its keys need), without
    building its tables."""
    last = [max(g.nbrs[v], default=-1) for v in range(g.n)]  # last neighbour in the order
    return max((sum(1 for u in range(k + 1) if last[u] > k) for k in range(g.n)), default=0)


def cut_meets(g: Graph, cut: int, partial_upper: bool = False) -> bool:
    """True if the halves of :func:`half_sweeps` at ``cut`` end on the same interface: every
    vertex of the half that gives up the interface (above the cut; below it with
    ``partial_upper``) that has a neighbour across the cut also has one on its own side. A
    vertex with neighbours across only (a row with no knight move inside the half, as on a
    board of three rows cut below the first) stays on its own half's frontier but is finished
    by the other half, so the two frontiers differ and the halves cannot be joined."""
    a_end = cut * g.cols
    own = range(a_end, g.n) if partial_upper else range(a_end)

    def across(u: int, v: int) -> bool:
        return (u < a_end) != (v < a_end)

    return all(
        any(not across(v, u) for u in g.nbrs[v])
        for v in own
        if any(across(v, u) for u in g.nbrs[v])
    )


def default_cut(g: Graph, start: int | None) -> int | None:
    """The cut :func:`half_sweeps` uses by default: half the rows, or just below the start's
    row if that is lower, moved down to the first cut the halves can meet at
    (:func:`cut_meets`); None when there is none with at least two rows below it (a board too
    short for two halves)."""
    cut = max(1, g.rows // 2)
    if start is not None:
        cut = max(cut, start // g.cols + 1)
    while cut <= g.rows - 2 and not cut_meets(g, cut):
        cut += 1
    return cut if cut <= g.rows - 2 else None


def half_sweeps(
    g: Graph, start: int | None, cut: int, partial_upper: bool = False
) -> tuple[SweepPlan, SweepPlan]:
    """The upper and lower halves met at ``cut`` (rows ``0 .. cut-1`` above).

    The upper half takes the rows above the cut in row-major order, the lower half the rows
    below it from the bottom-right backwards, each deciding the edges among its rows. The edges
    across the cut are decided by one of them, which also takes the other's frontier
    vertices next to the cut (the *interface*), deciding only the crossing edges: the lower half
    by default (it does not depend on the start, so one lower half serves every start square),
    the upper half with ``partial_upper``. Both end with the interface as their frontier.
    ``start`` must lie above the cut.

    Raises
    ------
    InvalidJobError
        If ``start`` lies below the cut, or the halves cannot meet at ``cut``
        (:func:`cut_meets`).
    """
    a_end = cut * g.cols
    if start is not None and start >= a_end:
        raise InvalidJobError("the start square must lie above the cut")
    if not cut_meets(g, cut, partial_upper):
        raise InvalidJobError(
            f"the halves cannot meet below row {cut}: a square next to the cut has knight "
            "moves across it only"
        )
    above = list(range(a_end))
    below = list(range(g.n - 1, a_end - 1, -1))

    def sweep(order: list[int], other: set[int]) -> list[tuple[int, list[int]]]:
        pos = {v: i for i, v in enumerate(order)}
        return [(v, [u for u in g.nbrs[v] if u in pos and pos[u] < pos[v]]) for v in order]

    upper = sweep(above, set(below))
    lower = sweep(below, set(above))
    if partial_upper:
        interface = [v for v in below[::-1] if any(u < a_end for u in g.nbrs[v])]
        upper += [(v, [u for u in g.nbrs[v] if u < a_end]) for v in interface]
    else:
        interface = [v for v in above[::-1] if any(u >= a_end for u in g.nbrs[v])]
        lower += [(v, [u for u in g.nbrs[v] if u >= a_end]) for v in interface]
    return (
        build_sweep(g, "upper", upper, start, final=False),
        build_sweep(g, "lower", lower, None, final=False),
    )


def trivial_count(board: Board, square: Square) -> int | None:
    """The open tours from ``square`` when they are found without search
    (:func:`trivial_paths`: minority colour, isolated square, a board of one square); None
    where a search is needed."""
    g = image_graph(board, square)
    return trivial_paths(g, g.square.index(square))


def start_classes(
    board: Board, start: Square | None = None
) -> tuple[dict[Square, list[Square]], dict[Square, int], list[Square]]:
    """The classes a count counts: every class of ``board``, or ``start``'s only, as
    ``(classes, trivial, searched)``: representative -> the squares of its class, the counts of
    the classes found without search (:func:`trivial_count`), the representatives that need
    one.

    Raises
    ------
    InvalidSquareError
        If ``start`` is off the board.
    """
    all_classes = symmetry_classes(board)
    if start is None:
        classes = dict(all_classes)
    else:
        rep = representative(board, board.check_square(start))
        classes = {rep: all_classes[rep]}
    trivial: dict[Square, int] = {}
    searched: list[Square] = []
    for rep in classes:
        count = trivial_count(board, rep)
        if count is None:
            searched.append(rep)
        else:
            trivial[rep] = count
    return classes, trivial, searched


def halves_cut(board: Board) -> int | None:
    """The cut a count by halves meets them at on ``board``: one cut for every start class
    that needs a search, whether it counts them all or one (so a class alone runs the whole
    grid's lower half, shared through the checkpoints, and never costs more than the whole
    grid): the lowest at or below every class's :func:`default_cut` at which every class's
    halves meet (:func:`cut_meets`). None where the board is too short for halves (every class
    by full sweeps)."""
    reps = start_classes(board)[2]
    graphs = [image_graph(board, rep) for rep in reps]
    cuts = []
    for rep, g in zip(reps, graphs, strict=True):
        cut = default_cut(g, g.square.index(rep))
        if cut is None:
            return None
        cuts.append(cut)
    best = max(cuts, default=None)
    if best is None:
        return None
    while not all(cut_meets(g, best) for g in graphs):
        best += 1
    return best if best <= min(g.rows for g in graphs) - 2 else None


TrunkMember = tuple[Square, Graph, int]
"""A start class in a trunk's group: representative, its late image graph, its step there."""


@dataclass(frozen=True)
class TrunkGroup:
    """Start classes whose full sweeps are the same until their square is taken: the starts of
    ``colour`` on one late image graph. ``members``, ``sweeps`` and ``keep`` in the order of
    the classes; ``trunk`` is None when every start is taken first (no trunk runs)."""

    colour: int
    members: list[TrunkMember]
    """(representative, late image graph, the step its square is taken at)."""
    sweeps: list[SweepPlan]
    """Each class's own :func:`full_sweep`."""
    trunk: SweepPlan | None
    """The :func:`trunk_sweep` to the latest start, serving every start of the group."""

    @property
    def keep(self) -> tuple[int, ...]:
        """The trunk's steps whose layers its classes start from, in order."""
        return tuple(sorted({s - 1 for _, _, s in self.members if s > 0}))


def trunk_groups(board: Board, reps: list[Square]) -> list[TrunkGroup]:
    """The classes ``reps`` grouped by the trunk they share, each with its sweeps."""
    found: dict[tuple[object, object, int], list[TrunkMember]] = {}
    for rep in reps:
        g = image_graph(board, rep, late=True)
        s = g.square.index(rep)
        found.setdefault((g.nbrs, g.colour, g.colour[s]), []).append((rep, g, s))
    groups = []
    for (_, _, colour), members in found.items():
        last = max(s for _, _, s in members)
        cands = frozenset(s for _, _, s in members)
        trunk = trunk_sweep(members[0][1], colour, last, cands) if last > 0 else None
        groups.append(TrunkGroup(colour, members, [full_sweep(g, s) for _, g, s in members], trunk))
    return groups


@dataclass(frozen=True)
class ClassHalves:
    """One start class counted by two halves: its image ``graph`` and the halves met at the
    count's cut (the ``lower`` half the same plan for every class of the count)."""

    representative: Square
    graph: Graph
    upper: SweepPlan
    lower: SweepPlan


@dataclass(frozen=True)
class CountPlan:
    """The plan of a DP count (:func:`count_plan`): its ``classes`` (representative -> the
    squares of its class), the counts of those found without search (``trivial``), and the
    ``searched`` ones either by halves met below row ``cut`` of their images (``halves``) or by
    full sweeps sharing trunks (``groups``; ``cut`` None)."""

    classes: dict[Square, list[Square]]
    trivial: dict[Square, int]
    searched: list[Square]
    cut: int | None
    halves: list[ClassHalves]
    groups: list[TrunkGroup]


def count_plan(board: Board, start: Square | None = None, *, halves: bool = False) -> CountPlan:
    """The sweeps that count the open tours from every square of ``board`` (or ``start``'s
    class): with ``halves``, two halves per class met at :func:`halves_cut` where the board
    has one; otherwise, or where it has none, full sweeps grouped by trunk
    (:func:`trunk_groups`).

    Raises
    ------
    InvalidSquareError
        If ``start`` is off the board.
    InvalidJobError
        If a frontier is wider than the kernel's keys hold.
    """
    classes, trivial, searched = start_classes(board, start)
    cut = halves_cut(board) if halves and searched else None
    if cut is None:
        return CountPlan(classes, trivial, searched, None, [], trunk_groups(board, searched))
    met = []
    for rep in searched:
        g = image_graph(board, rep)
        met.append(ClassHalves(rep, g, *half_sweeps(g, g.square.index(rep), cut)))
    return CountPlan(classes, trivial, searched, cut, met, [])


__all__ = [
    "Graph",
    "SweepPlan",
    "image_graph",
    "end_colours",
    "trivial_paths",
    "build_sweep",
    "full_sweep",
    "trunk_sweep",
    "full_sweep_width",
    "cut_meets",
    "default_cut",
    "half_sweeps",
    "trivial_count",
    "start_classes",
    "halves_cut",
    "TrunkMember",
    "TrunkGroup",
    "trunk_groups",
    "ClassHalves",
    "CountPlan",
    "count_plan",
]

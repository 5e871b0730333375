"""The ``cpsat`` backend: a knight's tour as a Hamiltonian path/cycle model for OR-Tools CP-SAT.

The model (one per job):

* one Boolean literal per **directed** knight move ``u -> v`` (both directions of every edge of
  the knight's graph);
* an ``add_circuit`` (AddCircuit) constraint over those arcs: the true arcs form one circuit
  through every node (no self-loops are offered, so no square may be skipped);
* for an **open** tour a dummy node ``D`` (index ``rows*cols``) closes the path into a cycle:
  the arc ``D -> start`` is fixed true and is the only arc out of ``D``; every other square ``v``
  has an optional arc ``v -> D`` (the chosen one marks the tour's last square). Reading the
  successors from ``start`` until ``D`` gives the tour;
* for a **closed** (re-entrant) tour there is no dummy: a plain circuit over all squares (a
  Hamiltonian cycle), read from ``start``;
* a square with no knight move at all (the centre of 3×3, every square of 1×n and 2×2) would
  silently drop out of the circuit, which ignores nodes that appear in no arc: for each node with
  no arc in (or no arc out) the model gets an empty ``add_exactly_one``, so it is INFEASIBLE, as
  it should be. Only those nodes get one: the circuit constraint already demands one true arc in
  and out of every node it knows, so degree constraints on every node would only repeat it (and
  cost time in the solver). A board with no knight move at all has no arcs, so no
  ``add_circuit`` (which refuses an empty arc list, ``ValueError``); its empty degree
  constraints alone make it INFEASIBLE.

Solver parameters (:data:`SOLVER_PARAMETERS`, chosen with ``benchmarks/bench_cpsat.py``, which
measures each one against CP-SAT's default): one search worker (the Celery workers already
occupy the cores, one job per process); no presolve, no probing and no SAT inprocessing (this
one-constraint model is already in the form the search wants, and at these sizes the passes cost
more than they save); linearization level 2 with cuts at the root only, which adds the
circuit's connectivity (subtour elimination) cuts to the LP relaxation: with them the
infeasible starts and closed tours of 4×n boards, which the search alone refutes only slowly
and ever more slowly as n grows, are refuted in a few thousand branches at most (the LP
relaxation also refutes the colour-parity starts, which a search without any LP refutes only
slowly). Cuts are added at the root only: adding them during the search as well slows the
square boards several-fold. Every job is still decided by CP-SAT alone: no solution hint, no
fact about knight's tours beyond the knight's graph.

Answers: ``found`` (tour read back from the arcs), ``no_tour`` with proof ``cpsat`` (the model
is INFEASIBLE), ``unknown`` with reason ``time_limit`` (UNKNOWN: the time limit ran out first),
``error`` for MODEL_INVALID (a bug, never expected).

Sources: the circuit constraint of CP-SAT (Google OR-Tools documentation, "AddCircuit"; the
``CircuitConstraintProto`` comment in ``cp_model.proto``: nodes with no incident arc are
ignored); the Hamiltonian-path-via-dummy-node reduction is the standard one (a path from ``s``
is a cycle through an extra node joined to every square); subtour elimination cuts: Dantzig,
Fulkerson & Johnson, "Solution of a large-scale traveling-salesman problem", Operations
Research 2 (1954).

This module imports neither Celery nor Redis.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Unpack

from ortools.sat.python import cp_model

from knights_tour.board import Board, Square
from knights_tour.settings import get_settings
from knights_tour.solvers import CPSAT, Limits
from knights_tour.tours.record import Proof, Status, TourResult, as_tour

SOLVER_NAME = CPSAT.name

SOLVER_PARAMETERS: dict[str, bool | int] = {
    "num_workers": 1,
    "cp_model_presolve": False,
    "cp_model_probing_level": 0,
    "use_sat_inprocessing": False,
    "linearization_level": 2,
    "only_add_cuts_at_level_zero": True,
}
"""CP-SAT parameters of every solve and check (``SatParameters`` field names; see the module
docstring). The search is deterministic for a given model and parameters (one worker, CP-SAT's
default ``random_seed``); only the time limit depends on the clock."""

CHECK_PARAMETERS: dict[str, bool | int] = {"num_workers": 1}
"""CP-SAT parameters of :func:`check_tour`, where every literal is fixed: CP-SAT's default
presolve settles such a model at once, cheaper than the root LP of :data:`SOLVER_PARAMETERS`."""


def _literal_templates() -> tuple[cp_model.CpModel, tuple[Any, Any, Any]]:
    """Variable protos to copy: a free Boolean, one fixed false, one fixed true.

    Copying a template into ``CpModelProto.variables`` in one ``extend`` is several times
    faster than one ``new_bool_var`` call per arc, which dominated model building.
    """
    holder = cp_model.CpModel()
    for lo, hi in ((0, 1), (0, 0), (1, 1)):
        holder.new_int_var(lo, hi, "")
    free, false, true = holder.proto.variables
    return holder, (free, false, true)


_HOLDER, (_FREE, _FALSE, _TRUE) = _literal_templates()


class _TourModel:
    """The CP-SAT model of a knight's tour on ``board`` from ``start`` (see module docstring).

    Arc ``i`` goes from node ``tails[i]`` to node ``heads[i]`` and its literal is variable
    ``i`` of the model; squares are row-major indices ``0 .. rows*cols-1``, the dummy (open
    tours only) is ``rows*cols``. With ``fixed`` (a set of ``(tail, head)`` arcs) every literal
    is fixed: true exactly on those arcs (the model then checks one tour).
    """

    def __init__(
        self, board: Board, start: Square, closed: bool, fixed: set[tuple[int, int]] | None = None
    ) -> None:
        self.board = board
        self.start = start
        self.closed = closed
        n = board.n_squares
        self.n = n
        self.dummy: int | None = None if closed else n
        s = board.index(start)
        tails: list[int] = []
        heads: list[int] = []
        for u, targets in enumerate(board.neighbours):
            tails.extend([u] * len(targets))
            heads.extend(targets)
        entry = len(tails)  # open tours: the arc D -> start, fixed true
        if not closed:
            # D -> start, then v -> D for every other square v; start -> D would make the
            # cycle D -> start -> D: only the 1x1 board needs it.
            others = [v for v in range(n) if v != s or n == 1]
            tails += [n, *others]
            heads += [s, *([n] * len(others))]
        self.tails = tails
        self.heads = heads
        self.model = cp_model.CpModel()
        proto = self.model.proto
        if fixed is None:
            literals = [_FREE] * len(tails)
            if not closed:
                literals[entry] = _TRUE
        else:
            literals = [_TRUE if arc in fixed else _FALSE for arc in zip(tails, heads)]
        proto.variables.extend(literals)
        nodes = n if closed else n + 1
        isolated = (set(range(nodes)) - set(tails)) | (set(range(nodes)) - set(heads))
        for _ in isolated:
            # A node with no arc out or in: the circuit would ignore it; empty means infeasible.
            self.model.add_exactly_one([])
        if tails:
            circuit = proto.constraints.add().circuit
            circuit.tails.extend(tails)
            circuit.heads.extend(heads)
            circuit.literals.extend(range(len(tails)))

    def arcs(self) -> set[tuple[int, int]]:
        """The ``(tail, head)`` pairs of all arcs of the model."""
        return set(zip(self.tails, self.heads))

    def read_tour(self, solver: cp_model.CpSolver) -> list[Square]:
        """The tour encoded by a solution: successors followed from the start square."""
        values = solver.response_proto.solution
        succ = {u: v for u, v, x in zip(self.tails, self.heads, values) if x}
        node = self.board.index(self.start)
        tour = [node]
        while len(tour) < self.n:
            node = succ[node]
            if node == self.dummy:
                break
            tour.append(node)
        return [self.board.square(i) for i in tour]


def _make_solver(time_limit_s: float, parameters: dict[str, bool | int]) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    for name, value in parameters.items():
        setattr(solver.parameters, name, value)
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    return solver


def solve(board: Board, start: Square, **limits: Unpack[Limits]) -> TourResult:
    """Find a knight's tour from ``start`` with CP-SAT, or prove there is none.

    Parameters
    ----------
    board : Board
        The ``rows × cols`` board.
    start : (row, col)
        Start square, row 0 at the top; must be on the board.
    **limits
        The keywords of :class:`~knights_tour.solvers.Limits`:
    closed : bool
        Ask for a closed (re-entrant) tour (a Hamiltonian cycle) instead of an open one.
    time_limit_s : float, optional
        CP-SAT wall-clock limit in seconds; default ``get_settings().cpsat_time_limit_s``.
    exhaustive, node_limit
        Ignored (CP-SAT is complete up to its time limit; there is no node budget).

    Returns
    -------
    TourResult
        ``found`` with ``tour`` (list of ``rows*cols`` squares, row 0 at the top), ``no_tour``
        with proof ``cpsat`` (model INFEASIBLE), or ``unknown`` with reason ``time_limit``.
        ``nodes`` is CP-SAT's branch count. The claim is unverified;
        :func:`knights_tour.solvers.api.solve` runs the verifier.

    Raises
    ------
    InvalidSquareError
        If ``start`` is off the board.
    """
    start = board.check_square(start)
    closed = limits.get("closed", False)
    time_limit_s = limits.get("time_limit_s")
    if time_limit_s is None:
        time_limit_s = get_settings().cpsat_time_limit_s
    began = time.perf_counter()
    tm = _TourModel(board, start, closed)
    solver = _make_solver(time_limit_s, SOLVER_PARAMETERS)
    status = solver.solve(tm.model)
    result = TourResult(
        rows=board.rows,
        cols=board.cols,
        start=(start[0], start[1]),
        solver=SOLVER_NAME,
        closed=closed,
    )
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        result.status = Status.FOUND
        result.tour = as_tour(tm.read_tour(solver))
    elif status == cp_model.INFEASIBLE:
        result.status = Status.NO_TOUR
        result.proof = Proof.CPSAT
        kind = "Hamiltonian cycle" if closed else "Hamiltonian path from the start square"
        result.proof_detail = (
            f"CP-SAT proved the {kind} model (add_circuit over the knight's graph) infeasible"
        )
    elif status == cp_model.UNKNOWN:
        result.status = Status.UNKNOWN
        result.reason = "time_limit"
    else:  # MODEL_INVALID: a bug in the model, never a property of the board
        result.status = Status.ERROR
        result.reason = f"CP-SAT returned {solver.status_name(status)}"
    result.nodes = int(solver.num_branches)
    result.elapsed_s = time.perf_counter() - began
    result.cpsat_model_status = solver.status_name(status)
    return result


def check_tour(
    board: Board,
    tour: Sequence[Sequence[int]] | None,
    start: Square,
    closed: bool = False,
    time_limit_s: float | None = None,
) -> bool | None:
    """Ask the CP-SAT model whether ``tour`` is one of its solutions (a cross-check of a tour).

    The arcs the tour uses are fixed true and every other arc false; the answer is whether CP-SAT
    finds that assignment feasible. A step that is not a knight move (no such arc in the model),
    a repeated or missing square or a missing closing move all make it infeasible; a tour that
    does not begin on ``start`` is rejected before the model is asked.

    Parameters
    ----------
    board : Board
    tour : sequence of (row, col)
        The squares in visiting order, row 0 at the top.
    start : (row, col)
        The start square the model is built for.
    closed : bool
        Check against the closed-tour (Hamiltonian cycle) model.
    time_limit_s : float, optional
        CP-SAT time limit in seconds (default ``get_settings().cpsat_time_limit_s``); the check
        is pure propagation and takes milliseconds.

    Returns
    -------
    bool or None
        True only if CP-SAT reports the fixed assignment feasible; False if the tour does not
        fit the model or CP-SAT proves the assignment infeasible; None if CP-SAT ran out of
        ``time_limit_s`` before it decided (a tight job budget on a large board), which says
        nothing about the tour.

    Raises
    ------
    InvalidSquareError
        If ``start`` is off the board (a bad *tour* is an answer, False, never an error).
    """
    start = board.check_square(start)
    if tour is None or len(tour) == 0:
        return False
    indices: list[int] = []
    for sq in tour:
        if len(sq) != 2 or not board.contains((sq[0], sq[1])):
            return False
        indices.append(board.index((int(sq[0]), int(sq[1]))))
    if indices[0] != board.index(start):
        return False  # a tour is read from its start square (the closed model has no dummy)
    n = board.n_squares
    used: list[tuple[int, int]] = list(zip(indices, indices[1:]))
    if closed:
        if len(indices) > 1:
            used.append((indices[-1], indices[0]))
    else:
        used = [(n, indices[0]), *used, (indices[-1], n)]
    used_set = set(used)
    tm = _TourModel(board, start, closed, fixed=used_set)
    if not used_set <= tm.arcs():
        return False  # a step the model has no arc for (not a knight move, or a wrong start)
    if time_limit_s is None:
        time_limit_s = get_settings().cpsat_time_limit_s
    status = _make_solver(time_limit_s, CHECK_PARAMETERS).solve(tm.model)
    if status == cp_model.UNKNOWN:
        return None
    return status in (cp_model.OPTIMAL, cp_model.FEASIBLE)

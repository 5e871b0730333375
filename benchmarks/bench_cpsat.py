"""Benchmark: the ``cpsat`` backend against the model it replaced, on the same jobs in one run.

One command (from the repository root)::

    python benchmarks/bench_cpsat.py [--groups square,rect-open,rect-closed,corners]
        [--repeat 3] [--repeat-below 1.0] [--time-limit 20] [--ablation] [--first N]
        [--json benchmarks/results/bench_cpsat.json]

``--first N`` runs only the first N jobs of each group (a quick check that the script runs).

Groups of jobs (every job decided from scratch, no hint):

* ``square``      — every start square of n×n, n = 5..12, open tours (the 620 jobs of the main
  job: 484 tours, 136 starts without one);
* ``rect-open``   — m×n for m = 3, 4, 5 and n = m..20, open tours, every start square of one
  quadrant (rows < ceil(m/2), columns < ceil(n/2): the board's reflections map every other
  start square onto one of these, with the same answer). Thin boards: many starts have no tour;
* ``rect-closed`` — the same boards, closed tours, from the corner (whether a closed tour exists
  does not depend on the start square; Schwenk 1991 says which boards have one);
* ``corners``     — the corner of n×n, n = 16..30, open tours.

Variants:

* ``baseline`` — the model as it was before tuning, kept here verbatim: a degree constraint
  (``add_exactly_one``) on the arcs into and out of every node besides the circuit, one
  ``new_bool_var`` per arc, CP-SAT's default parameters apart from one worker, and its tour
  check (every literal fixed by a linear constraint);
* ``tuned``    — :func:`knights_tour.solvers.cpsat.solve` and
  :func:`~knights_tour.solvers.cpsat.check_tour` as shipped (``SOLVER_PARAMETERS``);
* with ``--ablation`` also the tuned model with one setting changed back or varied (presolve,
  probing, SAT inprocessing, linearization level, cuts during search, symmetry level), today's
  builder with the tuned parameters (degree constraints everywhere), and today's model without
  its degree constraints and without presolve.

Method: one CP-SAT worker per solve, as in the Celery workers (one job per process), CP-SAT's
fixed default seed, so a variant's search is the same in every repeat. For each job the variants
run interleaved, in an order rotated every repeat; a variant is repeated (``--repeat``) only
while its runs take less than ``--repeat-below`` seconds, and the minimum of its CPU time and of
its wall time is kept (the machine may be shared: CPU time is the fairer clock). Every tour is
checked by :func:`knights_tour.tours.verify.verify_tour` outside the timed region; for ``baseline``
and ``tuned`` the time of the model check of that tour (``check_s``) is measured as well. Any
difference in the answers of two variants that both decided a job is printed and makes the exit
status 1; a variant that ran out of time (``unknown``) is counted, never compared.

Output: one table per group (jobs, found, no_tour, unknown, errors, CPU and wall seconds, CPU
and wall time as a ratio to ``baseline``, check seconds, disagreements with ``baseline``), below
it one line per family (each n×n board of ``square``, 3×n / 4×n / 5×n of the rectangles: CPU
time as a ratio to ``baseline`` and the number of jobs slower than it), and a JSON file with
every job's answers and times.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ortools
from ortools.sat.python import cp_model
from rich.console import Console
from rich.table import Table

from knights_tour.board import Board, Square
from knights_tour.solvers import cpsat
from knights_tour.tours.verify import verify_tour

HERE = Path(__file__).resolve().parent
GROUPS = ("square", "rect-open", "rect-closed", "corners")
STATUSES = ("found", "no_tour", "unknown", "error")

Job = tuple[Board, Square, bool]


# -- the model before tuning (kept verbatim as the baseline) ----------------------------------
class BaselineModel:
    """The CP-SAT model as it was before tuning; ``degrees=False`` drops its degree constraints."""

    def __init__(self, board: Board, start: Square, closed: bool, degrees: bool = True) -> None:
        self.board, self.start, self.n = board, start, board.n_squares
        self.dummy = None if closed else board.n_squares
        self.model = cp_model.CpModel()
        self.arcs: dict[tuple[int, int], Any] = {}
        n, s = board.n_squares, board.index(start)
        for u, targets in enumerate(board.neighbours):
            for v in targets:
                self.arcs[(u, v)] = self.model.new_bool_var(f"a{u}_{v}")
        if not closed:
            lit = self.model.new_bool_var(f"a{n}_{s}")
            self.model.add(lit == 1)
            self.arcs[(n, s)] = lit
            for v in range(n):
                if v != s or n == 1:
                    self.arcs[(v, n)] = self.model.new_bool_var(f"a{v}_{n}")
        nodes = n if closed else n + 1
        outgoing: list[list[Any]] = [[] for _ in range(nodes)]
        incoming: list[list[Any]] = [[] for _ in range(nodes)]
        for (u, v), lit in self.arcs.items():
            outgoing[u].append(lit)
            incoming[v].append(lit)
        for i in range(nodes):
            if degrees or not outgoing[i] or not incoming[i]:
                self.model.add_exactly_one(outgoing[i])
                self.model.add_exactly_one(incoming[i])
        if self.arcs:
            self.model.add_circuit([(u, v, lit) for (u, v), lit in self.arcs.items()])

    def read_tour(self, solver: cp_model.CpSolver) -> list[Square]:
        succ = {u: v for (u, v), lit in self.arcs.items() if solver.boolean_value(lit)}
        node = self.board.index(self.start)
        tour = [node]
        while len(tour) < self.n:
            node = succ[node]
            if node == self.dummy:
                break
            tour.append(node)
        return [self.board.square(i) for i in tour]


def baseline_check(
    board: Board, tour: list[Square], start: Square, closed: bool, time_limit_s: float
) -> bool:
    """The tour check before tuning (for a tour already known to be valid)."""
    bm = BaselineModel(board, start, closed)
    idx = [board.index(sq) for sq in tour]
    used = set(zip(idx, idx[1:]))
    used |= {(idx[-1], idx[0])} if closed else {(bm.n, idx[0]), (idx[-1], bm.n)}
    for arc, lit in bm.arcs.items():
        bm.model.add(lit == (1 if arc in used else 0))
    solver = cpsat._make_solver(time_limit_s, {"num_workers": 1})
    return solver.solve(bm.model) in (cp_model.OPTIMAL, cp_model.FEASIBLE)


# -- variants ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Variant:
    """A way of solving a job: ``builder`` is "baseline", "baseline-nodeg" or "tuned";
    ``params`` None means the shipped :func:`knights_tour.solvers.cpsat.solve`."""

    name: str
    builder: str
    params: dict[str, Any] | None = None
    check: Callable[..., bool] | None = None
    about: str = ""


def _tuned_with(**changes: Any) -> dict[str, Any]:
    return {**cpsat.SOLVER_PARAMETERS, **changes}


MAIN_VARIANTS = [
    Variant("baseline", "baseline", {"num_workers": 1}, baseline_check, "model before tuning"),
    Variant("tuned", "tuned", None, cpsat.check_tour, "cpsat.solve as shipped"),
]
ABLATION_VARIANTS = [
    Variant("presolve on", "tuned", _tuned_with(cp_model_presolve=True)),
    Variant("probing 2", "tuned", _tuned_with(cp_model_probing_level=2)),
    Variant("inprocessing on", "tuned", _tuned_with(use_sat_inprocessing=True)),
    Variant("linearization 1", "tuned", _tuned_with(linearization_level=1)),
    Variant("cuts in search", "tuned", _tuned_with(only_add_cuts_at_level_zero=False)),
    Variant("symmetry 0", "tuned", _tuned_with(symmetry_level=0)),
    Variant("degrees everywhere", "baseline", _tuned_with(), about="old builder, tuned params"),
    Variant(
        "no degrees, no presolve",
        "baseline-nodeg",
        {"num_workers": 1, "cp_model_presolve": False},
        about="old builder",
    ),
]


def _status_name(status: Any) -> str:
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return "found"
    if status == cp_model.INFEASIBLE:
        return "no_tour"
    return "unknown" if status == cp_model.UNKNOWN else "error"


def solve_once(variant: Variant, job: Job, time_limit_s: float) -> dict[str, Any]:
    """Run ``variant`` on ``job`` once: ``{status, wall_s, cpu_s, branches, tour}``."""
    board, start, closed = job
    w0, c0 = time.perf_counter(), time.process_time()
    if variant.params is None:
        r = cpsat.solve(board, start, closed=closed, time_limit_s=time_limit_s)
        status, tour, branches = r.status.value, r.tour, r.nodes
    else:
        if variant.builder == "tuned":
            model: Any = cpsat._TourModel(board, start, closed)
        else:
            model = BaselineModel(board, start, closed, degrees=variant.builder == "baseline")
        solver = cpsat._make_solver(time_limit_s, variant.params)
        status = _status_name(solver.solve(model.model))
        tour = model.read_tour(solver) if status == "found" else None
        branches = int(solver.num_branches)
    return {
        "status": status,
        "wall_s": time.perf_counter() - w0,
        "cpu_s": time.process_time() - c0,
        "branches": branches,
        "tour": tour,
    }


def check_once(variant: Variant, job: Job, tour: list[Square], time_limit_s: float) -> float:
    """CPU seconds of ``variant``'s model check of a valid ``tour``; raises if it rejects it."""
    board, start, closed = job
    c0 = time.process_time()
    ok = variant.check(board, tour, start, closed, time_limit_s)  # type: ignore[misc]
    spent = time.process_time() - c0
    if not ok:
        raise AssertionError(f"{variant.name} check rejected a verified tour on {board} {start}")
    return spent


# -- running ----------------------------------------------------------------------------------
def build_groups(names: list[str]) -> dict[str, list[Job]]:
    """The jobs of each named group (see the module docstring)."""
    rects = [Board(m, n) for m in (3, 4, 5) for n in range(m, 21)]

    def quadrant(b: Board) -> list[Square]:
        return [(r, c) for r in range((b.rows + 1) // 2) for c in range((b.cols + 1) // 2)]

    every: dict[str, list[Job]] = {
        "square": [(Board(n, n), sq, False) for n in range(5, 13) for sq in Board(n, n).squares()],
        "rect-open": [(b, sq, False) for b in rects for sq in quadrant(b)],
        "rect-closed": [(b, (0, 0), True) for b in rects],
        "corners": [(Board(n, n), (0, 0), False) for n in range(16, 31)],
    }
    return {name: every[name] for name in names}


@dataclass
class Outcome:
    """One variant on one job: first answer, best times over the repeats."""

    status: str
    branches: int
    wall_s: float
    cpu_s: float
    check_s: float | None = None
    runs: int = 1
    unstable: bool = False


def run_job(job: Job, variants: list[Variant], args: argparse.Namespace) -> dict[str, Outcome]:
    """All variants on one job, interleaved, the order rotated every repeat."""
    out: dict[str, Outcome] = {}
    board, start, closed = job
    for rep in range(args.repeat):
        shift = rep % len(variants)
        for v in variants[shift:] + variants[:shift]:
            prev = out.get(v.name)
            if prev is not None and min(prev.wall_s, prev.cpu_s) >= args.repeat_below:
                continue
            r = solve_once(v, job, args.time_limit)
            check_s = None
            if r["tour"] is not None:
                verdict = verify_tour(board, r["tour"], start=start, closed=closed)
                if not verdict.ok:
                    r["status"] = "error"
                elif v.check is not None:
                    check_s = check_once(v, job, r["tour"], args.time_limit)
            if prev is None:
                out[v.name] = Outcome(r["status"], r["branches"], r["wall_s"], r["cpu_s"], check_s)
                continue
            prev.runs += 1
            prev.unstable |= r["status"] != prev.status
            prev.wall_s, prev.cpu_s = min(prev.wall_s, r["wall_s"]), min(prev.cpu_s, r["cpu_s"])
            if check_s is not None and prev.check_s is not None:
                prev.check_s = min(prev.check_s, check_s)
    return out


# -- reporting --------------------------------------------------------------------------------
def summarise(
    jobs: list[Job], results: list[dict[str, Outcome]], variants: list[Variant]
) -> dict[str, dict[str, Any]]:
    """Per variant: answer counts, summed best times, ratios and disagreements vs baseline."""
    summary: dict[str, dict[str, Any]] = {}
    for v in variants:
        outs = [res[v.name] for res in results]
        row: dict[str, Any] = {s: sum(o.status == s for o in outs) for s in STATUSES}
        row.update(
            jobs=len(outs),
            cpu_s=sum(o.cpu_s for o in outs),
            wall_s=sum(o.wall_s for o in outs),
            max_wall_s=max((o.wall_s for o in outs), default=0.0),
            check_s=sum(o.check_s for o in outs if o.check_s is not None)
            if v.check is not None
            else None,
            unstable=sum(o.unstable for o in outs),
            disagree=[],
        )
        summary[v.name] = row
    base = summary["baseline"]
    for v in variants:
        row = summary[v.name]
        row["cpu_ratio"] = row["cpu_s"] / base["cpu_s"] if base["cpu_s"] else None
        row["wall_ratio"] = row["wall_s"] / base["wall_s"] if base["wall_s"] else None
        for job, res in zip(jobs, results):
            a, b = res["baseline"].status, res[v.name].status
            if {a, b} <= {"found", "no_tour"} and a != b:
                row["disagree"].append(f"{job[0]} {job[1]} closed={job[2]}: baseline {a}, {b}")
    return summary


def print_group(console: Console, name: str, summary: dict[str, dict[str, Any]]) -> None:
    """One table: a row per variant."""
    table = Table(title=f"{name}: {summary['baseline']['jobs']} jobs")
    for col in (
        "variant",
        "found",
        "no_tour",
        "unknown",
        "error",
        "cpu s",
        "wall s",
        "cpu/base",
        "wall/base",
        "max wall s",
        "check s",
        "disagree",
    ):
        table.add_column(col, justify="left" if col == "variant" else "right")
    for vname, row in summary.items():
        table.add_row(
            vname,
            *(str(row[s]) for s in STATUSES),
            f"{row['cpu_s']:.2f}",
            f"{row['wall_s']:.2f}",
            f"{row['cpu_ratio']:.3f}" if row["cpu_ratio"] is not None else "-",
            f"{row['wall_ratio']:.3f}" if row["wall_ratio"] is not None else "-",
            f"{row['max_wall_s']:.2f}",
            f"{row['check_s']:.2f}" if row["check_s"] is not None else "-",
            str(len(row["disagree"])),
        )
    console.print(table)
    for vname, row in summary.items():
        for line in row["disagree"]:
            console.print(f"[red]DISAGREE {vname}: {line}[/]")
        if row["unstable"]:
            console.print(
                f"[yellow]{vname}: {row['unstable']} jobs answered differently "
                f"in different repeats (time limit)[/]"
            )


def family(group: str, job: Job) -> str:
    """The sub-group a job is reported in: its board for ``square``, ``m×n`` family for the
    rectangles, one family for ``corners``."""
    board = job[0]
    if group == "square":
        return board.label
    return f"{board.rows}xn" if group.startswith("rect") else "16..30"


def by_family(
    group: str, jobs: list[Job], results: list[dict[str, Outcome]], variants: list[Variant]
) -> dict[str, dict[str, Any]]:
    """Per family and variant: CPU seconds, ratio to ``baseline`` and jobs slower than it."""
    out: dict[str, dict[str, Any]] = {}
    for job, res in zip(jobs, results):
        fam = out.setdefault(family(group, job), {v.name: [0.0, 0] for v in variants})
        for v in variants:
            fam[v.name][0] += res[v.name].cpu_s
            fam[v.name][1] += res[v.name].cpu_s > res["baseline"].cpu_s
    return {
        f: {
            vn: {
                "cpu_s": cpu,
                "cpu_ratio": cpu / row["baseline"][0] if row["baseline"][0] else None,
                "slower_jobs": slower,
            }
            for vn, (cpu, slower) in row.items()
        }
        for f, row in out.items()
    }


def print_families(console: Console, families: dict[str, dict[str, Any]]) -> None:
    """One line per family: each variant's CPU time as a ratio to ``baseline``."""
    for fam, row in families.items():
        cells = [
            f"{vn} {r['cpu_ratio']:.3f} ({r['slower_jobs']} slower)"
            for vn, r in row.items()
            if vn != "baseline" and r["cpu_ratio"] is not None
        ]
        console.print(f"  {fam}: baseline {row['baseline']['cpu_s']:.2f} s; " + "; ".join(cells))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", default=",".join(GROUPS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--repeat-below",
        type=float,
        default=1.0,
        help="repeat a variant on a job only while it takes less (seconds)",
    )
    parser.add_argument("--time-limit", type=float, default=20.0, help="seconds per solve")
    parser.add_argument("--ablation", action="store_true")
    parser.add_argument(
        "--first", type=int, default=None, metavar="N", help="only the first N jobs of each group"
    )
    parser.add_argument(
        "--json", dest="json_path", default=str(HERE / "results" / "bench_cpsat.json")
    )
    args = parser.parse_args()
    names = [g.strip() for g in args.groups.split(",") if g.strip()]
    unknown = sorted(set(names) - set(GROUPS))
    if unknown:
        parser.error(f"unknown group(s) {unknown}; choose from {', '.join(GROUPS)}")
    variants = MAIN_VARIANTS + (ABLATION_VARIANTS if args.ablation else [])
    console = Console(width=150)
    doc: dict[str, Any] = {
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_at_start": os.getloadavg(),
        "python": platform.python_version(),
        "ortools": ortools.__version__,
        "tuned_parameters": cpsat.SOLVER_PARAMETERS,
        "check_parameters": cpsat.CHECK_PARAMETERS,
        "time_limit_s": args.time_limit,
        "repeat": args.repeat,
        "repeat_below_s": args.repeat_below,
        "variants": {
            v.name: {"builder": v.builder, "params": v.params, "about": v.about} for v in variants
        },
        "groups": {},
    }
    failed = False
    for name, jobs in build_groups(names).items():
        jobs = jobs[: args.first] if args.first is not None else jobs
        t0 = time.perf_counter()
        results = []
        for i, job in enumerate(jobs, 1):
            results.append(run_job(job, variants, args))
            if i == len(jobs) or jobs[i][0] != job[0]:
                print(
                    f"  {name}: {job[0]} done ({i}/{len(jobs)} jobs, "
                    f"{time.perf_counter() - t0:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
        summary = summarise(jobs, results, variants)
        print_group(console, name, summary)
        families = by_family(name, jobs, results, variants)
        print_families(console, families)
        failed |= any(row["disagree"] or row["error"] for row in summary.values())
        doc["groups"][name] = {
            "summary": summary,
            "families": families,
            "jobs": [
                {
                    "board": j[0].label,
                    "start": list(j[1]),
                    "closed": j[2],
                    **{vn: vars(o) for vn, o in res.items()},
                }
                for j, res in zip(jobs, results)
            ],
        }
    doc["load_average_at_end"] = os.getloadavg()
    out = Path(args.json_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    console.print(f"JSON: {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

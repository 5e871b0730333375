"""Benchmark: our ``warnsdorff`` engine against classic baselines (and optionally ``cpsat``).

One command (from the repository root)::

    python benchmarks/bench_engine.py [--sizes 5-12] [--large 100,1000,5000]
        [--budget-per-square 10] [--cpsat] [--cpsat-sizes 5-12] [--cpsat-time-limit 20]
        [--json benchmarks/results/bench_engine.json]

Open tours. Workloads: every start square of n x n for n in ``--sizes`` (620 starts for 5..12),
and the corner a1 of each n x n in ``--large``. Methods, all on the same machine in one run:

* ``ours``   — :func:`knights_tour.solvers.warnsdorff.solve` with ``node_limit`` = budget;
* ``plain``  — DFS with backtracking in a fixed move order (``benchmarks/baselines.py``);
* ``wdfs``   — DFS ordered by Warnsdorff's rule, fixed tie-break, no pruning;
* ``greedy`` — pure Warnsdorff, no backtracking;
* ``cpsat``  — the CP-SAT backend (only with ``--cpsat``; only boards in ``--cpsat-sizes``:
  its model has 8 literals per square, so it is skipped, with a note, on the large boards).

Every method gets the same node budget per job, ``budget-per-square * rows * cols`` (CP-SAT has
a time limit instead). Every tour is checked by :func:`knights_tour.verify.verify_tour` outside
the timed region. Columns: solved (verified tour), proven (no tour, with a proof: parity /
theorem / exhaustive search / CP-SAT infeasibility), unknown (budget or time ran out, or the
greedy walk got stuck), error (a tour that failed verification), total and max nodes, max
nodes / N, CPU seconds of the jobs (process time; the machine may be shared, so CPU time is the
fairer clock) and wall seconds, and the ratios of nodes and CPU time to ours.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

import baselines  # noqa: E402
from knights_tour.board import Board, parse_board_list  # noqa: E402
from knights_tour.solvers import get_solver  # noqa: E402
from knights_tour.solvers.warnsdorff import warm_up  # noqa: E402
from knights_tour.verify import verify_tour  # noqa: E402

METHODS = ["ours", "plain", "wdfs", "greedy"]


def run_job(method: str, board: Board, start, budget: int, cpsat_limit: float) -> dict:
    """One job: returns {outcome, nodes, cpu_s, wall_s, detail}."""
    w0, c0 = time.perf_counter(), time.process_time()
    tour = None
    if method in ("ours", "cpsat"):
        solver = get_solver("warnsdorff" if method == "ours" else "cpsat")
        if method == "ours":
            r = solver(board, start, node_limit=budget)
        else:
            r = solver(board, start, time_limit_s=cpsat_limit)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        status, nodes, tour = r.status.value, r.nodes, r.tour
        detail = (r.proof.value if r.proof else None) or r.reason
        outcome = {"found": "solved", "no_tour": "proven"}.get(status, status)
    else:
        status, nodes, tour = baselines.run(method, board.rows, board.cols, start, budget)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        outcome = {"found": "solved", "exhausted": "proven"}.get(status, "unknown")
        detail = "exhaustive" if status == "exhausted" else status
    if outcome == "solved" and not verify_tour(board, tour, start=start).ok:
        outcome = "error"
    return {"outcome": outcome, "nodes": int(nodes), "cpu_s": cpu, "wall_s": wall,
            "detail": detail}


def summarise(jobs: list[dict]) -> dict:
    out = {k: sum(j["outcome"] == k for j in jobs) for k in ("solved", "proven", "unknown", "error")}
    out["jobs"] = len(jobs)
    out["total_nodes"] = sum(j["nodes"] for j in jobs)
    out["max_nodes"] = max(j["nodes"] for j in jobs)
    out["max_nodes_per_square"] = max(j["nodes"] / j["n_squares"] for j in jobs)
    out["cpu_s"] = sum(j["cpu_s"] for j in jobs)
    out["wall_s"] = sum(j["wall_s"] for j in jobs)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5-12", help="n x n boards, every start square")
    parser.add_argument("--large", default="100,1000,5000", help="n x n boards, corner start")
    parser.add_argument("--budget-per-square", type=int, default=10)
    parser.add_argument("--cpsat", action="store_true", help="also run the cpsat backend")
    parser.add_argument("--cpsat-sizes", default="5-12")
    parser.add_argument("--cpsat-time-limit", type=float, default=20.0)
    parser.add_argument("--json", dest="json_path", default=str(HERE / "results" / "bench_engine.json"))
    args = parser.parse_args()

    console = Console(width=200)
    methods = METHODS + (["cpsat"] if args.cpsat else [])
    cpsat_boards = set(parse_board_list(args.cpsat_sizes)) if args.cpsat else set()
    t_warm = warm_up()
    baselines.run("wdfs", 5, 5, (0, 0), 1000)  # compile (or load) the baseline kernel
    console.print(f"warm-up (numba compile or cache load): {t_warm:.2f} s")

    groups: list[tuple[str, list[tuple[Board, tuple[int, int]]]]] = []
    small = parse_board_list(args.sizes)
    if small:
        label = f"n={small[0].rows}..{small[-1].rows} all starts"
        groups.append((label, [(b, sq) for b in small for sq in b.squares()]))
    for spec in [s for s in args.large.split(",") if s.strip()]:
        b = parse_board_list(spec)[0]
        groups.append((f"{b.label} corner", [(b, (b.rows - 1, 0))]))

    report: dict = {
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "numpy": np.__version__},
        "budget_per_square": args.budget_per_square,
        "cpsat_time_limit_s": args.cpsat_time_limit if args.cpsat else None,
        "groups": [],
    }
    table = Table(title=f"engine benchmark (open tours, node budget {args.budget_per_square} x N)")
    for col in ("workload", "method", "jobs", "solved", "proven", "unknown", "error",
                "total nodes", "max nodes", "max nodes/N", "cpu s", "wall s", "nodes/ours",
                "cpu/ours"):
        table.add_column(col, justify="left" if col in ("workload", "method") else "right")
    for label, jobs in groups:
        group = {"workload": label, "methods": {}, "notes": []}
        for method in methods:
            if method == "cpsat":
                runnable = [(b, sq) for b, sq in jobs if b in cpsat_boards]
                if not runnable:
                    group["notes"].append("cpsat skipped (board not in --cpsat-sizes)")
                    continue
            else:
                runnable = jobs
            results = []
            for board, sq in runnable:
                res = run_job(method, board, sq, args.budget_per_square * board.n_squares,
                              args.cpsat_time_limit)
                res.update(board=board.label, start=list(sq), n_squares=board.n_squares)
                results.append(res)
            summary = summarise(results)
            if len(runnable) < len(jobs):
                summary["note"] = f"ran on {len(runnable)} of {len(jobs)} jobs"
            group["methods"][method] = {"summary": summary, "jobs": results}
            console.print(f"{label:>24} {method:>7}: {summary['solved']} solved, "
                          f"{summary['proven']} proven, {summary['unknown']} unknown, "
                          f"{summary['error']} error, {summary['cpu_s']:.2f} cpu s", highlight=False)
        ours = group["methods"]["ours"]["summary"]
        for method, data in group["methods"].items():
            s = data["summary"]
            s["nodes_ratio_to_ours"] = s["total_nodes"] / max(ours["total_nodes"], 1)
            s["cpu_ratio_to_ours"] = s["cpu_s"] / max(ours["cpu_s"], 1e-9)
            table.add_row(
                label, method + (" *" if "note" in s else ""), str(s["jobs"]), str(s["solved"]),
                str(s["proven"]), str(s["unknown"]), str(s["error"]), f"{s['total_nodes']:,}",
                f"{s['max_nodes']:,}", f"{s['max_nodes_per_square']:.2f}", f"{s['cpu_s']:.2f}",
                f"{s['wall_s']:.2f}", f"{s['nodes_ratio_to_ours']:.2f}",
                f"{s['cpu_ratio_to_ours']:.2f}",
            )
        report["groups"].append(group)
    console.print(table)
    for group in report["groups"]:
        for note in group["notes"]:
            console.print(f"note: {group['workload']}: {note}")
        for method, data in group["methods"].items():
            if "note" in data["summary"]:
                console.print(f"* {group['workload']} {method}: {data['summary']['note']}")
    path = Path(args.json_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1))
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""Benchmark: our ``warnsdorff`` engine against classic baselines (and optionally ``cpsat``).

One command (from the repository root)::

    python benchmarks/bench_engine.py [--sizes 5-12] [--large 100,1000,5000]
        [--budget-per-square 10] [--cpsat] [--cpsat-sizes 5-12] [--cpsat-time-limit 20]
        [--thin-rows 3,4,5,6,7] [--thin-cols 10,11,96,101,200,1000,1001,2000,2001]
        [--thin-starts 4] [--thin-budget-per-square 50] [--square-sizes 50,100,...,2000]
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
a time limit instead). Every tour is checked by :func:`knights_tour.tours.verify.verify_tour`
outside the timed region. Columns: solved (verified tour), proven (no tour, with a proof: parity /
theorem / exhaustive search / CP-SAT infeasibility), unknown (budget or time ran out, or the
greedy walk got stuck), error (a tour that failed verification), total and max nodes, max
nodes / N, CPU seconds of the jobs (process time; the machine may be shared, so CPU time is the
fairer clock) and wall seconds, and the ratios of nodes and CPU time to ours.

Thin and long boards (second table): for each number of rows in ``--thin-rows`` and each kind
(open, closed), ``--thin-starts`` random start squares (seeded) on each ``rows x n`` board, n in
``--thin-cols``; every method gets ``--thin-budget-per-square`` x N nodes (the baselines run the
open jobs only: they have no closed-tour mode). Columns as above plus µs per square (wall time
of all jobs / their squares) and the worst single job's µs per square.

Cost per square (third table): :func:`knights_tour.solvers.api.solve` end to end (search or
construction, verification) on n x n, n in ``--square-sizes``: an open tour from the corner and
a closed tour from the centre, wall µs per square, best of two runs.
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

import baselines  # noqa: E402
import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from knights_tour.board import Board, parse_board_list  # noqa: E402
from knights_tour.solvers import api, get_solver  # noqa: E402
from knights_tour.solvers.warnsdorff import warm_up  # noqa: E402
from knights_tour.tours.verify import verify_tour  # noqa: E402

METHODS = ["ours", "plain", "wdfs", "greedy"]


def run_job(
    method: str, board: Board, start, budget: int, cpsat_limit: float, closed: bool = False
) -> dict:
    """One job: returns {outcome, nodes, cpu_s, wall_s, detail}."""
    w0, c0 = time.perf_counter(), time.process_time()
    tour = None
    if method in ("ours", "cpsat"):
        solver = get_solver("warnsdorff" if method == "ours" else "cpsat")
        if method == "ours":
            r = solver(board, start, node_limit=budget, closed=closed)
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
    if outcome == "solved" and not verify_tour(board, tour, start=start, closed=closed).ok:
        outcome = "error"
    return {"outcome": outcome, "nodes": int(nodes), "cpu_s": cpu, "wall_s": wall, "detail": detail}


def summarise(jobs: list[dict]) -> dict:
    out = {
        k: sum(j["outcome"] == k for j in jobs) for k in ("solved", "proven", "unknown", "error")
    }
    out["jobs"] = len(jobs)
    out["total_nodes"] = sum(j["nodes"] for j in jobs)
    out["max_nodes"] = max(j["nodes"] for j in jobs)
    out["max_nodes_per_square"] = max(j["nodes"] / j["n_squares"] for j in jobs)
    out["cpu_s"] = sum(j["cpu_s"] for j in jobs)
    out["wall_s"] = sum(j["wall_s"] for j in jobs)
    out["us_per_square"] = 1e6 * out["wall_s"] / sum(j["n_squares"] for j in jobs)
    out["max_us_per_square"] = max(1e6 * j["wall_s"] / j["n_squares"] for j in jobs)
    return out


def thin_groups(rows_list, cols_list, starts: int) -> list[tuple[str, bool, list]]:
    """``(label, closed, [(board, start), ...])`` per number of rows and kind, random starts
    (seeded by the board, so every run and every version gets the same jobs)."""
    groups = []
    for rows in rows_list:
        for closed in (False, True):
            jobs = []
            for cols in cols_list:
                board = Board(rows, cols)
                rng = np.random.default_rng(rows * 1_000_003 + cols)
                for _ in range(starts):
                    jobs.append((board, (int(rng.integers(rows)), int(rng.integers(cols)))))
            kind = "closed" if closed else "open"
            groups.append((f"{rows}xn {kind}", closed, jobs))
    return groups


def run_thin(args, console: Console, report: dict) -> None:
    """The thin and long boards table (module docstring)."""
    rows_list = [int(x) for x in args.thin_rows.split(",") if x.strip()]
    cols_list = [int(x) for x in args.thin_cols.split(",") if x.strip()]
    table = Table(
        title=f"thin and long boards (n in {args.thin_cols}; "
        f"{args.thin_starts} random starts each; budget "
        f"{args.thin_budget_per_square} x N)"
    )
    for col in (
        "workload",
        "method",
        "jobs",
        "solved",
        "proven",
        "unknown",
        "error",
        "max nodes/N",
        "cpu s",
        "wall s",
        "us/square",
        "max us/square",
    ):
        table.add_column(col, justify="left" if col in ("workload", "method") else "right")
    report["thin"] = []
    for label, closed, jobs in thin_groups(rows_list, cols_list, args.thin_starts):
        group = {"workload": label, "methods": {}}
        for method in ["ours"] if closed else METHODS:
            results = []
            for board, sq in jobs:
                res = run_job(
                    method,
                    board,
                    sq,
                    args.thin_budget_per_square * board.n_squares,
                    0.0,
                    closed=closed,
                )
                res.update(board=board.label, start=list(sq), n_squares=board.n_squares)
                results.append(res)
            s = summarise(results)
            unknown = sorted(
                {(j["board"], tuple(j["start"])) for j in results if j["outcome"] == "unknown"}
            )
            group["methods"][method] = {"summary": s, "unknown_jobs": unknown[:50]}
            table.add_row(
                label,
                method,
                str(s["jobs"]),
                str(s["solved"]),
                str(s["proven"]),
                str(s["unknown"]),
                str(s["error"]),
                f"{s['max_nodes_per_square']:.2f}",
                f"{s['cpu_s']:.2f}",
                f"{s['wall_s']:.2f}",
                f"{s['us_per_square']:.3f}",
                f"{s['max_us_per_square']:.2f}",
            )
            if method == "ours" and unknown:
                console.print(f"{label}: ours unknown on {unknown[:8]}", highlight=False)
        report["thin"].append(group)
    console.print(table)


def run_squares(args, console: Console, report: dict) -> None:
    """The cost-per-square table: api.solve end to end on n x n (module docstring); closed
    tours only on even n (odd boards have none, by parity)."""
    sizes = [int(x) for x in args.square_sizes.split(",") if x.strip()]
    table = Table(
        title="cost per square: api.solve (search or construction + verifier), "
        "wall µs per square, best of 2"
    )
    for col in (
        "board",
        "open corner us/sq",
        "closed centre us/sq",
        "open nodes/N",
        "closed nodes/N",
    ):
        table.add_column(col, justify="right")
    rows = []
    for n in sizes:
        row: dict = {"n": n}
        kinds = [("open", (n - 1, 0), False)] + (
            [("closed", (n // 2, n // 2), True)] if n % 2 == 0 else []
        )
        for kind, start, closed in kinds:
            best = float("inf")
            for _ in range(2):
                w0 = time.perf_counter()
                r = api.solve(Board(n, n), start, closed=closed)
                best = min(best, time.perf_counter() - w0)
            row[kind] = {
                "status": r.status.value,
                "us_per_square": 1e6 * best / (n * n),
                "nodes_per_square": r.nodes / (n * n),
            }
        rows.append(row)
        cells = [
            (f"{row[k]['us_per_square']:.3f}", f"{row[k]['nodes_per_square']:.2f}")
            if k in row
            else ("-", "-")
            for k in ("open", "closed")
        ]
        table.add_row(f"{n}x{n}", cells[0][0], cells[1][0], cells[0][1], cells[1][1])
    for kind in ("open", "closed"):
        costs = [r[kind]["us_per_square"] for r in rows if kind in r]
        if costs:
            report.setdefault("square_spread", {})[kind] = max(costs) / min(costs)
            console.print(
                f"{kind}: max/min µs per square over the sizes = {max(costs) / min(costs):.2f}",
                highlight=False,
            )
    report["squares"] = rows
    console.print(table)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5-12", help="n x n boards, every start square")
    parser.add_argument("--large", default="100,1000,5000", help="n x n boards, corner start")
    parser.add_argument("--budget-per-square", type=int, default=10)
    parser.add_argument("--cpsat", action="store_true", help="also run the cpsat backend")
    parser.add_argument("--cpsat-sizes", default="5-12")
    parser.add_argument("--cpsat-time-limit", type=float, default=20.0)
    parser.add_argument("--thin-rows", default="3,4,5,6,7", help="rows of the thin boards")
    parser.add_argument("--thin-cols", default="10,11,96,101,200,1000,1001,2000,2001")
    parser.add_argument("--thin-starts", type=int, default=4, help="random starts per board")
    parser.add_argument("--thin-budget-per-square", type=int, default=50)
    parser.add_argument("--square-sizes", default="50,100,200,333,500,1000,2000")
    parser.add_argument(
        "--json", dest="json_path", default=str(HERE / "results" / "bench_engine.json")
    )
    return parser.parse_args()


def run_main_table(args, console: Console, report: dict) -> None:
    """The first table: every start of small boards and the corner of large ones, open tours,
    ours against the baselines (module docstring)."""
    methods = METHODS + (["cpsat"] if args.cpsat else [])
    cpsat_boards = set(parse_board_list(args.cpsat_sizes)) if args.cpsat else set()
    groups: list[tuple[str, list[tuple[Board, tuple[int, int]]]]] = []
    small = parse_board_list(args.sizes) if args.sizes.strip() else []
    if small:
        label = f"n={small[0].rows}..{small[-1].rows} all starts"
        groups.append((label, [(b, sq) for b in small for sq in b.squares()]))
    for spec in [s for s in args.large.split(",") if s.strip()]:
        b = parse_board_list(spec)[0]
        groups.append((f"{b.label} corner", [(b, (b.rows - 1, 0))]))
    table = Table(title=f"engine benchmark (open tours, node budget {args.budget_per_square} x N)")
    for col in (
        "workload",
        "method",
        "jobs",
        "solved",
        "proven",
        "unknown",
        "error",
        "total nodes",
        "max nodes",
        "max nodes/N",
        "cpu s",
        "wall s",
        "nodes/ours",
        "cpu/ours",
    ):
        table.add_column(col, justify="left" if col in ("workload", "method") else "right")
    for label, jobs in groups:
        group = {"workload": label, "methods": {}, "notes": []}
        for method in methods:
            runnable = [(b, sq) for b, sq in jobs if method != "cpsat" or b in cpsat_boards]
            if not runnable:
                group["notes"].append("cpsat skipped (board not in --cpsat-sizes)")
                continue
            results = []
            for board, sq in runnable:
                res = run_job(
                    method,
                    board,
                    sq,
                    args.budget_per_square * board.n_squares,
                    args.cpsat_time_limit,
                )
                res.update(board=board.label, start=list(sq), n_squares=board.n_squares)
                results.append(res)
            summary = summarise(results)
            if len(runnable) < len(jobs):
                summary["note"] = f"ran on {len(runnable)} of {len(jobs)} jobs"
            group["methods"][method] = {"summary": summary, "jobs": results}
            console.print(
                f"{label:>24} {method:>7}: {summary['solved']} solved, "
                f"{summary['proven']} proven, {summary['unknown']} unknown, "
                f"{summary['error']} error, {summary['cpu_s']:.2f} cpu s",
                highlight=False,
            )
        ours = group["methods"]["ours"]["summary"]
        for method, data in group["methods"].items():
            s = data["summary"]
            s["nodes_ratio_to_ours"] = s["total_nodes"] / max(ours["total_nodes"], 1)
            s["cpu_ratio_to_ours"] = s["cpu_s"] / max(ours["cpu_s"], 1e-9)
            table.add_row(
                label,
                method + (" *" if "note" in s else ""),
                str(s["jobs"]),
                str(s["solved"]),
                str(s["proven"]),
                str(s["unknown"]),
                str(s["error"]),
                f"{s['total_nodes']:,}",
                f"{s['max_nodes']:,}",
                f"{s['max_nodes_per_square']:.2f}",
                f"{s['cpu_s']:.2f}",
                f"{s['wall_s']:.2f}",
                f"{s['nodes_ratio_to_ours']:.2f}",
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


def main() -> None:
    args = parse_args()
    console = Console(width=200)
    t_warm = warm_up()
    baselines.run("wdfs", 5, 5, (0, 0), 1000)  # compile (or load) the baseline kernel
    console.print(f"warm-up (numba compile or cache load): {t_warm:.2f} s")
    report: dict = {
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "numpy": np.__version__,
        },
        "budget_per_square": args.budget_per_square,
        "cpsat_time_limit_s": args.cpsat_time_limit if args.cpsat else None,
        "groups": [],
    }
    run_main_table(args, console, report)
    if args.thin_rows.strip():
        run_thin(args, console, report)
    if args.square_sizes.strip():
        run_squares(args, console, report)
    path = Path(args.json_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1))
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()

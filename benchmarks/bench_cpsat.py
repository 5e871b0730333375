"""Benchmark: the ``cpsat`` backend on every start square of n×n boards (default n = 5..12).

One command::

    python benchmarks/bench_cpsat.py [--sizes 5-12] [--closed] [--time-limit 60] [--json out.json]

Prints, per board, the number of jobs, how many were found / no_tour / unknown, and the total,
mean and max seconds per job, separately for the parity-infeasible starts (minority colour of an
odd board) and the rest; writes every job's (status, seconds, branches) as JSON if asked.
Each job runs one CP-SAT worker, as in the Celery workers.
"""

from __future__ import annotations

import argparse
import json
import time

from knights_tour.solvers.api import solve
from knights_tour.board import Board, parse_board_list


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5-12")
    parser.add_argument("--closed", action="store_true")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args()
    rows: list[dict] = []
    grand = time.perf_counter()
    print(f"{'board':>6} {'kind':>7} {'jobs':>5} {'found':>6} {'no_tour':>7} {'unknown':>7} "
          f"{'total_s':>8} {'mean_s':>7} {'max_s':>7}")
    for board in parse_board_list(args.sizes):
        per_kind: dict[str, list[dict]] = {"parity": [], "other": []}
        for start in board.squares():
            parity = board.n_squares % 2 == 1 and Board.colour(start) == 1
            t0 = time.perf_counter()
            r = solve(board, start, solver="cpsat", closed=args.closed,
                      time_limit_s=args.time_limit)
            dt = time.perf_counter() - t0
            row = {"board": board.label, "start": list(start), "status": r.status.value,
                   "seconds": dt, "branches": r.nodes, "parity": parity}
            rows.append(row)
            per_kind["parity" if parity else "other"].append(row)
        for kind, items in per_kind.items():
            if not items:
                continue
            secs = [i["seconds"] for i in items]
            count = {s: sum(i["status"] == s for i in items) for s in ("found", "no_tour", "unknown")}
            print(f"{board.label:>6} {kind:>7} {len(items):>5} {count['found']:>6} "
                  f"{count['no_tour']:>7} {count['unknown']:>7} {sum(secs):>8.2f} "
                  f"{sum(secs) / len(secs):>7.3f} {max(secs):>7.3f}", flush=True)
    total = time.perf_counter() - grand
    secs = [r["seconds"] for r in rows]
    print(f"all: {len(rows)} jobs, total {total:.1f} s, max {max(secs):.3f} s per job, "
          f"errors {sum(r['status'] == 'error' for r in rows)}")
    if args.json_path:
        with open(args.json_path, "w", encoding="utf-8") as fh:
            json.dump({"closed": args.closed, "time_limit_s": args.time_limit, "jobs": rows,
                       "total_s": total}, fh, indent=1)


if __name__ == "__main__":
    main()

"""Benchmark: per-square knight's tour counts (issue 7) with the numba counting kernel.

One command::

    python benchmarks/bench_count.py [SIZE=6] [--jobs 2] [--depth K] [--closed]
                                     [--no-symmetry] [--json benchmarks/results/bench_count.json]

Plans the count (:func:`knights_tour.counting.plan.plan_count`: one square per symmetry class, split
into sub-jobs by fixing the first ``depth`` moves), runs the sub-jobs on ``--jobs`` local
processes (a benchmark harness only; ``ktour count`` distributes sub-jobs over Celery workers),
sums them (:func:`knights_tour.counting.plan.assemble`) and prints the grid, the total (compare OEIS
A165134: 1728 for 5×5, 6,637,920 for 6×6), wall time, sub-jobs, nodes and nodes/s, and the
slowest sub-job. Writes the report as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from knights_tour.board import parse_board
from knights_tour.counting.plan import SubJob, assemble, plan_count
from knights_tour.counting.search import count_subjob

OEIS_A165134 = {1: 1, 2: 0, 3: 0, 4: 0, 5: 1728, 6: 6637920, 7: 165575218320}


def _warm() -> None:
    """Process initializer: load the cached compiled kernel before timing anything."""
    count_subjob(parse_board(5), [(0, 0)])


def _run(record: dict) -> tuple[str, int, int, float, float]:
    sj = SubJob.from_dict(record)
    t0, c0 = time.perf_counter(), time.process_time()
    count, nodes = sj.run()
    return sj.key, count, nodes, time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("size", nargs="?", default="6")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--depth", type=int, default=None)
    parser.add_argument("--closed", action="store_true")
    parser.add_argument("--no-symmetry", action="store_true")
    parser.add_argument("--json", dest="json_path", default="benchmarks/results/bench_count.json")
    args = parser.parse_args()
    board = parse_board(args.size)

    t_compile = time.perf_counter()
    count_subjob(parse_board(5), [(0, 0)], closed=args.closed)  # load (or compile) the kernel
    t_compile = time.perf_counter() - t_compile

    began = time.perf_counter()
    plan = plan_count(
        board, closed=args.closed, depth=args.depth, use_symmetry=not args.no_symmetry
    )
    t_plan = time.perf_counter() - began
    partials: dict[str, tuple[int, int]] = {}
    slowest = (0.0, "")
    busy = 0.0
    cpu = 0.0
    with ProcessPoolExecutor(max_workers=args.jobs, initializer=_warm) as pool:
        futures = [pool.submit(_run, sj.to_dict()) for sj in plan.subjobs]
        for fut in as_completed(futures):
            key, count, nodes, secs, cpu_s = fut.result()
            partials[key] = (count, nodes)
            busy += secs
            cpu += cpu_s
            slowest = max(slowest, (secs, key))
    elapsed = time.perf_counter() - began
    report = assemble(plan, partials, elapsed_s=elapsed)

    width = max(len(f"{v}") for row in report.grid for v in row)
    kind = "closed" if args.closed else "open"
    print(f"{board.label} directed {kind} tours per start square (row 0 at the top):")
    for row in report.grid:
        print("  " + " ".join(f"{v:>{width}}" for v in row))
    print(f"total: {report.total:,}")
    if not args.closed and board.is_square and board.rows in OEIS_A165134:
        expected = OEIS_A165134[board.rows]
        print(
            f"OEIS A165134({board.rows}) = {expected:,}: "
            f"{'match' if report.total == expected else 'MISMATCH'}"
        )
    print(report.symmetry_note)
    print(f"sub-jobs: {report.subjobs} (depth {report.depth}), processes: {args.jobs}")
    print(
        f"wall: {elapsed:.2f} s (plan {t_plan:.2f} s; kernel load/compile before: "
        f"{t_compile:.2f} s), sub-job wall sum: {busy:.2f} s, CPU: {cpu:.2f} s, slowest sub-job: "
        f"{slowest[0]:.2f} s ({slowest[1]})"
    )
    print(
        f"nodes: {report.nodes:,}; {report.nodes / max(cpu, 1e-9) / 1e6:.1f} M nodes per CPU "
        f"second, {report.nodes / max(elapsed, 1e-9) / 1e6:.1f} M nodes/s overall (wall; the "
        "machine may be shared)"
    )
    record = report.to_dict()
    record.update(
        jobs=args.jobs,
        subjob_wall_s=round(busy, 3),
        cpu_s=round(cpu, 3),
        plan_s=round(t_plan, 3),
        slowest_subjob_s=round(slowest[0], 3),
        nodes_per_cpu_s=report.nodes / max(cpu, 1e-9),
    )
    Path(args.json_path).parent.mkdir(parents=True, exist_ok=True)
    with open(args.json_path, "w", encoding="utf-8") as fh:
        json.dump(record, fh, indent=1)
    print(f"wrote {args.json_path}")


if __name__ == "__main__":
    main()

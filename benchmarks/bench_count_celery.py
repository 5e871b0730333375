"""Benchmark: a count's sub-jobs through Celery on warm local workers (the counting of
``ktour count``, without the start-up of Redis and the workers).

One command::

    python benchmarks/bench_count_celery.py [SIZE=6] [--workers 2] [--repeat 3]
                                            [--plans default,unfolded:3] [--json FILE]

Starts an embedded Redis and ``--workers`` local worker processes, waits until they answer,
counts one 5x5 to load the kernels in every pool process, then for each plan, ``--repeat``
times (plans interleaved, so a change of load touches each alike): registers the count,
sends its sub-jobs as ``ktour count`` does, waits for the last partial count and sums them.
Plans: ``default`` is ``plan_count(board)``; ``unfolded:K`` the plan of the tree before
prefixes were folded by symmetry (every prefix of depth K of each class: for 6x6, K = 3 gave
348 sub-jobs); ``folded:K`` the folded plan at depth K. Prints per run: sub-jobs, nodes, the
counting wall (first sub-job sent to the last partial count stored), the summed sub-job time
(kernel time, as ``ktour count`` reports it) and the worker-seconds spent outside sub-jobs
(``workers * wall - summed``: Celery, Redis, claims, idle tails) and the CPU-seconds the worker
processes and their pool processes used meanwhile (less sensitive to the machine's load than
the wall; ``psutil``). Run it with ``PYTHONPATH=OTHER_TREE/src`` to measure another tree (the
workers inherit it). The total must equal OEIS
A165134 (6,637,920 for 6x6; 1728 for 5x5). Figures go to benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time

import msgspec
import psutil

from knights_tour.board import parse_board
from knights_tour.store.connection import connect

try:  # the packages by concept
    from knights_tour.counting import store as count_store
    from knights_tour.counting.client import submit_count, wait_for_count
    from knights_tour.counting.plan import CountPlan, SubJob, plan_count
    from knights_tour.counting.search import split
    from knights_tour.counting.symmetry import symmetry_classes
    from knights_tour.local.embedded_redis import EmbeddedRedis
    from knights_tour.local.workers import LocalWorkers
except ImportError:  # a tree from before them (PYTHONPATH=OLDER_TREE/src)
    from knights_tour.core.count_search import split
    from knights_tour.core.counting import CountPlan, SubJob, plan_count
    from knights_tour.core.symmetry import symmetry_classes
    from knights_tour.service.counts import submit_count, wait_for_count
    from knights_tour.service.embedded_redis import EmbeddedRedis
    from knights_tour.service.local_workers import LocalWorkers
    from knights_tour.store import counts as count_store

OEIS_A165134 = {5: 1728, 6: 6_637_920}


def make_plan(board, spec: str) -> CountPlan:
    """``default``, ``unfolded:K`` or ``folded:K`` (see the module docstring)."""
    if spec == "default":
        return plan_count(board)
    kind, _, depth = spec.partition(":")
    if kind == "folded":
        return plan_count(board, depth=int(depth))
    classes = symmetry_classes(board)
    subjobs = [
        SubJob(board.rows, board.cols, False, p)
        for rep in classes
        for p in split(board, rep, int(depth))
    ]
    return CountPlan(board, False, int(depth), classes, subjobs)


def _cpu_s(pids: list[int]) -> float:
    """CPU-seconds (user + system) used so far by the worker processes and their children."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            for p in [proc, *proc.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    t = p.cpu_times()
                    total += t.user + t.system
    return total


def run_once(url: str, plan: CountPlan, workers: int, pids: list[int]) -> dict:
    r = connect(url)
    cid = count_store.count_id_for(plan) + "-bench"
    count_store.delete_count(r, cid)
    count_store.register_count(r, cid, plan)
    cpu0 = _cpu_s(pids)
    t0 = time.perf_counter()
    submit_count(url, cid, plan.subjobs)
    status = wait_for_count(r, cid, timeout_s=600, poll_s=0.02)
    wall = time.perf_counter() - t0
    cpu = _cpu_s(pids) - cpu0
    assert status["complete"], status
    report = count_store.assemble_count(r, cid, plan, elapsed_s=wall)
    count_store.delete_count(r, cid)
    r.close()
    summed = float(msgspec.to_builtins(report.extra)["subjob_s"])  # a struct, a dict before
    return {
        "plan": f"d{plan.depth}{' folded' if getattr(plan, 'folded', False) else ''}",
        "subjobs": len(plan.subjobs),
        "nodes": report.nodes,
        "total": report.total,
        "counting_wall_s": round(wall, 3),
        "subjob_sum_s": round(summed, 3),
        "outside_worker_s": round(workers * wall - summed, 3),
        "worker_cpu_s": round(cpu, 3),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("size", nargs="?", default="6")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--plans", default="default,unfolded:3")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    board = parse_board(args.size)
    plans = {spec: make_plan(board, spec) for spec in args.plans.split(",")}
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp, EmbeddedRedis(tmp) as server:
        with LocalWorkers(server.url, args.workers) as local:
            pids = local.pids
            run_once(server.url, plan_count(parse_board("5")), args.workers, pids)  # warm up
            for _ in range(args.repeat):
                for spec, plan in plans.items():
                    row = run_once(server.url, plan, args.workers, pids) | {"spec": spec}
                    want = OEIS_A165134.get(board.rows) if board.is_square else None
                    assert want is None or row["total"] == want, row
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    print(
        f"\n{'plan':>14} {'sub-jobs':>8} {'nodes':>11} {'wall s':>7} {'sub-job s':>9} "
        f"{'outside w*s':>11} {'worker CPU s':>12}   (medians of {args.repeat})",
        file=sys.stderr,
    )
    for spec in plans:
        mine = [r for r in rows if r["spec"] == spec]
        med = {
            k: statistics.median(r[k] for r in mine)
            for k in ("counting_wall_s", "subjob_sum_s", "outside_worker_s", "worker_cpu_s")
        }
        print(
            f"{spec:>14} {mine[0]['subjobs']:>8} {mine[0]['nodes']:>11,} "
            f"{med['counting_wall_s']:>7.2f} {med['subjob_sum_s']:>9.2f} "
            f"{med['outside_worker_s']:>11.2f} {med['worker_cpu_s']:>12.2f}",
            file=sys.stderr,
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"board": board.label, "workers": args.workers, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

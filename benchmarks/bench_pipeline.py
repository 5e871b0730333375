"""Pipeline benchmark: the 620-job sweep (every start square of n=5..12) through Celery + Redis.

One command (starts its own embedded Redis and local workers, stops them at the end)::

    python benchmarks/bench_pipeline.py [--workers 2] [--chunks 1,4,16,32] [--verify]
        [--orders largest,given] [--no-engine] [--repeat N] [--json out.json]

For each chunk size (jobs per Celery task) it submits the sweep, waits for every record and
reports: wall time (submit -> last record), time to submit, the sum of the solvers' own times
(``elapsed_s``), of CP-SAT time (``cpsat_elapsed_s``), of whole-job times (``job_elapsed_s``), and
the Celery/Redis overhead estimated as ``workers * wall - sum(job_elapsed_s)`` (worker-seconds
not spent inside jobs). Figures depend on the machine; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter

from knights_tour.batches.client import submit_batch, wait_for_batch
from knights_tour.batches.jobs import make_batch_jobs
from knights_tour.batches.store import collect
from knights_tour.local.embedded_redis import EmbeddedRedis
from knights_tour.local.workers import LocalWorkers
from knights_tour.store.connection import connect


def run_once(
    url: str, workers: int, chunk: int, verify: str | None, largest_first: bool = True
) -> dict:
    jobs = make_batch_jobs(range(5, 13), verify=verify)
    t0 = time.perf_counter()
    batch_id = submit_batch(
        url, jobs, {"sizes": "5-12", "bench": True}, chunk_size=chunk, largest_first=largest_first
    )
    t_submit = time.perf_counter() - t0
    r = connect(url)
    status = wait_for_batch(r, batch_id, timeout_s=1800, poll_s=0.05)
    wall = time.perf_counter() - t0
    records = collect(r, batch_id)
    job_sum = sum(rec.job_elapsed_s or 0 for rec in records)
    return {
        "chunk_size": chunk,
        "verify": verify,
        "order": "largest" if largest_first else "given",
        "jobs": len(jobs),
        "tasks": -(-len(jobs) // chunk),
        "records": len(records),
        "counts": status["counts"],
        "mismatches": status["mismatches"],
        "wall_s": round(wall, 3),
        "submit_s": round(t_submit, 3),
        "solver_sum_s": round(sum(rec.elapsed_s or 0 for rec in records), 3),
        "cpsat_sum_s": round(sum(rec.cpsat_elapsed_s or 0 for rec in records), 3),
        "job_sum_s": round(job_sum, 3),
        "overhead_worker_s": round(workers * wall - job_sum, 3),
        "per_worker": dict(Counter(rec.worker for rec in records)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunks", default="1,4,16,32")
    ap.add_argument("--verify", action="store_true", help="also run with --verify cpsat")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument(
        "--orders",
        default="largest",
        help="comma list of send orders: largest (largest boards first), given",
    )
    ap.add_argument("--no-engine", action="store_true", help="skip the engine-only runs")
    ap.add_argument("--json", default=None, help="write the rows to this JSON file")
    args = ap.parse_args(argv)
    chunks = [int(c) for c in args.chunks.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp, EmbeddedRedis(tmp) as server:
        t0 = time.perf_counter()
        with LocalWorkers(server.url, args.workers) as _workers:
            startup = time.perf_counter() - t0
            print(f"{args.workers} workers ready in {startup:.2f} s", file=sys.stderr)
            modes = ([] if args.no_engine else [None]) + (["cpsat"] if args.verify else [])
            for verify in modes:
                for order in args.orders.split(","):
                    for chunk in chunks:
                        for _ in range(args.repeat):
                            row = run_once(
                                server.url,
                                args.workers,
                                chunk,
                                verify,
                                largest_first=order == "largest",
                            )
                            rows.append(row)
                            print(json.dumps(row), flush=True)
            t1 = time.perf_counter()
        print(f"workers stopped in {time.perf_counter() - t1:.2f} s", file=sys.stderr)
    print(
        f"\n{'verify':>7} {'order':>7} {'chunk':>5} {'tasks':>5} {'wall s':>7} {'submit s':>8} "
        f"{'solver s':>8} {'cpsat s':>7} {'jobs s':>7} {'overhead w*s':>12}"
    )
    for row in rows:
        print(
            f"{str(row['verify']):>7} {row['order']:>7} {row['chunk_size']:>5} {row['tasks']:>5} "
            f"{row['wall_s']:>7.2f} {row['submit_s']:>8.2f} {row['solver_sum_s']:>8.2f} "
            f"{row['cpsat_sum_s']:>7.2f} {row['job_sum_s']:>7.2f} {row['overhead_worker_s']:>12.2f}"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"workers": args.workers, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

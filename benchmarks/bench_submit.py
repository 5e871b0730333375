"""Submission benchmark: what the client pays to submit a batch into a real Redis.

One command, run from the repository root (it starts its own embedded Redis under a temporary
data dir, and stops it; no worker is started: the batch is submitted, then forgotten)::

    python benchmarks/bench_submit.py                                  # --sizes 5-66, 3 runs
    python benchmarks/bench_submit.py --src ../kt-base --src . --repeats 3

``--src DIR`` runs that tree's ``src/`` (through ``PYTHONPATH``; repeat it to measure before
and after in one invocation: the runs of the trees alternate, each on an emptied database of
the same server). ``git worktree add ../kt-base b152d27`` makes such a tree of an older commit.

Each run is a fresh interpreter that imports the client's modules (Celery's app module
included: not timed), then does what ``ktour run --sizes SIZES`` does to submit a batch:
:func:`knights_tour.batches.client.make_jobs` and
:func:`knights_tour.batches.client.start_or_resume` (the resume lookup, registering the batch
and its jobs, sending its tasks). Columns:

* ``make_s``: making the jobs; ``submit_s``: the rest; ``total_s``: both (wall seconds);
* ``client_cpu_s``: CPU seconds of the client process over both (user + system);
* ``redis_cpu_s``: CPU seconds of the Redis server over the run (``INFO cpu``);
* ``tasks``: task messages queued; ``queue_mb``: their ``MEMORY USAGE``; ``jobs_hash_mb``:
  ``MEMORY USAGE`` of the batch's jobs hash;
* ``load``: the 1-minute load average when the run started (the machine's other load:
  figures are only comparable at a similar load).

The summary gives each tree's median of every column and, with two trees or more, the last
tree's medians over the first's. ``--json PATH`` (default
``benchmarks/results/bench_submit.json``) keeps every run. Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import redis

from knights_tour.local.embedded_redis import EmbeddedRedis

_RUN = r"""
import json, sys, time
url, sizes = sys.argv[1], sys.argv[2]
try:  # the packages by concept
    from knights_tour.batches.jobs import JobOptions
    from knights_tour.batches import client as batches
    from knights_tour.worker.lazy import celery_worker
except ImportError:  # a tree from before them (--src of an older checkout)
    from knights_tour.core.jobs import JobOptions
    from knights_tour.service import batches
    from knights_tour.service._celery import celery_worker
celery_worker()  # Celery's app module: the client's imports are not what is timed here

w0, c0 = time.perf_counter(), time.process_time()
_, jobs, params = batches.make_jobs([sizes], JobOptions())
w1 = time.perf_counter()
batch_id, _, sent = batches.start_or_resume(url, jobs, params)
w2, c2 = time.perf_counter(), time.process_time()
print(json.dumps({"batch_id": batch_id, "jobs": len(jobs), "sent": sent,
                  "make_s": w1 - w0, "submit_s": w2 - w1, "total_s": w2 - w0,
                  "client_cpu_s": c2 - c0}))
"""

COLUMNS = (
    "src",
    "jobs",
    "tasks",
    "make_s",
    "submit_s",
    "total_s",
    "client_cpu_s",
    "redis_cpu_s",
    "queue_mb",
    "jobs_hash_mb",
    "load",
)
NUMERIC = COLUMNS[3:]


def _redis_cpu_s(r: redis.Redis) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _memory_mb(r: redis.Redis, keys: list[Any]) -> float:
    return sum(int(r.memory_usage(k, samples=0) or 0) for k in keys) / 2**20


def run_once(url: str, r: redis.Redis, sizes: str, src: Path | None) -> dict[str, Any]:
    """One submission of ``sizes`` by the tree ``src`` (None: the installed one) on an emptied
    database; its figures."""
    r.flushdb()
    env = dict(os.environ)
    env.pop("KT_REDIS_URL", None)
    if src is not None:
        env["PYTHONPATH"] = str(src / "src")
    load = os.getloadavg()[0]
    cpu_before = _redis_cpu_s(r)
    out = subprocess.run(
        [sys.executable, "-c", _RUN, url, sizes], env=env, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(f"the submission failed ({out.returncode}):\n{out.stderr[-3000:]}")
    row: dict[str, Any] = {"src": str(src) if src else "installed"}
    row.update(json.loads(out.stdout.strip().splitlines()[-1]))
    row["redis_cpu_s"] = _redis_cpu_s(r) - cpu_before
    queues = list(r.scan_iter(match="knights_tour*"))
    row["tasks"] = sum(int(r.llen(k)) for k in queues if r.type(k) == b"list")
    row["queue_mb"] = _memory_mb(r, queues)
    row["jobs_hash_mb"] = _memory_mb(r, [f"kt:batch:{row['batch_id']}:jobs"])
    row["load"] = load
    return row


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each tree's medians (in the order the trees were given), and with two trees or more a
    row of the last tree's medians over the first's."""
    srcs = list(dict.fromkeys(r["src"] for r in rows))
    out = []
    for src in srcs:
        mine = [r for r in rows if r["src"] == src]
        med = {c: statistics.median(r[c] for r in mine) for c in NUMERIC}
        out.append({"src": src, "jobs": mine[0]["jobs"], "tasks": mine[0]["tasks"], **med})
    if len(srcs) > 1:
        first, last = out[0], out[-1]
        ratio = {c: (last[c] / first[c] if first[c] else None) for c in NUMERIC if c != "load"}
        out.append({"src": "last / first", **ratio})
    return out


def print_table(rows: list[dict[str, Any]], title: str) -> None:
    """``rows`` as a Markdown table of :data:`COLUMNS`."""

    def cell(v: Any) -> str:
        return f"{v:.3f}" if isinstance(v, float) else ("" if v is None else str(v))

    print(f"\n{title}\n")
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for r in rows:
        print("| " + " | ".join(cell(r.get(c)) for c in COLUMNS) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="5-66", help="the boards of the batch (default 5-66)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each tree (default 3)")
    ap.add_argument(
        "--src",
        action="append",
        type=Path,
        default=None,
        metavar="DIR",
        help="source tree(s) to run (repeat to compare); default: the installed one",
    )
    ap.add_argument(
        "--json", dest="json_out", type=Path, default=Path("benchmarks/results/bench_submit.json")
    )
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix="kt-submit-") as tmp,
        EmbeddedRedis(Path(tmp), reuse=False) as server,
    ):
        r = redis.Redis.from_url(server.url)
        for _ in range(args.repeats):
            for src in args.src or [None]:
                rows.append(run_once(server.url, r, args.sizes, src))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        r.close()
    print_table(rows, "Every run")
    summary = summarise(rows)
    print_table(summary, "Medians")
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(
        json.dumps({"cores": os.cpu_count(), "runs": rows, "summary": summary}, indent=2) + "\n"
    )


if __name__ == "__main__":
    main()

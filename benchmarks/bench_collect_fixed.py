"""The fixed costs of ``ktour collect`` before its first page: ``batch_status`` (how far the
batch got) and ``record_keys`` (its record keys in record order), this tree against another
commit's, on the 5-66 sweep (97,991 jobs; issue 28 items 1 and 5).

    python benchmarks/bench_collect_fixed.py [--url REDIS_URL] [--base COMMIT] [--repeat 7]
        [--no-base] [--sizes 5-66] [--cache FILE] [--json out.json]

With ``--url``, the batch ``bench-collect-scale`` already stored there is read (nothing is
written); without it, an embedded Redis is filled from the records ``bench_collect.py
--scale`` solves and caches. Each run is a new process of one tree (``PYTHONPATH``), the two
trees in turn so that a change of load hits both; each prints the wall seconds of the two
calls and a digest of what they returned, which must be the same for both trees. Reported:
the median and the least of each, and the load average before and after.
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

from bench_collect import SCALE_BATCH, _base_tree, scale_rows

from knights_tour.batches.saving import save_records
from knights_tour.batches.store import create_batch
from knights_tour.local.embedded_redis import EmbeddedRedis
from knights_tour.store.connection import connect

ONE_RUN = """
import hashlib, json, sys, time
from knights_tour.batches.progress import batch_status
from knights_tour.batches.records import record_keys
from knights_tour.store.connection import connect
r = connect(sys.argv[1])
t0 = time.perf_counter()
status = batch_status(r, sys.argv[2])
t1 = time.perf_counter()
names = record_keys(r, sys.argv[2])
t2 = time.perf_counter()
digest = hashlib.sha256(json.dumps([status, names], sort_keys=True).encode()).hexdigest()
print(json.dumps({"batch_status_s": t1 - t0, "record_keys_s": t2 - t1, "digest": digest}))
"""


def one_run(src: Path, url: str) -> dict:
    """The seconds of ``batch_status`` and ``record_keys`` in a new process of tree ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", ONE_RUN, url, SCALE_BATCH],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def compare(url: str, trees: dict[str, Path], repeat: int) -> dict:
    """Each tree's runs, in turn, ``repeat`` times: medians, least, digests."""
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    out: dict = {"load_before": round(os.getloadavg()[0], 2)}
    for _ in range(repeat):
        for name, src in trees.items():
            runs[name].append(one_run(src, url))
    out["load_after"] = round(os.getloadavg()[0], 2)
    for name, rows in runs.items():
        for field in ("batch_status_s", "record_keys_s"):
            values = [row[field] for row in rows]
            out[f"{field[:-2]}_{name}_median_s"] = round(statistics.median(values), 3)
            out[f"{field[:-2]}_{name}_min_s"] = round(min(values), 3)
    digests = {row["digest"] for rows in runs.values() for row in rows}
    out["same_results"] = len(digests) == 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=None, help="a Redis holding the batch (read only)")
    ap.add_argument("--sizes", default="5-66", help="without --url: the sweep stored")
    ap.add_argument("--base", default="4be1790", help="the commit to compare with")
    ap.add_argument("--no-base", action="store_true", help="this tree only")
    ap.add_argument("--repeat", type=int, default=7, help="runs of each tree")
    ap.add_argument(
        "--cache",
        default=None,
        help="without --url: the solved records' file (default as bench_collect.py --scale's)",
    )
    ap.add_argument("--json", dest="json_out", default=None)
    args = ap.parse_args()
    root = Path(__file__).resolve().parents[1]
    cache = Path(args.cache or root / ".kt-data" / "bench-collect" / f"{args.sizes}.msgpack")
    trees = {"after": root / "src"}
    if not args.no_base:
        trees = {"before": _base_tree(args.base, cache.parent / f"base-{args.base}"), **trees}
    if args.url:
        out = compare(args.url, trees, args.repeat)
    else:
        jobs, rows = scale_rows(args.sizes, cache)
        with tempfile.TemporaryDirectory() as tmp, EmbeddedRedis(Path(tmp) / "redis") as server:
            r = connect(server.url)
            create_batch(r, jobs, params={"sizes": args.sizes}, batch_id=SCALE_BATCH)
            for i in range(0, len(rows), 5000):
                save_records(r, SCALE_BATCH, rows[i : i + 5000])
            out = compare(server.url, trees, args.repeat)
    out = {"base": None if args.no_base else args.base, **out}
    print(json.dumps(out, indent=2))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

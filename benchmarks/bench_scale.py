"""Scaling benchmark: ``ktour run`` wall time against K local workers, and what it costs.

One command, run from the repository root (each run starts its own embedded Redis under a
temporary data dir, and stops it)::

    python benchmarks/bench_scale.py                      # both workloads, K = 1, 2, 4, ... cores
    python benchmarks/bench_scale.py --workload sweep --workers 2 --check

Workloads: ``main`` = ``ktour run --sizes 5-12 --verify cpsat`` (620 jobs); ``sweep`` =
``ktour run --sizes 5-40`` (engine only, 22,110 jobs). ``--workers`` takes a list (default: the
powers of two up to ``os.cpu_count()``, and that count), so the script runs unchanged on a
machine with more cores. ``--src DIR`` runs another source tree (its ``src/``, through
``PYTHONPATH``): the same script measures the code before and after a change, in one session.

For every run it prints, as a table and a JSON file (``--json``, default
``benchmarks/results/bench_scale.json``):

* ``wall_s``: the ``ktour run`` process, launch to exit;
* ``submit_s``: the client's submission, from its start (before the jobs are made) to its last
  task sent, and ``to_submit_s``: launch to that start (both from the times the client notes
  in the batch's hash, :func:`knights_tour.batches.store.submission`; blank for a tree that
  notes none);
* ``batch_s``: the batch's time from the start of its submission to the last job's end, what
  the client's line "N/N jobs done in X s" states (``done_line_s``: that X, read from its
  stderr; it is printed at the first poll after the last job);
* ``jobs_s``: first job start to last job end (from the records' ``finished_at`` and
  ``job_elapsed_s``); ``before_first_s`` / ``after_last_s``: launch to first job start, last job
  end to exit (start-up and submission; collection, writing and shut-down);
* ``client_cpu_s``: CPU seconds (user + system) of the ``ktour`` process itself, not of its
  children (Redis, workers), read when it has exited, before it is reaped;
* ``client_rss_mb``: peak RSS of the ``ktour`` process (sampled every 0.1 s);
* ``redis_peak_mb``: peak ``used_memory`` of ``INFO memory`` during the run (sampled), and
  ``redis_rss_peak_mb``: peak RSS of the redis-server process;
* ``records_hash_bytes_per_record``: ``MEMORY USAGE`` of the batch's records hash over its
  records, and ``redis_used_bytes_per_record``: ``used_memory`` (after the run, the data dir
  reloaded) over the records;
* ``out_mb``: size of the JSON Lines file;
* ``floor_s``: the in-process floor, measured in the same run: the same jobs solved with no
  Celery and no Redis, by K processes of a ``multiprocessing`` pool (each with the engine
  loaded first, as a worker is), each record serialised to its JSON line and written to a
  file (interpreter start included, as in ``wall_s``), measured right before and right after
  the run and averaged, so that a load that changes during the run weighs on both
  (``floor_spread``: the slower of the two over the faster); ``wall_over_floor`` = wall_s /
  floor_s: what the plumbing costs around the solving;
* ``load_before`` / ``load_after``: the 1-minute load average when the run started and after
  the second floor (the machine's other load: the figures above are only comparable at a
  similar load).

``--check`` also runs ``ktour collect BATCH --format jsonl`` in a new process and compares its
bytes with the ``--out`` file, and ``ktour verify FILE --all``. Figures depend on the machine
(and on its other load); nothing here is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

WORKLOADS = {"main": ["--sizes", "5-12", "--verify", "cpsat"], "sweep": ["--sizes", "5-40"]}


def default_workers() -> list[int]:
    """1, 2, 4, ... up to the cores of this machine, and the core count itself."""
    cores = os.cpu_count() or 1
    ks = [1]
    while ks[-1] * 2 <= cores:
        ks.append(ks[-1] * 2)
    return ks if ks[-1] == cores else ks + [cores]


def _env(data_dir: Path, src: Path | None) -> dict[str, str]:
    env = dict(os.environ, KT_DATA_DIR=str(data_dir))
    env.pop("KT_REDIS_URL", None)
    if src is not None:
        env["PYTHONPATH"] = str(src / "src")
    return env


def _redis_client(data_dir: Path) -> redis.Redis | None:
    """A client of the embedded Redis of ``data_dir`` once its state file exists, else None."""
    state = data_dir / "redis" / "embedded-redis.json"
    try:
        s = json.loads(state.read_text())
        # No retries: once the run has stopped its Redis, a retrying client would hold the
        # sampling loop for seconds and the run's end would be noticed late.
        r = redis.Redis(
            host="127.0.0.1",
            port=int(s["port"]),
            password=s.get("password"),
            socket_timeout=1.0,
            socket_connect_timeout=1.0,
            retry=Retry(NoBackoff(), 0),
        )
        r.ping()
        return r
    except (OSError, ValueError, KeyError, redis.RedisError):
        return None


class _Sampler:
    """Peak RSS of the client and of its redis-server child; peak ``used_memory``."""

    def __init__(self, proc: psutil.Process, data_dir: Path) -> None:
        self.proc, self.data_dir = proc, data_dir
        self.client = self.redis_rss = self.redis_used = 0
        self._r: redis.Redis | None = None

    def sample(self) -> None:
        try:
            self.client = max(self.client, self.proc.memory_info().rss)
            for child in self.proc.children(recursive=True):
                if "redis-server" in child.name():
                    self.redis_rss = max(self.redis_rss, child.memory_info().rss)
        except psutil.Error:
            return
        if self._r is None:
            self._r = _redis_client(self.data_dir)
        if self._r is not None:
            try:
                self.redis_used = max(self.redis_used, int(self._r.info("memory")["used_memory"]))
            except redis.RedisError:
                self._r = None


def _batch_span(out: Path) -> tuple[int, float, float]:
    """(records, first job start, last job end) in unix seconds, streaming the file."""
    n, first, last = 0, float("inf"), 0.0
    with out.open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            n += 1
            end = float(rec.get("finished_at") or 0.0)
            if end:
                first = min(first, end - float(rec.get("job_elapsed_s") or 0.0))
                last = max(last, end)
    return n, first, last


def _stored_per_record(data_dir: Path, batch_id: str, env: dict[str, str]) -> dict[str, Any]:
    """Reopen the data dir's Redis (a fresh process, so only stored data counts) and measure
    the batch's records; ``submitted``: the ``[began, sent]`` unix seconds of its submission
    the client noted in the batch's hash, or None (a tree that notes none)."""
    code = (
        "import json,sys\n"
        "from pathlib import Path\n"
        "try:\n"
        "    from knights_tour.local.embedded_redis import EmbeddedRedis\n"
        "except ImportError:  # a tree from before the packages by concept (--src)\n"
        "    from knights_tour.service.embedded_redis import EmbeddedRedis\n"
        "import redis\n"
        "with EmbeddedRedis(Path(sys.argv[1])) as s:\n"
        "    r = redis.Redis.from_url(s.url)\n"
        "    k = f'kt:batch:{sys.argv[2]}:records'\n"
        "    note = r.hget(f'kt:batch:{sys.argv[2]}', 'submitted')\n"
        "    note = json.loads(note) if note else None\n"
        "    print(json.dumps({'records': r.hlen(k), 'hash': r.memory_usage(k, samples=0),\n"
        "        'used': int(r.info('memory')['used_memory']),\n"
        "        'submitted': [note['began'], note['sent']] if note else None}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(data_dir / "redis"), batch_id],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    m = json.loads(out.stdout.strip().splitlines()[-1])
    n = max(1, m["records"])
    return {
        "submitted": m["submitted"],
        "stored_records": m["records"],
        "records_hash_bytes_per_record": round(m["hash"] / n),
        "redis_used_bytes_per_record": round(m["used"] / n),
    }


def _check(data_dir: Path, batch_id: str, out: Path, env: dict[str, str]) -> dict[str, Any]:
    """``ktour collect`` from a new process is byte-identical; ``ktour verify --all`` passes."""
    again = out.with_suffix(".collected.jsonl")
    with again.open("wb") as fh:
        subprocess.run(
            [sys.executable, "-m", "knights_tour", "collect", batch_id, "--format", "jsonl"],
            env=env,
            stdout=fh,
            stderr=subprocess.DEVNULL,
        )
    ver = subprocess.run(
        [sys.executable, "-m", "knights_tour", "verify", str(out), "--all"],
        env=env,
        capture_output=True,
        text=True,
    )
    identical = again.read_bytes() == out.read_bytes()
    again.unlink()
    return {"collect_identical": identical, "verify_all_ok": ver.returncode == 0}


_FLOOR = r"""
import json, multiprocessing as mp, sys, time
try:  # the packages by concept
    from knights_tour.batches import jobs as job_types
    from knights_tour.batches.client import make_jobs
except ImportError:  # a tree from before them (--src of an older checkout)
    from knights_tour.core import jobs as job_types
    from knights_tour.service.batches import make_jobs
run_job = job_types.run_job

def warm():
    from knights_tour.solvers.warnsdorff import warm_up
    warm_up()

def line(job):
    rec = run_job(job)
    return rec.to_json() if hasattr(rec, "to_json") else json.dumps(rec, separators=(",", ":"))

if __name__ == "__main__":
    args, k, out = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    verify = args.get("verify", "none")
    if hasattr(job_types, "JobOptions"):
        options = job_types.JobOptions(verify=None if verify == "none" else verify)
        _, jobs, _ = make_jobs(args["sizes"], options)
    else:  # a tree from before JobOptions
        _, jobs, _ = make_jobs(args["sizes"], "warnsdorff", verify, False, False, None, None)
    jobs.sort(key=lambda j: j.rows * j.cols, reverse=True)
    with mp.get_context("fork").Pool(k, initializer=warm) as pool, open(out, "w") as fh:
        for text in pool.imap_unordered(line, jobs, chunksize=16):
            fh.write(text + "\n")
    print(len(jobs))
"""


def in_process_floor(workload: str, k: int, src: Path | None) -> float:
    """Wall seconds of the in-process floor of ``workload`` on ``k`` processes (see the module
    docstring), launch to exit."""
    argv = WORKLOADS[workload]
    args = {"sizes": [argv[argv.index("--sizes") + 1]]}
    if "--verify" in argv:
        args["verify"] = argv[argv.index("--verify") + 1]
    with tempfile.TemporaryDirectory(prefix="kt-floor-") as tmp:
        env = _env(Path(tmp) / "data", src)
        t0 = time.time()
        subprocess.run(
            [
                sys.executable,
                "-c",
                _FLOOR,
                json.dumps(args),
                str(k),
                str(Path(tmp) / "floor.jsonl"),
            ],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        return time.time() - t0


def run_once(workload: str, k: int, src: Path | None, check: bool) -> dict[str, Any]:
    """One ``ktour run`` of ``workload`` with ``k`` local workers; its figures."""
    with tempfile.TemporaryDirectory(prefix="kt-scale-") as tmp:
        data_dir, out = Path(tmp) / "data", Path(tmp) / "out.jsonl"
        env = _env(data_dir, src)
        cmd = [
            sys.executable,
            "-m",
            "knights_tour",
            "run",
            *WORKLOADS[workload],
            "--workers",
            str(k),
            "--out",
            str(out),
        ]
        floor_before = in_process_floor(workload, k, src)
        load = os.getloadavg()[0]
        t0 = time.time()
        proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        sampler = _Sampler(psutil.Process(proc.pid), data_dir)
        ended: list[float] = []
        cpu: list[float] = []

        def wait() -> None:
            # Waited for without reaping it: the exited process's own CPU times are still there
            os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
            ended.append(time.time())
            with contextlib.suppress(psutil.Error):
                times = sampler.proc.cpu_times()
                cpu.append(times.user + times.system)
            proc.wait()

        waiter = threading.Thread(target=wait)
        waiter.start()
        while waiter.is_alive():
            sampler.sample()
            waiter.join(0.1)
        t_end = ended[0]
        stdout, stderr = proc.communicate()
        if not out.exists():
            raise SystemExit(f"ktour run failed ({proc.returncode}):\n{stderr[-2000:]}")
        batch_id = stdout.strip().splitlines()[-1]
        n, first, last = _batch_span(out)
        stored = _stored_per_record(data_dir, batch_id, env)
        submitted = stored.pop("submitted")
        done_line = re.search(r"jobs done in ([0-9.]+) s", stderr)
        row: dict[str, Any] = {
            "workload": workload,
            "workers": k,
            "src": str(src) if src else "installed",
            "jobs": n,
            "exit": proc.returncode,
            "wall_s": round(t_end - t0, 2),
            "to_submit_s": round(submitted[0] - t0, 2) if submitted else None,
            "submit_s": round(submitted[1] - submitted[0], 2) if submitted else None,
            "batch_s": round(last - submitted[0], 2) if submitted else None,
            "done_line_s": float(done_line.group(1)) if done_line else None,
            "jobs_s": round(last - first, 2),
            "before_first_s": round(first - t0, 2),
            "after_last_s": round(t_end - last, 2),
            "client_cpu_s": round(cpu[0], 2) if cpu else None,
            "client_rss_mb": round(sampler.client / 2**20, 1),
            "redis_peak_mb": round(sampler.redis_used / 2**20, 1),
            "redis_rss_peak_mb": round(sampler.redis_rss / 2**20, 1),
            "out_mb": round(out.stat().st_size / 2**20, 1),
        }
        row.update(stored)
        floor_after = in_process_floor(workload, k, src)
        row["floor_s"] = round((floor_before + floor_after) / 2, 2)
        row["floor_spread"] = round(
            max(floor_before, floor_after) / min(floor_before, floor_after), 2
        )
        row["wall_over_floor"] = round(row["wall_s"] / row["floor_s"], 2)
        row["load_before"] = round(load, 1)
        row["load_after"] = round(os.getloadavg()[0], 1)
        if check:
            row.update(_check(data_dir, batch_id, out, env))
        return row


COLUMNS = (
    "workload",
    "workers",
    "jobs",
    "wall_s",
    "floor_s",
    "floor_spread",
    "wall_over_floor",
    "load_before",
    "load_after",
    "to_submit_s",
    "submit_s",
    "batch_s",
    "done_line_s",
    "jobs_s",
    "before_first_s",
    "after_last_s",
    "client_cpu_s",
    "client_rss_mb",
    "redis_peak_mb",
    "redis_rss_peak_mb",
    "records_hash_bytes_per_record",
    "redis_used_bytes_per_record",
    "out_mb",
)


def print_table(rows: list[dict[str, Any]]) -> None:
    """The rows as a Markdown table (the columns of :data:`COLUMNS`, then any checks)."""
    cols = list(COLUMNS) + [
        c for c in ("src", "collect_identical", "verify_all_ok") if any(c in r for r in rows)
    ]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", choices=[*WORKLOADS, "both"], default="both")
    ap.add_argument(
        "--workers",
        default=None,
        metavar="K,K,...",
        help="worker counts (default: powers of two up to the cores, and the cores)",
    )
    ap.add_argument(
        "--src",
        action="append",
        type=Path,
        default=None,
        metavar="DIR",
        help="source tree(s) to run (repeat to compare); default: the installed one",
    )
    ap.add_argument(
        "--sweep-sizes",
        default=None,
        metavar="LIST",
        help="boards of the sweep workload instead of 5-40 (a quick smoke run)",
    )
    ap.add_argument(
        "--check",
        action="store_true",
        help="also check collect == --out byte for byte, and verify --all",
    )
    ap.add_argument(
        "--json", dest="json_out", type=Path, default=Path("benchmarks/results/bench_scale.json")
    )
    args = ap.parse_args()
    if args.sweep_sizes:
        WORKLOADS["sweep"] = ["--sizes", args.sweep_sizes]
    ks = [int(k) for k in args.workers.split(",")] if args.workers else default_workers()
    workloads = list(WORKLOADS) if args.workload == "both" else [args.workload]
    rows = []
    for workload in workloads:
        for k in ks:
            for src in args.src or [None]:
                rows.append(run_once(workload, k, src, args.check))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print_table(rows)
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps({"cores": os.cpu_count(), "runs": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""How fast ``ktour status`` answers while a batch runs on two local workers, and what it shows.

A ``ktour run --sizes SIZES --solver cpsat`` is started as a subprocess on a fresh data dir
(embedded Redis, ``--workers`` local workers: what a user has running in one shell); once
``ktour status`` shows the batch running, this times, REPEATS times each, from a second "shell"
(a subprocess on the same data dir):

* ``ktour status`` (answered from the leases): wall seconds, and the CPU seconds of the process
  (user + sys: on a loaded machine the wall time mostly measures the wait for a core);
* the floor under it: ``python -c "import knights_tour.cli, knights_tour.commands.status"``
  (the interpreter and the imports any ``ktour status`` pays, no Redis), and under that the
  bare interpreter, ``python -c pass``;
* the part that is ``status``'s own: :func:`knights_tour.batches.status.batch_view` called in
  a process already attached to the embedded Redis (the Redis round trips and the arithmetic);
* ``ktour workers --timeout 1`` (a Celery ping plus inspect broadcast, what ``status`` waited
  for before it read the leases), for comparison.

It also counts how many of the status answers showed every worker busy on the batch. The run
is then stopped (SIGTERM, which ``ktour run`` takes as Ctrl-C: its batch is cancelled, the
embedded Redis stopped).

``--synthetic-sizes LIST`` instead builds a batch of those boards (one job per square, none
run) on a temporary embedded Redis, with 500 jobs held under a live lease, and times
``batch_view`` against ``batch_status`` (which reads every job key and status: what
``ktour status`` read, twice, before it used the tally and the leases).

``--compare SRC`` also times ``ktour status`` of the package in directory SRC (e.g. an older
checkout's ``src``, put first on ``PYTHONPATH``), interleaved answer by answer with this tree's
so both see the same load, and reports the ratios of the medians (wall and CPU seconds).

Usage::

    python benchmarks/bench_status.py [--sizes 20-22] [--workers 2] [--repeats 5]
                                      [--compare SRC] [--json FILE]
    python benchmarks/bench_status.py --synthetic-sizes 5-64 [--repeats 5] [--json FILE]

Figures go in ``benchmarks/README.md`` ("Status"), with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _env(data_dir: Path, workers: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KT_REDIS_URL"}
    return env | {"KT_DATA_DIR": str(data_dir), "KT_WORKERS": str(workers)}


def timed(args: list[str], env: dict[str, str]) -> tuple[float, float, str, int]:
    """``(wall s, CPU s, stdout, exit code)`` of ``python ARGS``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout, proc.returncode


def in_process(data_dir: Path, repeats: int) -> list[float]:
    """Seconds of each of ``repeats`` calls of ``batch_view`` on the newest batch, in this
    process attached to the embedded Redis of ``data_dir``."""
    os.environ["KT_DATA_DIR"] = str(data_dir)
    os.environ.pop("KT_REDIS_URL", None)
    from knights_tour.batches.progress import list_batches
    from knights_tour.batches.status import batch_view
    from knights_tour.local.backend import open_store

    out = []
    with open_store(None) as backend:
        batch_id = list_batches(backend.client, limit=1)[-1]["batch_id"]
        batch_view(backend.client, batch_id)  # a first call opens the connection
        for _ in range(repeats):
            began = time.perf_counter()
            batch_view(backend.client, batch_id)
            out.append(time.perf_counter() - began)
    return out


def synthetic(sizes: str, repeats: int, data_dir: Path) -> dict[str, object]:
    """``batch_view`` against ``batch_status`` on a batch of the boards ``sizes`` (see the
    module docstring), in this process."""
    from knights_tour.batches import progress, store
    from knights_tour.batches.jobs import make_batch_jobs
    from knights_tour.batches.status import batch_view
    from knights_tour.board import parse_board_list
    from knights_tour.local.embedded_redis import EmbeddedRedis
    from knights_tour.store.connection import connect
    from knights_tour.worker import leases
    from knights_tour.worker.ledger import Ledger

    server = EmbeddedRedis(data_dir / "redis", reuse=False)
    server.start()
    try:
        r = connect(server.url)
        jobs = make_batch_jobs(parse_board_list(sizes))
        batch_id = store.create_batch(r, jobs, {"sizes_asked": sizes})
        leases.open_lease(r, "bench:1:held", 600_000)
        leases.claim(r, Ledger.for_batch(batch_id), "bench:1:held", [j.key for j in jobs[:500]])
        view, full = [], []
        for _ in range(repeats):
            began = time.perf_counter()
            p = batch_view(r, batch_id)
            view.append(time.perf_counter() - began)
            began = time.perf_counter()
            progress.batch_status(r, batch_id, max_missing=0)
            full.append(time.perf_counter() - began)
        r.close()
    finally:
        server.stop()
    return {
        "jobs": len(jobs),
        "running": p["running"],
        "queued": p["queued"],
        "batch_view_s": _summary(view),
        "batch_status_s": _summary(full),
        "load_average": os.getloadavg(),
    }


def _summary(xs: list[float]) -> dict[str, object]:
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs), "all": xs}


def _wait_running(
    run: subprocess.Popen[bytes], err: Path, env: dict[str, str], timeout_s: float
) -> dict[str, object] | None:
    """The first ``ktour status --json`` that shows a worker busy on the run's batch, once the
    run has said it submitted it (None if the batch ended first or the time ran out).

    Raises
    ------
    SystemExit
        If the run failed (its last lines of stderr are the message).
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if run.poll() is not None and run.returncode != 0:
            raise SystemExit(f"ktour run failed ({run.returncode}): {err.read_text()[-800:]}")
        if "submitted" not in err.read_text():
            time.sleep(0.2)
            continue
        _, _, out, _ = timed(["-m", "knights_tour", "status", "--json"], env)
        try:
            p = json.loads(out)
        except ValueError:
            time.sleep(0.5)
            continue
        if p.get("complete"):
            return None
        if p.get("workers_busy"):
            return p
        time.sleep(0.2)
    return None


def _busy_in(out: str, workers: int) -> bool:
    """Does a ``ktour status`` answer show ``workers`` workers busy on the batch? (This tree:
    the ``workers:`` line; an older one listed them after ``on`` in its progress line.)"""
    m = re.search(r"^workers: (\d+) live, (\d+) on this batch$", out, re.M)
    if m:
        return int(m.group(2)) == workers
    m = re.search(r"^progress: .*; on (.+)$", out, re.M)
    return bool(m) and len(m.group(1).split(", ")) == workers


def compare(env: dict[str, str], src: str, repeats: int, workers: int) -> dict[str, object]:
    """Wall and CPU seconds of ``ktour status`` of this tree and of the tree in ``src``, answer
    by answer in turn, and how many answers of each showed every worker busy."""
    other = env | {"PYTHONPATH": os.pathsep.join([src, env.get("PYTHONPATH", "")])}
    walls: dict[str, list[float]] = {"this": [], "compare": []}
    cpus: dict[str, list[float]] = {"this": [], "compare": []}
    busy = {"this": 0, "compare": 0}
    for _ in range(repeats):
        for name, e in (("this", env), ("compare", other)):
            wall, cpu, out, _ = timed(["-m", "knights_tour", "status"], e)
            walls[name].append(wall)
            cpus[name].append(cpu)
            busy[name] += _busy_in(out, workers)
    ratio = statistics.median(walls["this"]) / statistics.median(walls["compare"])
    cpu_ratio = statistics.median(cpus["this"]) / statistics.median(cpus["compare"])
    return {
        "status_wall_s_this": _summary(walls["this"]),
        "status_wall_s_compare": _summary(walls["compare"]),
        "status_cpu_s_this": _summary(cpus["this"]),
        "status_cpu_s_compare": _summary(cpus["compare"]),
        "all_workers_busy_this": f"{busy['this']}/{repeats}",
        "all_workers_busy_compare": f"{busy['compare']}/{repeats}",
        "wall_ratio_this_over_compare_median": round(ratio, 3),
        "cpu_ratio_this_over_compare_median": round(cpu_ratio, 3),
    }


def measure(
    sizes: str, workers: int, repeats: int, data_dir: Path, src: str | None = None
) -> dict[str, object]:
    """Start the run, take the measurements, stop the run (see the module docstring)."""
    env = _env(data_dir, workers)
    err = data_dir / "run.err"
    with err.open("wb") as err_file:
        run = subprocess.Popen(
            [sys.executable, "-m", "knights_tour", "run", "--sizes", sizes, "--solver", "cpsat"]
            + ["--yes", "--out", str(data_dir / "r.jsonl")],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err_file,
        )
    figures: dict[str, object] = {"sizes": sizes, "workers": workers}
    try:
        first = _wait_running(run, err, env, timeout_s=300)
        figures["running_seen"] = first is not None
        if src is not None:
            figures |= compare(env, src, repeats, workers)
        status_wall, status_cpu, busy, shown = [], [], 0, ""
        for _ in range(repeats):
            wall, cpu, out, _ = timed(["-m", "knights_tour", "status"], env)
            status_wall.append(wall)
            status_cpu.append(cpu)
            busy += _busy_in(out, workers)
            shown = shown or (out if "workers:" in out else "")
        args = [__file__, "--in-process", str(data_dir), "--repeats", str(repeats)]
        _, _, out, _ = timed(args, env)
        figures["batch_view_in_process_s"] = _summary(json.loads(out))
        floor = "import knights_tour.cli, knights_tour.commands.status"
        floor_wall, floor_cpu, bare_wall, bare_cpu = [], [], [], []
        inspect_wall = []
        for _ in range(repeats):
            wall, cpu, _, _ = timed(["-c", floor], env)
            floor_wall.append(wall)
            floor_cpu.append(cpu)
            wall, cpu, _, _ = timed(["-c", "pass"], env)
            bare_wall.append(wall)
            bare_cpu.append(cpu)
            wall, _, _, _ = timed(["-m", "knights_tour", "workers", "--timeout", "1"], env)
            inspect_wall.append(wall)
        figures |= {
            "status_wall_s": _summary(status_wall),
            "status_cpu_s": _summary(status_cpu),
            "import_floor_wall_s": _summary(floor_wall),
            "import_floor_cpu_s": _summary(floor_cpu),
            "interpreter_wall_s": _summary(bare_wall),
            "interpreter_cpu_s": _summary(bare_cpu),
            "workers_inspect_wall_s": _summary(inspect_wall),
            "answers_with_all_workers_busy": f"{busy}/{repeats}",
            "batch_still_running": run.poll() is None,
            "example": shown,
            "load_average": os.getloadavg(),
        }
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGTERM)  # as Ctrl-C: the run cancels its batch, stops Redis
            try:
                run.wait(timeout=120)
            except subprocess.TimeoutExpired:
                run.kill()
                run.wait()
    return figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="20-22", help="boards of the CP-SAT run (default 20-22)")
    ap.add_argument("--workers", type=int, default=2, help="local workers (default 2)")
    ap.add_argument("--repeats", type=int, default=5, help="timings of each kind (default 5)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    ap.add_argument("--compare", metavar="SRC", help="also time ktour status of this tree")
    ap.add_argument("--synthetic-sizes", metavar="LIST", help="time a synthetic batch instead")
    ap.add_argument("--in-process", metavar="DATA_DIR", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.in_process:
        print(json.dumps(in_process(Path(args.in_process), args.repeats)))
        return 0
    with tempfile.TemporaryDirectory(prefix="kt-bench-status-") as tmp:
        if args.synthetic_sizes:
            figures = synthetic(args.synthetic_sizes, args.repeats, Path(tmp))
        else:
            figures = measure(args.sizes, args.workers, args.repeats, Path(tmp), args.compare)
    for key, value in figures.items():
        if isinstance(value, dict):
            print(
                f"{key}: min {value['min']:.4f}, median {value['median']:.4f}, "
                f"max {value['max']:.4f}"
            )
        elif key != "example":
            print(f"{key}: {value}")
    if figures.get("example"):
        print("example answer:\n" + str(figures["example"]))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

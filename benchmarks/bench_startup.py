"""Start-up and shut-down cost of ``ktour run`` on the embedded backend.

Two measurements, both on a fresh data dir per repeat (a temporary directory):

* the wall time of ``ktour run --sizes 5`` (25 trivial jobs) as a subprocess, REPEATS times,
  printed as min and median;
* the split of one such run into its parts, measured in this process through the service layer:
  embedded Redis up (answers PING), local workers up (answer a Celery ping), batch
  (submit to complete), workers stopped, Redis stopped.

Usage::

    python benchmarks/bench_startup.py [--repeats 5] [--workers K] [--main] [--compare SRC]

``--main`` also times the main job once (``ktour run --sizes 5-12 --verify cpsat``).
``--compare SRC`` also times the package found in directory SRC (e.g. an older checkout's
``src``, put first on ``PYTHONPATH``), interleaved run by run with this one so both see the
same machine load; the figures are then reported as ratios.
Figures go in ``benchmarks/README.md`` ("Start-up"), as ratios of one run before/after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def cli_wall(args: list[str], data_dir: Path, src: str | None = None) -> float:
    """Wall seconds of ``python -m knights_tour ARGS`` with ``KT_DATA_DIR=data_dir`` (the
    package from directory ``src`` if given)."""
    env = dict(os.environ, KT_DATA_DIR=str(data_dir))
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([src, env.get("PYTHONPATH", "")])
    env.pop("KT_REDIS_URL", None)
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "knights_tour", *args], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - began
    if proc.returncode != 0:
        raise SystemExit(f"ktour {' '.join(args)} failed ({proc.returncode}): "
                         f"{proc.stderr.decode(errors='replace')[-500:]}")
    return wall


def split(workers: int, data_dir: Path) -> dict[str, float]:
    """Seconds of each part of a ``--sizes 5`` run, driven through the service layer."""
    os.environ["KT_DATA_DIR"] = str(data_dir)
    os.environ.pop("KT_REDIS_URL", None)
    t0 = time.perf_counter()
    from knights_tour.service.batches import make_jobs, submit_batch, wait_for_batch
    from knights_tour.service.local import open_backend
    t_import = time.perf_counter()
    _, jobs, params = make_jobs(["5"], "warnsdorff", None, False, False, None, None)
    marks: dict[str, float] = {"import": t_import - t0}
    with open_backend(None, workers, start_workers=False,
                      notify=lambda m: None) as backend:
        marks["redis_up"] = time.perf_counter() - t_import
        t1 = time.perf_counter()
        backend.start_workers()
        marks["workers_started"] = time.perf_counter() - t1
        t2 = time.perf_counter()
        batch_id = submit_batch(backend.url, jobs, params=params)
        wait_for_batch(backend.client, batch_id, timeout_s=120, recover_url=backend.url)
        marks["batch"] = time.perf_counter() - t2
        local = backend.workers
        t3 = time.perf_counter()
        if local is not None:
            local.stop()
        marks["workers_stop"] = time.perf_counter() - t3
        t4 = time.perf_counter()
    marks["redis_stop"] = time.perf_counter() - t4
    marks["total"] = time.perf_counter() - t0
    return marks


def _summary(walls: list[float]) -> dict[str, object]:
    return {"min": min(walls), "median": statistics.median(walls), "all": walls}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--main", action="store_true", help="also time the main job once")
    parser.add_argument("--compare", default=None, metavar="SRC",
                        help="also time the package in directory SRC, interleaved")
    parser.add_argument("--json", default=None, help="write the figures to this JSON file")
    opts = parser.parse_args()
    extra = ["--workers", str(opts.workers)] if opts.workers else []
    variants = {"this": None} | ({"compare": opts.compare} if opts.compare else {})
    figures: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="kt-bench-startup-") as tmp:
        base = Path(tmp)
        walls: dict[str, list[float]] = {name: [] for name in variants}
        for i in range(opts.repeats + 1):  # the first round only warms caches
            for name, src in variants.items():
                wall = cli_wall(["run", "--sizes", "5", "--out", str(base / "o.jsonl"), *extra],
                                base / f"{name}{i}", src)
                if i:
                    walls[name].append(wall)
        for name, runs in walls.items():
            figures[f"sizes5_wall_s_{name}"] = _summary(runs)
            print(f"[{name}] ktour run --sizes 5: min {min(runs):.2f} s, median "
                  f"{statistics.median(runs):.2f} s over {len(runs)} runs")
        if opts.compare:
            for stat in ("min", "median"):
                ratio = (figures["sizes5_wall_s_this"][stat]  # type: ignore[index]
                         / figures["sizes5_wall_s_compare"][stat])  # type: ignore[index]
                print(f"ratio this/compare ({stat}): {ratio:.2f}")
        if opts.main:
            for name, src in variants.items():
                wall = cli_wall(["run", "--sizes", "5-12", "--verify", "cpsat", "--out",
                                 str(base / "main.jsonl"), *extra], base / f"main-{name}", src)
                figures[f"main_job_wall_s_{name}"] = wall
                print(f"[{name}] main job (--sizes 5-12 --verify cpsat): {wall:.2f} s")
        parts = split(opts.workers or os.cpu_count() or 1, base / "split")
        figures["split_s"] = parts
        print("split (this): " + ", ".join(f"{k} {v:.2f} s" for k, v in parts.items()))
    if opts.json:
        Path(opts.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()

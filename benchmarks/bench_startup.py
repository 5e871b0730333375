"""Start-up and shut-down cost of ``ktour run`` on the embedded backend.

Two measurements, both on a fresh data dir per repeat (a temporary directory):

* the wall time of ``ktour run --sizes 5`` (25 trivial jobs) as a subprocess, REPEATS times
  after one unrecorded round (it fills numba's and Python's caches of a tree just checked
  out), printed as min and median, with the default worker count (one, for a batch this
  small);
* the split of such a run into its parts, driven through the package's functions in a process of
  its own per variant (median of ``--split-repeats``): client imports, backend open (embedded
  Redis answering, local workers spawned), batch (submit to complete: includes the workers'
  start-up), collect (records to a file), workers stopped, Redis stopped.

* launch to first job: for each K of ``--first-job-workers`` (default 1, 2 and 16), ``ktour run
  --sizes 5 --workers K`` as a subprocess, ``--first-job-repeats`` times, each time the seconds
  from its launch to the start of its first job (from the records, as ``bench_scale.py``
  reads them) and its wall; K local workers should start no slower than 2. These runs have
  no unrecorded round, and each K = 16 run loads the machine for the run after it.

Every run of ``ktour`` also reports its CPU seconds (the command and the processes it reaped:
:func:`cli_wall`); on a shared machine they vary far less than the wall.

Usage::

    python benchmarks/bench_startup.py [--repeats 5] [--workers K] [--main [--main-repeats N]]
                                       [--first-job-workers 1,2,16] [--first-job-repeats N]
                                       [--compare SRC] [--json FILE]

``--main`` also times the main job (``ktour run --sizes 5-12 --verify cpsat``), interleaved
like the rest when comparing.
``--compare SRC`` also times the package found in directory SRC (e.g. an older checkout's
``src``, put first on ``PYTHONPATH``), interleaved run by run with this one so both see the
same machine load; the figures are then reported as ratios.
Figures go in ``benchmarks/README.md`` ("Start-up"), as ratios of one run before/after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_scale import _batch_span


def cli_wall(args: list[str], data_dir: Path, src: str | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of ``python -m knights_tour ARGS`` with
    ``KT_DATA_DIR=data_dir`` (the package from directory ``src`` if given). The CPU seconds are
    user + system time of the command and of every process it reaped, as the kernel accounts
    them for a waited child (its workers' parent, their nodes and pool processes, the embedded
    Redis it stopped): a figure that a loaded machine inflates far less than the wall."""
    env = dict(os.environ, KT_DATA_DIR=str(data_dir))
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([src, env.get("PYTHONPATH", "")])
    env.pop("KT_REDIS_URL", None)
    cpu_before = _children_cpu()
    began = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "knights_tour", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    wall = time.perf_counter() - began
    cpu = _children_cpu() - cpu_before
    if proc.returncode != 0:
        raise SystemExit(
            f"ktour {' '.join(args)} failed ({proc.returncode}): "
            f"{proc.stderr.decode(errors='replace')[-500:]}"
        )
    return wall, cpu


def _children_cpu() -> float:
    """User + system CPU seconds of this process's waited-for children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cli_first_job(
    workers: int, data_dir: Path, src: str | None = None
) -> tuple[float, float, float]:
    """(seconds from launch to the first job's start, wall seconds, CPU seconds as
    :func:`cli_wall` gives them) of ``ktour run --sizes 5 --workers WORKERS`` with
    ``KT_DATA_DIR=data_dir`` (the package from directory ``src`` if given)."""
    out = data_dir.parent / f"{data_dir.name}.jsonl"
    launched = time.time()
    wall, cpu = cli_wall(
        ["run", "--sizes", "5", "--workers", str(workers), "--out", str(out)], data_dir, src
    )
    _, first, _ = _batch_span(out)
    return first - launched, wall, cpu


def split(workers: int | None, data_dir: Path) -> dict[str, float]:
    """Seconds of each part of a ``--sizes 5`` run, driven in this process through the
    package's functions as ``ktour run`` drives them (whatever tree is first on ``sys.path``)."""
    os.environ["KT_DATA_DIR"] = str(data_dir)
    os.environ.pop("KT_REDIS_URL", None)
    t0 = time.perf_counter()
    try:  # the packages by concept
        from knights_tour.batches.client import (
            make_jobs,
            stream_records,
            submit_batch,
            wait_for_batch,
        )
        from knights_tour.batches.jobs import JobOptions
        from knights_tour.local.backend import open_backend
        from knights_tour.local.embedded_redis import EmbeddedRedis
    except ImportError:  # a tree from before them (--compare of an older checkout)
        from knights_tour.core.jobs import JobOptions
        from knights_tour.service.batches import (
            make_jobs,
            stream_records,
            submit_batch,
            wait_for_batch,
        )
        from knights_tour.service.embedded_redis import EmbeddedRedis
        from knights_tour.service.local import open_backend
    from knights_tour.output.recordfile import jsonl_bytes

    marks: dict[str, float] = {"import": time.perf_counter() - t0}
    redis_stop = [0.0]
    plain_stop = EmbeddedRedis.stop

    def timed_stop(self: EmbeddedRedis, *args: object, **kwargs: object) -> None:
        began = time.perf_counter()
        plain_stop(self, *args, **kwargs)
        redis_stop[0] += time.perf_counter() - began

    EmbeddedRedis.stop = timed_stop  # type: ignore[method-assign]
    _, jobs, params = make_jobs(["5"], JobOptions())
    t1 = time.perf_counter()
    with open_backend(None, workers, notify=lambda m: None) as backend:
        t2 = time.perf_counter()
        marks["backend_open"] = t2 - t1
        batch_id = submit_batch(backend.url, jobs, params=params)
        wait_for_batch(backend.client, batch_id, timeout_s=120, recover_url=backend.url)
        t3 = time.perf_counter()
        marks["batch"] = t3 - t2
        with open(data_dir / "o.jsonl", "wb") as out:
            out.writelines(map(jsonl_bytes, stream_records(backend.client, batch_id)))
        t4 = time.perf_counter()
        marks["collect"] = t4 - t3
    t5 = time.perf_counter()
    marks["workers_stop"] = t5 - t4 - redis_stop[0]
    marks["redis_stop"] = redis_stop[0]
    marks["total"] = t5 - t0
    return marks


def split_in(src: str | None, workers: int | None, data_dir: Path) -> dict[str, float]:
    """:func:`split` in a new process running the package in directory ``src`` (this tree if
    None)."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([src, env.get("PYTHONPATH", "")])
    args = [sys.executable, __file__, "--split-only", str(data_dir)]
    if workers:
        args += ["--workers", str(workers)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"split failed: {done.stderr[-800:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _summary(walls: list[float]) -> dict[str, object]:
    return {"min": min(walls), "median": statistics.median(walls), "all": walls}


def _ratio_lines(figures: dict[str, object], key: str) -> list[str]:
    this, other = figures[f"{key}_this"], figures[f"{key}_compare"]
    return [
        f"ratio this/compare ({stat}): {this[stat] / other[stat]:.2f}"  # type: ignore[index]
        for stat in ("min", "median")
    ]


def _interleaved(
    variants: dict[str, str | None], args: list[str], rounds: int, base: Path, tag: str, warm: bool
) -> dict[str, list[tuple[float, float]]]:
    """(wall, CPU) seconds of ``ktour ARGS`` per variant (:func:`cli_wall`), run by run in turn
    (a first, unrecorded round if ``warm``: it fills caches)."""
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for i in range(rounds + int(warm)):
        for name, src in variants.items():
            timed = cli_wall(
                [*args, "--out", str(base / f"{tag}.jsonl")], base / f"{tag}-{name}{i}", src
            )
            if i or not warm:
                runs[name].append(timed)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--main", action="store_true", help="also time the main job")
    parser.add_argument("--main-repeats", type=int, default=1)
    parser.add_argument("--split-repeats", type=int, default=3)
    parser.add_argument(
        "--first-job-workers",
        default="1,2,16",
        help="comma-separated K for the launch-to-first-job runs ('' for none)",
    )
    parser.add_argument("--first-job-repeats", type=int, default=5)
    parser.add_argument(
        "--compare",
        default=None,
        metavar="SRC",
        help="also time the package in directory SRC, interleaved",
    )
    parser.add_argument("--json", default=None, help="write the figures to this JSON file")
    parser.add_argument("--split-only", default=None, metavar="DIR", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.split_only:
        print(json.dumps(split(opts.workers, Path(opts.split_only))))
        return
    extra = ["--workers", str(opts.workers)] if opts.workers else []
    if opts.compare and not (Path(opts.compare) / "knights_tour").is_dir():
        # Otherwise the installed package would be timed twice and compared with itself.
        raise SystemExit(
            f"--compare {opts.compare}: no knights_tour package there "
            "(give the other tree's src directory)"
        )
    variants = {"this": None} | ({"compare": opts.compare} if opts.compare else {})
    figures: dict[str, object] = {"load_before": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="kt-bench-startup-") as tmp:
        base = Path(tmp)
        runs = [("sizes5", ["run", "--sizes", "5", *extra], opts.repeats, True)]
        if opts.main:
            runs.append(
                (
                    "main_job",
                    ["run", "--sizes", "5-12", "--verify", "cpsat", *extra],
                    opts.main_repeats,
                    False,
                )
            )
        for tag, args, rounds, warm in runs:
            timed = _interleaved(variants, args, rounds, base, tag, warm)
            for name, pairs in timed.items():
                wall, cpu = [p[0] for p in pairs], [p[1] for p in pairs]
                figures[f"{tag}_wall_s_{name}"] = _summary(wall)
                figures[f"{tag}_cpu_s_{name}"] = _summary(cpu)
                print(
                    f"[{name}] ktour {' '.join(args)}: min {min(wall):.2f} s, median "
                    f"{statistics.median(wall):.2f} s over {len(wall)} runs; CPU median "
                    f"{statistics.median(cpu):.2f} s (min {min(cpu):.2f})"
                )
            if opts.compare:
                print("\n".join(_ratio_lines(figures, f"{tag}_wall_s")))
                print("\n".join(_ratio_lines(figures, f"{tag}_cpu_s")))
        ks = [int(k) for k in opts.first_job_workers.split(",") if k]
        first: dict[str, list[tuple[float, float, float]]] = {}
        for i in range(opts.first_job_repeats):
            for k in ks:
                for name, src in variants.items():
                    first.setdefault(f"{name}_k{k}", []).append(
                        cli_first_job(k, base / f"first-{name}-k{k}-{i}", src)
                    )
        for key, runs in first.items():
            to_first = [r[0] for r in runs]
            walls = [r[1] for r in runs]
            cpus = [r[2] for r in runs]
            figures[f"first_job_s_{key}"] = _summary(to_first)
            figures[f"first_job_wall_s_{key}"] = _summary(walls)
            figures[f"first_job_cpu_s_{key}"] = _summary(cpus)
            print(
                f"[{key}] launch to first job: median {statistics.median(to_first):.2f} s "
                f"(min {min(to_first):.2f}); wall median {statistics.median(walls):.2f} s "
                f"(min {min(walls):.2f}); CPU median {statistics.median(cpus):.2f} s "
                f"(min {min(cpus):.2f}) over {len(runs)} runs"
            )
        for name, src in variants.items():
            parts = [
                split_in(src, opts.workers, base / f"split-{name}{i}")
                for i in range(opts.split_repeats)
            ]
            if not parts:  # --split-repeats 0
                continue
            median = {k: statistics.median(p[k] for p in parts) for k in parts[0]}
            figures[f"split_s_{name}"] = median
            print(
                f"split ({name}, median of {len(parts)}): "
                + ", ".join(f"{k} {v:.2f} s" for k, v in median.items())
            )
    figures["load_after"] = os.getloadavg()[0]
    print(f"load average: {figures['load_before']:.1f} before, {figures['load_after']:.1f} after")
    if opts.json:
        Path(opts.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()

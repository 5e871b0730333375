"""``ktour run`` killed by a signal leaves no process behind: its embedded Redis, its local
workers (with their pool processes) and the Redis watchdog all stop.

Each test starts a real ``ktour run`` on the embedded backend (a fresh data dir), waits until
its batch is submitted and its worker pool is up, captures every descendant PID with psutil,
sends the signal(s), and polls (generous deadline: the machine may be busy) until every
captured process is gone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

# A batch that runs for a while on two workers (CP-SAT cross-check of every job).
RUN_ARGS = ["run", "--sizes", "5-12", "--verify", "cpsat", "--workers", "2"]
DEADLINE_S = 120.0  # for start-up on a busy machine
GONE_S = 60.0  # for shut-down on a busy machine (on an idle one: a few seconds)


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _name(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return "?"


def _default_sigint() -> None:
    """In the child: SIGINT as a terminal's Ctrl-C (a test runner started in the background
    inherits it ignored, and Python then keeps ignoring it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_run(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    env = dict(os.environ, KT_DATA_DIR=str(tmp_path / "data"))
    env.pop("KT_REDIS_URL", None)
    err = tmp_path / "stderr.txt"
    with open(err, "wb") as err_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "knights_tour", *RUN_ARGS, "--out", str(tmp_path / "o.jsonl")],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err_file,
            cwd=tmp_path,
            preexec_fn=_default_sigint,
        )
    return proc, err


def _family_when_busy(proc: subprocess.Popen[bytes], err: Path) -> dict[str, list[psutil.Process]]:
    """Wait until the batch is submitted and the worker's pool processes run; return the
    descendants of ``proc`` by kind (redis, worker main, pool, watchdog)."""
    parent = psutil.Process(proc.pid)
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, err.read_text()
        family = parent.children(recursive=True)
        kinds: dict[str, list[psutil.Process]] = {
            "redis": [],
            "worker": [],
            "pool": [],
            "watchdog": [],
        }
        for p in family:
            line = _name(p)
            if "redis-server" in line:
                kinds["redis"].append(p)
            elif "celery" in line and p.ppid() == proc.pid:
                kinds["worker"].append(p)
            elif "embedded_redis" in line:
                kinds["watchdog"].append(p)
            else:
                kinds["pool"].append(p)
        if (
            "submitted" in err.read_text()
            and kinds["redis"]
            and kinds["worker"]
            and len(kinds["pool"]) >= 2
            and kinds["watchdog"]
        ):
            return kinds
        time.sleep(0.1)
    pytest.fail(f"ktour run did not get going within {DEADLINE_S} s: {err.read_text()}")


def _wait_gone(procs: list[psutil.Process], timeout_s: float = GONE_S) -> list[str]:
    """Poll until none of ``procs`` runs; return the command lines of those still running."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = [p for p in procs if _alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [_name(p) for p in procs if _alive(p)]


def _no_stale_server(tmp_path: Path) -> None:
    state = tmp_path / "data" / "redis" / "embedded-redis.json"
    if state.exists():
        pid = json.loads(state.read_text())["pid"]
        assert not psutil.pid_exists(pid) or "redis-server" not in _name(psutil.Process(pid))


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP])
def test_killed_run_leaves_no_process(tmp_path: Path, sig: int) -> None:
    proc, err = _start_run(tmp_path)
    try:
        kinds = _family_when_busy(proc, err)
        everything = [p for group in kinds.values() for p in group]
        os.kill(proc.pid, sig)
        proc.wait(timeout=GONE_S)
        assert proc.returncode != 0
        assert _wait_gone(everything) == []
        _no_stale_server(tmp_path)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_repeated_ctrl_c_stops_workers_before_redis(tmp_path: Path) -> None:
    proc, err = _start_run(tmp_path)
    try:
        kinds = _family_when_busy(proc, err)
        workers = kinds["worker"] + kinds["pool"]
        redis_procs = kinds["redis"]
        for _ in range(3):
            os.kill(proc.pid, signal.SIGINT)
            time.sleep(0.05)  # "pressed quickly": the test's pace, not a wait for a condition
        deadline = time.monotonic() + GONE_S
        while time.monotonic() < deadline:
            # Redis first, then the workers: a worker seen alive after Redis was seen gone
            # outlived it.
            redis_gone = not any(_alive(p) for p in redis_procs)
            workers_alive = [_name(p) for p in workers if _alive(p)]
            assert not (redis_gone and workers_alive), workers_alive
            if redis_gone:
                break
            time.sleep(0.02)
        # 130 from ktour's own handling; a Ctrl-C pressed after it has already stopped
        # everything and said so may end the interpreter by SIGINT instead (the shell shows
        # 130 for both): either way an orderly stop, without a traceback.
        assert proc.wait(timeout=GONE_S) in (130, -signal.SIGINT), err.read_text()
        said = err.read_text()
        assert "Traceback" not in said, said
        # The first Ctrl-C cancels the batch and says so; whether a later one lands while
        # ktour is still shutting down (then it also says "ktour: interrupted") is a race
        # between the test's presses and the shut-down.
        assert "cancelled by Ctrl-C" in said or said.rstrip().endswith("ktour: interrupted"), said
        assert _wait_gone(workers + redis_procs + kinds["watchdog"]) == []
        _no_stale_server(tmp_path)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

"""``ktour run`` interrupted (SIGINT, then SIGKILL if it has not exited) and run again with
the same arguments: the same batch is resumed and completes, no job recorded before the
interruption is computed again, and no process of the first run is alive 10 s after it ended
(polled).

A real ``ktour run`` subprocess with its embedded Redis and two local workers on a data dir
of the test's own. Fact: every start square of the 16x16 board has an open knight's tour
(every square of an even n x n board with n >= 6), so the batch ends with 256 ``found`` records.
A 16x16 CP-SAT job takes tens of milliseconds: the batch is far from done when it is interrupted.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
import redis
from _cli import KTOUR, ktour_env
from _polling import wait_for

pytestmark = [pytest.mark.fault, pytest.mark.timeout(300)]

ARGS = ["run", "--sizes", "16", "--solver", "cpsat", "--chunk-size", "2"]
TOTAL = 256
GONE_WITHIN_S = 10.0
"""The issue's promise. The run stops its workers and Redis before it exits (and SIGKILL makes
them stop by themselves): on an idle machine they are gone within a second or two."""


def _env(data_dir: Path) -> dict[str, str]:
    # Leases longer than the pause between the two runs: the killed workers' claims must be
    # let go by the interrupted run itself, not by their leases running out.
    env = ktour_env(KT_DATA_DIR=str(data_dir), KT_WORKERS="2", KT_LEASE_S="60")
    return env


def _default_sigint() -> None:
    """In the child: SIGINT as a terminal's Ctrl-C (a test runner started in the background
    inherits it ignored, and Python then keeps ignoring it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _embedded_client(data_dir: Path) -> redis.Redis | None:
    """A plain client on the run's embedded Redis (from its state file), once it answers."""
    try:
        state = json.loads((data_dir / "redis" / "embedded-redis.json").read_text())
        r = redis.Redis(
            host="127.0.0.1", port=state["port"], password=state["password"], decode_responses=True
        )
        r.ping()
        return r
    except (OSError, ValueError, KeyError, redis.RedisError):
        return None


def _progress(data_dir: Path) -> tuple[str, int] | None:
    r = _embedded_client(data_dir)
    if r is None:
        return None
    try:
        ids = r.zrange("kt:batches", 0, -1)
        if not ids:
            return None
        return ids[-1], r.hlen(f"kt:batch:{ids[-1]}:records")
    except redis.RedisError:
        return None
    finally:
        r.close()


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def _records(path: Path) -> dict[str, dict]:
    return {rec["job_key"]: rec for rec in map(json.loads, path.read_text().splitlines())}


def test_interrupted_run_resumes_the_same_batch(tmp_path):
    data = tmp_path / "data"
    env = _env(data)
    err1 = (tmp_path / "run1.err").open("w")
    first = subprocess.Popen(
        [*KTOUR, *ARGS, "--out", str(tmp_path / "first.jsonl")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=err1,
        preexec_fn=_default_sigint,
    )
    try:
        batch_id, _ = wait_for(
            lambda: (p := _progress(data)) and p[1] >= 6 and p, "the first records", 240
        )
        family = [psutil.Process(first.pid), *psutil.Process(first.pid).children(recursive=True)]
        first.send_signal(signal.SIGINT)
        try:
            wait_for(lambda: "cancelled" in (tmp_path / "run1.err").read_text(), "the cancel", 60)
        except AssertionError:
            raise AssertionError((tmp_path / "run1.err").read_text()[-2000:]) from None
        # The run now stops its workers, then its Redis; SIGKILL it if it is still there later.
        # (A SIGKILL before its Redis is stopped would orphan the embedded redis-server: it has
        # no parent-death watch yet.)
        with_deadline = time.monotonic() + 60
        while first.poll() is None and time.monotonic() < with_deadline:
            time.sleep(0.1)
    finally:
        if first.poll() is None:
            first.kill()
        first.wait(30)
        err1.close()
    try:
        wait_for(lambda: not _alive(family), "the first run's processes to end", GONE_WITHIN_S, 0.2)
    except AssertionError:
        left = [(p.pid, p.name(), " ".join(p.cmdline())[:80]) for p in _alive(family)]
        for p in _alive(family):  # ours: started by this test
            p.kill()
        raise AssertionError(f"alive {GONE_WITHIN_S:g} s after the kill: {left}") from None
    assert f"batch {batch_id} cancelled" in (tmp_path / "run1.err").read_text()
    assert first.returncode == 130  # interrupted, and it shut down by itself

    snap = tmp_path / "snap.jsonl"
    got = subprocess.run(
        [*KTOUR, "collect", batch_id, "--format", "jsonl", "--out", str(snap)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert got.returncode in (0, 1), got.stderr
    before = _records(snap)
    assert 0 < len(before) < TOTAL, len(before)

    second = subprocess.run(
        [*KTOUR, *ARGS, "--out", str(tmp_path / "second.jsonl")],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert second.returncode == 0, second.stderr
    assert (
        f"resuming batch {batch_id}: {len(before)} of {TOTAL} jobs already recorded"
        in second.stderr
    )
    assert second.stdout.strip().splitlines()[-1] == batch_id
    after = _records(tmp_path / "second.jsonl")
    assert len(after) == TOTAL and all(rec["status"] == "found" for rec in after.values())
    recomputed = [k for k, rec in before.items() if after[k]["finished_at"] != rec["finished_at"]]
    assert recomputed == [], "jobs recorded before the interruption were computed again"
    # The killed workers' jobs were sent once, by the resume, as a fresh start: no recovery
    # re-sent them and no death was blamed on them.
    assert "whose worker was lost" not in second.stderr, second.stderr
    assert [k for k, rec in after.items() if rec["attempts"] != 1] == []

"""``ktour run`` launches its embedded Redis, the watchdog and its workers before it loads the
rest (service/launching.py): what it launches ahead and when it does not, the launch lock that
keeps two processes from starting two servers on one data dir, and a run interrupted right
after the launch, which must leave no process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from knights_tour.service import launching
from knights_tour.service.embedded_redis import EmbeddedRedis
from knights_tour.service.launching import STATE_FILE, launch_ahead
from knights_tour.settings import get_settings

GONE_WITHIN_S = 15.0
"""A generous bound for a loaded machine: the run kills what it launched before it exits, and
the watchdog shuts a server down within its poll once no user is alive."""


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KT_DATA_DIR", str(tmp_path / "kt-data"))
    monkeypatch.delenv("KT_REDIS_URL", raising=False)
    get_settings.cache_clear()
    yield tmp_path / "kt-data"
    get_settings.cache_clear()


@pytest.mark.unit
def test_nothing_is_launched_ahead_for_a_url_no_worker_or_a_recorded_server(data_dir, monkeypatch):
    started: list[object] = []
    monkeypatch.setattr(launching, "launch_server", lambda *a: started.append(a))
    assert launch_ahead("redis://127.0.0.1:6379/0", None, 0.1) is None  # --redis
    assert launch_ahead(None, 0, 0.1) is None  # --workers 0 (refused before, by the command)
    state = data_dir / "redis" / STATE_FILE
    state.parent.mkdir(parents=True)
    state.write_text("{}")  # a server may run here: the backend attaches to it or replaces it
    assert launch_ahead(None, None, 0.1) is None
    monkeypatch.setenv("KT_REDIS_URL", "redis://127.0.0.1:6379/0")
    get_settings.cache_clear()
    state.unlink()
    assert launch_ahead(None, None, 0.1) is None
    assert started == []


def _ours(data_dir: Path) -> list[psutil.Process]:
    """Live processes whose command line or working directory is under ``data_dir``: the
    server (its ``--dir``), the watchdog (its cwd) and the workers (KT_REDIS_URL is not in the
    command line: found by their log files' names instead, through their open files)."""
    found = []
    for p in psutil.process_iter(["cmdline", "cwd", "status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            text = " ".join(p.info["cmdline"] or []) + " " + (p.info["cwd"] or "")
            files = " ".join(f.path for f in p.open_files())
            if str(data_dir) in text or str(data_dir) in files:
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return [p for p in found if p.pid != os.getpid()]


@pytest.mark.process
@pytest.mark.timeout(120)
def test_a_launched_server_and_its_workers_are_killed_when_not_taken_over(data_dir):
    launched = launch_ahead(None, 1, 0.1)
    assert launched is not None
    procs = [launched.server, launched.watchdog, launched.pool.proc, *launched.pool.workers]
    assert all(p.poll() is None for p in procs)
    launched.kill()
    assert all(p.poll() is not None for p in procs)
    launched.kill()  # twice is harmless


@pytest.mark.process
@pytest.mark.timeout(120)
def test_two_processes_starting_at_once_on_one_data_dir_share_one_server(tmp_path):
    servers = [EmbeddedRedis(tmp_path), EmbeddedRedis(tmp_path)]
    threads = [threading.Thread(target=s.start) for s in servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    try:
        assert servers[0].pid == servers[1].pid and servers[0].port == servers[1].port
        assert sorted(s.owned for s in servers) == [False, True]
    finally:
        for s in servers:
            s.stop()


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.process
@pytest.mark.timeout(180)
def test_ctrl_c_right_after_the_launch_leaves_no_process_behind(data_dir):
    env = {k: v for k, v in os.environ.items() if k != "KT_REDIS_URL"}
    env["KT_DATA_DIR"] = str(data_dir)
    proc = subprocess.Popen(
        [sys.executable, "-m", "knights_tour", "run", "--sizes", "5", "--out", "-"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )
    try:
        deadline = time.monotonic() + 60
        while not any(
            "celery_worker_main" in " ".join(c.cmdline())
            for c in psutil.Process(proc.pid).children()
        ):
            assert proc.poll() is None and time.monotonic() < deadline, "no worker launched"
            time.sleep(0.005)
        assert len(_ours(data_dir)) >= 2  # the server and the worker, at least: found by _ours
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130 and "Traceback" not in err, err
    deadline = time.monotonic() + GONE_WITHIN_S
    while _ours(data_dir):
        assert time.monotonic() < deadline, f"left running: {_ours(data_dir)}"
        time.sleep(0.1)

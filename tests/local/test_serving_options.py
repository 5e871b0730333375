"""The options of ``ktour redis`` and ``ktour worker`` (no process started: the commands
themselves are run in tests/commands/test_serving.py)."""

from __future__ import annotations

import socket
import stat

import pytest

from knights_tour.errors import KnightsTourError
from knights_tour.local.serving import (
    PASSWORD_FILE,
    redis_config,
    server_password,
    server_url,
    worker_options,
    write_config,
)
from knights_tour.store import keys


def test_a_generated_password_is_private_and_kept_for_the_next_start(tmp_path):
    first = server_password(tmp_path / "srv", None)
    saved = tmp_path / "srv" / PASSWORD_FILE
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600 and len(first) >= 16
    assert server_password(tmp_path / "srv", None) == first
    assert server_password(tmp_path / "other", None) != first
    assert server_password(tmp_path / "srv", "given-password") == "given-password"
    for bad in ("short", "has space in it", "x" * 129, "pass@word:1"):
        with pytest.raises(KnightsTourError, match="8 to 128 characters"):
            server_password(tmp_path / "srv", bad)


def test_the_server_is_configured_as_the_workers_require(tmp_path):
    srv = tmp_path / "srv"
    conf = write_config(srv, "0.0.0.0", 6400, "secret-pw")
    assert stat.S_IMODE(conf.stat().st_mode) == 0o600
    assert stat.S_IMODE(srv.stat().st_mode) == 0o700
    lines = dict(line.split(" ", 1) for line in conf.read_text().splitlines())
    expected = redis_config(srv, "0.0.0.0", 6400, "secret-pw").splitlines()
    assert lines == dict(line.split(" ", 1) for line in expected)
    assert lines["maxmemory-policy"] == "noeviction" and lines["appendonly"] == "yes"
    assert lines["requirepass"] == "secret-pw" and lines["port"] == "6400"
    assert lines["bind"] == "0.0.0.0" and lines["dir"] == f'"{srv.resolve()}"'


def test_the_printed_url_names_a_host_clients_can_reach():
    assert server_url("0.0.0.0", 6400, "pw") == f"redis://:pw@{socket.gethostname()}:6400/0"
    assert server_url("10.0.0.5", 6379, "pw") == "redis://:pw@10.0.0.5:6379/0"
    assert server_url("::1", 6379, "pw") == "redis://:pw@[::1]:6379/0"


def test_the_worker_consumes_the_project_queue_with_its_pool_and_name():
    assert worker_options("solver2@%h", 3, "info") == {
        "hostname": f"solver2@{socket.gethostname()}",
        "pool_cls": "prefork",
        "concurrency": 3,
        "queues": [keys.QUEUE],
        "loglevel": "INFO",
    }

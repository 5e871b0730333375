"""Security: JSON only on the wire, loopback-only servers, Redis passwords, no secrets in output.

* A pickled Celery message published straight to the queue with kombu is refused by a real
  worker: the pickle would create a file if it were ever loaded; the file never appears, no
  record is written, and the worker goes on with the next (JSON) message.
* The embedded Redis listens on 127.0.0.1 only, and refuses clients without its password;
  Celery workers listen on no port at all.
* Every URL the CLI and the workers print has its password masked.
"""

from __future__ import annotations

import json
import secrets
import socket
import uuid
from pathlib import Path

import psutil
import pytest
import redis
import yaml
from redis.backoff import NoBackoff
from redis.retry import Retry

from knights_tour.batches.client import submit_batch, wait_for_batch
from knights_tour.batches.jobs import make_batch_jobs
from knights_tour.batches.store import collect, create_batch
from knights_tour.cli import main
from knights_tour.local.embedded_redis import EmbeddedRedis
from knights_tour.local.workers import LocalWorkers
from knights_tour.settings import get_settings
from knights_tour.store import keys
from knights_tour.store.connection import connect
from knights_tour.worker.celery import celery_config
from knights_tour.worker.messages import TASK_RUN_JOBS

pytestmark = [pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[1]


class _Tripwire:
    """Unpickling this object creates the file at ``path`` (``open(path, "w")``)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _task_headers() -> dict:
    """Celery protocol-2 headers of a run_jobs task message."""
    task_id = str(uuid.uuid4())
    return {
        "lang": "py",
        "task": TASK_RUN_JOBS,
        "id": task_id,
        "root_id": task_id,
        "parent_id": None,
        "group": None,
        "retries": 0,
        "eta": None,
        "expires": None,
        "timelimit": [None, None],
        "argsrepr": "",
        "kwargsrepr": "",
        "origin": "test",
    }


def test_config_accepts_json_only():
    conf = celery_config(get_settings())
    assert conf["accept_content"] == ["json"] and conf["task_serializer"] == "json"
    assert conf["result_accept_content"] == ["json"] and conf["result_serializer"] == "json"


def test_a_pickled_message_is_refused_and_nothing_runs(redis_db_url, tmp_path, monkeypatch):
    from kombu import Connection, Exchange, Queue

    monkeypatch.setenv("KT_REDIS_URL", redis_db_url)
    get_settings.cache_clear()
    r = connect(redis_db_url)
    jobs = make_batch_jobs([5])[:2]
    batch_id = create_batch(r, jobs, {"test": "pickle"})
    tripwire = tmp_path / "unpickled-here"
    # What a pickled task would carry: (args, kwargs, embed), with a booby-trapped job.
    payload = ([batch_id, [jobs[0].to_dict(), _Tripwire(str(tripwire))]], {}, {})
    exchange = Exchange(keys.QUEUE, "direct")
    with Connection(redis_db_url) as conn:
        conn.Producer().publish(
            payload,
            serializer="pickle",
            exchange=exchange,
            routing_key=keys.QUEUE,
            declare=[Queue(keys.QUEUE, exchange, routing_key=keys.QUEUE)],
            headers=_task_headers(),
        )
    raw = [json.loads(m) for m in r.lrange(keys.QUEUE, 0, -1)]
    assert [m["content-type"] for m in raw] == ["application/x-python-serialize"]
    logs = tmp_path / "logs"
    try:
        with LocalWorkers(
            redis_db_url, count=1, node_prefix="pickle", log_dir=logs, loglevel="INFO"
        ):
            # A JSON batch behind the pickle: once it is done, the pickle has been dealt with.
            follow = submit_batch(redis_db_url, make_batch_jobs([5])[:1], {"test": "after"})
            assert wait_for_batch(r, follow, timeout_s=90)["complete"]
    finally:
        get_settings.cache_clear()
    log = "".join(p.read_text(errors="replace") for p in logs.glob("*.log"))
    # set aside before Celery would look at it: one ERROR line, the message kept aside
    refused = "set aside a malformed queue message (content type 'application/x-python-serialize'"
    assert refused in log, log[-2000:]
    assert r.llen(keys.dead_letters()) == 1
    assert not tripwire.exists(), "the worker unpickled an untrusted message"
    assert collect(r, batch_id) == [], "the pickled task ran"
    assert r.llen(keys.QUEUE) == 0  # refused and dropped, not redelivered forever


def test_embedded_redis_listens_on_loopback_only_and_needs_its_password(tmp_path):
    password = secrets.token_hex(8)
    with EmbeddedRedis(tmp_path / "redis", password=password, reuse=False) as server:
        proc = psutil.Process(server.pid)
        listening = [c for c in proc.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
        assert listening, "the server should listen somewhere"
        assert {c.laddr.ip for c in listening} == {"127.0.0.1"}
        client = redis.Redis(host="127.0.0.1", port=server.port, password=password)
        assert client.config_get("bind")["bind"] == "127.0.0.1"
        assert client.config_get("protected-mode")["protected-mode"] == "yes"
        client.close()
        # no retries: redis-py's default retries an authentication error with backoff (~4 s)
        once = Retry(NoBackoff(), 0)
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(host="127.0.0.1", port=server.port, retry=once).ping()
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(host="127.0.0.1", port=server.port, password="wrong", retry=once).ping()
        # Not reachable on the machine's other addresses.
        others = {
            a.address
            for addrs in psutil.net_if_addrs().values()
            for a in addrs
            if a.family == socket.AF_INET and not a.address.startswith("127.")
        }
        for ip in others:
            with socket.socket() as s, pytest.raises(OSError):
                s.settimeout(1.0)
                s.connect((ip, server.port))


def test_celery_workers_listen_on_no_port(local_workers):
    for pid in local_workers.pids:
        family = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
        for p in family:
            conns = p.net_connections(kind="inet")
            assert [c for c in conns if c.status == psutil.CONN_LISTEN] == []


def test_compose_uses_a_redis_password_and_binds_loopback():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    cmd = services["redis"]["command"]
    assert "--requirepass" in cmd and cmd[cmd.index("--requirepass") + 1].startswith("${")
    assert all(str(p).startswith("127.0.0.1:") for p in services["redis"].get("ports", []))
    url = services["worker"]["environment"]["KT_REDIS_URL"]
    assert url.startswith("redis://:${KT_REDIS_PASSWORD")
    # No password is committed anywhere in the compose file or an env example.
    for name in ("docker-compose.yml", ".env.example"):
        path = ROOT / name
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip().startswith("KT_REDIS_PASSWORD="):
                    value = line.split("=", 1)[1].strip()
                    assert value == "" or value.lower().startswith("change-me"), value


@pytest.fixture
def secret_server(tmp_path):
    password = "s3cret-" + secrets.token_hex(6)
    with EmbeddedRedis(tmp_path / "redis", password=password, reuse=False) as server:
        yield server, password


def test_cli_masks_the_password_in_everything_it_prints(secret_server, data_dir, capsys):
    server, password = secret_server
    url = server.url
    assert password in url
    code = main(["submit", "--sizes", "5", "--redis", url])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert password not in out + err and ":***@" in out
    batch_id = out.strip().splitlines()[-1]
    for args in (["status", batch_id, "--redis", url], ["batches", "--redis", url]):
        main(args)
        out, err = capsys.readouterr()
        assert password not in out + err
    # Wrong password, and a server that is not there: exit 2, one masked line, no traceback.
    wrong = url.replace(password, password + "-wrong")
    dead = f"redis://:{password}@127.0.0.1:{_free_port()}/0"
    for bad in (wrong, dead):
        code = main(["status", batch_id, "--redis", bad])
        out, err = capsys.readouterr()
        assert code == 2 and password not in out + err and "Traceback" not in err
        assert err.startswith("ktour: error:") and ":***@" in err


def test_worker_logs_do_not_show_the_password(secret_server, tmp_path):
    server, password = secret_server
    logs = tmp_path / "logs"
    with LocalWorkers(server.url, count=1, node_prefix="sec", log_dir=logs, loglevel="INFO"):
        pass
    text = "".join(p.read_text(errors="replace") for p in logs.glob("*.log"))
    assert "redis://" in text  # the banner names the broker...
    assert password not in text  # ...with the password masked


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_embedded_password_is_kept_in_a_private_state_file(tmp_path):
    with EmbeddedRedis(tmp_path / "redis", password=secrets.token_hex(8), reuse=False) as server:
        mode = server.state_path.stat().st_mode & 0o777
        assert mode == 0o600, oct(mode)

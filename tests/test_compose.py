"""Checks of the deployment files: docker-compose.yml, Dockerfile and .ci/run.

Docker is not needed: the compose file is validated against the Compose Specification JSON
schema (vendored in tests/data/compose-spec.json, see compose-spec.NOTICE) and its commands are
checked against the package (the Celery app module they name must import).
"""

from __future__ import annotations

import copy
import importlib
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = yaml.safe_load((Path(__file__).parent / "data" / "compose-spec.json").read_text())
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def _validator():
    # The vendored schema names draft 2019-09 by a URL jsonschema does not know; say it directly.
    return jsonschema.Draft201909Validator(SCHEMA)


def _duration_s(text: str) -> float:
    """Seconds in a Compose duration such as ``7m``, ``1m30s`` or ``90s``."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text)
    assert parts and "".join(a + b for a, b in parts) == text, f"bad duration {text!r}"
    return sum(float(a) * units[b] for a, b in parts)


def test_compose_file_matches_the_compose_spec_schema():
    errors = sorted(_validator().iter_errors(COMPOSE), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors]


def test_schema_rejects_a_broken_compose_file():
    broken = copy.deepcopy(COMPOSE)
    broken["services"]["worker"]["stop_grace_period_typo"] = "7m"
    assert list(_validator().iter_errors(broken))


def test_services_and_redis_hardening():
    services = COMPOSE["services"]
    assert {"redis", "worker", "beat"} <= set(services)
    redis = services["redis"]
    assert redis["image"].startswith("redis:7")
    cmd = " ".join(redis["command"])
    assert "--appendonly yes" in cmd
    assert "--maxmemory-policy noeviction" in cmd
    # the password only ever comes from the environment, and compose refuses to run without it
    assert re.search(r"--requirepass \$\{KT_REDIS_PASSWORD:\?[^}]*\}", cmd)
    for svc in services.values():
        for port in svc.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), port
    assert redis["healthcheck"]["test"][1:] == ["redis-cli", "-e", "ping"]
    assert services["worker"]["depends_on"]["redis"]["condition"] == "service_healthy"


def _strings(node):
    if isinstance(node, dict):
        for k, v in node.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _strings(v)
    else:
        yield str(node)


def test_no_literal_credentials_in_deploy_files():
    code_lines = [ln for ln in DOCKERFILE.splitlines() if not ln.lstrip().startswith("#")]
    values = list(_strings(COMPOSE)) + code_lines
    userinfos = [m.group(1) for v in values for m in re.finditer(r"redis://([^/@]*)@", v)]
    assert userinfos, "expected the workers' password-protected Redis URL in docker-compose.yml"
    for userinfo in userinfos:
        password = userinfo.partition(":")[2]
        assert password.startswith("${KT_REDIS_PASSWORD"), f"literal password {password!r}"


def test_commands_name_an_importable_celery_app():
    from celery import Celery

    from knights_tour.store import keys

    for name in ("worker", "beat"):
        cmd = COMPOSE["services"][name]["command"]
        assert cmd[0] == "celery"
        module = cmd[cmd.index("-A") + 1]
        mod = importlib.import_module(module)
        app = getattr(mod, "app", None) or getattr(mod, "celery", None)
        assert isinstance(app, Celery), f"{module} has no Celery app attribute"
    worker = COMPOSE["services"]["worker"]["command"]
    assert worker[worker.index("-Q") + 1] == keys.QUEUE
    assert "worker" in worker and "beat" in COMPOSE["services"]["beat"]["command"]


def test_worker_health_check_pings_its_own_node():
    test = COMPOSE["services"]["worker"]["healthcheck"]["test"]
    line = test[-1]
    assert "celery -A knights_tour.worker inspect ping" in line
    # $$ is compose's escape for a literal $ (evaluated by the container's shell)
    assert "-d celery@$$HOSTNAME" in line


def test_stop_grace_period_exceeds_the_soft_time_limit():
    worker = COMPOSE["services"]["worker"]
    soft = float(COMPOSE["x-kt-env"]["KT_SOFT_TIME_LIMIT_S"])
    assert worker["environment"]["KT_SOFT_TIME_LIMIT_S"] == COMPOSE["x-kt-env"]["KT_SOFT_TIME_LIMIT_S"]
    assert _duration_s(worker["stop_grace_period"]) > soft


def test_exactly_one_beat():
    beat = COMPOSE["services"]["beat"]
    assert beat.get("deploy", {}).get("replicas") == 1
    assert sum("beat" in svc.get("command", []) for svc in COMPOSE["services"].values()) == 1


def test_dockerfile_slim_python_and_non_root():
    lines = [ln.strip() for ln in DOCKERFILE.splitlines() if ln.strip() and not ln.startswith("#")]
    assert lines[0] == "FROM python:3.11-slim"
    assert any(re.match(r"RUN pip install \.(\s|$)", ln) for ln in lines)
    users = [ln.split()[1] for ln in lines if ln.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")


def test_ci_runs_exactly_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"<!-- test-command -->\s*```(?:bash|sh)?\n(.+?)\n```", readme)
    assert m, "README.md must mark its test command with <!-- test-command -->"
    command = m.group(1).strip()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    body = [ln for ln in ci if ln.strip() and not ln.startswith("#")]
    assert body[:2] == ["set -euo pipefail", 'cd "$(dirname "$0")/.."']
    assert body[-1] == command
    assert (ROOT / ".ci" / "run").stat().st_mode & 0o111


@pytest.mark.parametrize("duration, seconds", [("7m", 420), ("1m30s", 90), ("360s", 360)])
def test_duration_helper(duration, seconds):
    assert _duration_s(duration) == seconds

"""Checks of the deployment files: docker-compose.yml, Dockerfile and .ci/run.

Docker is not needed: the compose file is validated against the Compose Specification JSON
schema (vendored in tests/data/compose-spec.json, see compose-spec.NOTICE) and its commands are
checked against the package (the Celery app module they name must import).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((Path(__file__).parent / "data" / "compose-spec.json").read_text())
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


# What the services do with these files (Redis's persistence, eviction policy and password,
# the health checks passing and failing) is exercised by tests/deploy, which runs each
# service's own command line. The rules below hold for every service, present or added later.


def _published_host_ip(port: object) -> str | None:
    """Host IP of a Compose port entry (short syntax ``[IP:]HOST:CONTAINER[/proto]`` or the
    long syntax's ``host_ip``); None when the entry binds every interface."""
    if isinstance(port, dict):
        return port.get("host_ip")
    parts = str(port).split("/")[0].rsplit(":", 2)
    return parts[0] if len(parts) == 3 else None


@pytest.mark.parametrize(
    "entry, host_ip",
    [
        ("127.0.0.1:6379:6379", "127.0.0.1"),
        ("6379:6379", None),
        ("6379", None),
        ({"target": 80, "host_ip": "::1"}, "::1"),
    ],
)
def test_published_host_ip_reads_both_port_syntaxes(entry, host_ip):
    assert _published_host_ip(entry) == host_ip


def test_every_published_port_binds_loopback_only():
    published = [
        (name, port) for name, svc in COMPOSE["services"].items() for port in svc.get("ports", [])
    ]
    assert published, "Redis and Flower publish ports for the host's clients"
    for name, port in published:
        assert _published_host_ip(port) in ("127.0.0.1", "::1"), (name, port)


def test_every_service_on_redis_waits_for_it_to_be_healthy():
    """A service whose environment names the Redis service in a URL starts only once Redis's
    health check passes (else its first connection fails while Redis loads its data)."""
    users = [
        name
        for name, svc in COMPOSE["services"].items()
        if any("@redis:" in v for v in _strings(svc.get("environment", {})))
    ]
    assert {"worker", "beat", "flower"} <= set(users)
    for name in users:
        depends = COMPOSE["services"][name].get("depends_on", {})
        assert depends.get("redis", {}).get("condition") == "service_healthy", name


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
    from celery.app.utils import find_app

    from knights_tour.store import keys

    for name in ("worker", "beat"):
        cmd = COMPOSE["services"][name]["command"]
        assert cmd[0] == "celery"
        module = cmd[cmd.index("-A") + 1]
        app = find_app(module)  # how `celery -A` finds the app of a module or a package
        assert isinstance(app, Celery), f"{module} has no Celery app"
    worker = COMPOSE["services"]["worker"]["command"]
    assert worker[worker.index("-Q") + 1] == keys.QUEUE
    assert "worker" in worker and "beat" in COMPOSE["services"]["beat"]["command"]


def test_stop_grace_period_exceeds_the_soft_time_limit():
    """A warm shutdown waits longer than a task may run, so running jobs end on their own."""
    worker = COMPOSE["services"]["worker"]
    soft = float(worker["environment"].get("KT_SOFT_TIME_LIMIT_S", 300))
    assert _duration_s(worker["stop_grace_period"]) > soft


def test_exactly_one_beat():
    """Two schedulers would send every periodic task twice: one service runs beat, and it is
    not scaled."""
    beats = [svc for svc in COMPOSE["services"].values() if "beat" in svc.get("command", [])]
    assert len(beats) == 1 and beats[0].get("deploy", {}).get("replicas") == 1


def test_dockerfile_python_satisfies_the_package_and_runs_as_non_root():
    import tomllib

    from packaging.specifiers import SpecifierSet

    lines = [ln.strip() for ln in DOCKERFILE.splitlines() if ln.strip() and not ln.startswith("#")]
    base = re.fullmatch(r"FROM python:(\d+\.\d+)(-\S+)?", lines[0])
    assert base, lines[0]
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert SpecifierSet(requires).contains(base.group(1)), (base.group(1), requires)
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

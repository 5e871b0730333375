"""Fixture of the deployment tier: every docker-compose.yml service started as a local process.

``compose_stack`` (module scope) interpolates docker-compose.yml with ``.env.example`` (plus
``KT_SCHEDULE_HOST_FILE``, the compose file's own knob, naming a seconds-scale schedule), turns
each service into a local command line (``_composekit.localize``), and starts them in compose's
order: Redis first, the others once Redis's health check passes (``depends_on:
service_healthy``). Every process binds 127.0.0.1 only and is stopped by the finaliser, in
reverse order (see ``_stack.py``).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from _composekit import load_compose, localize
from _stack import SCHEDULE, Stack, interpolation_env, run_health_check, wait_for

from knights_tour.local.prelaunch import free_port


@pytest.fixture(scope="module")
def compose_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """All compose services running locally (see the module docstring)."""
    tmp = tmp_path_factory.mktemp("compose")
    schedule = tmp / "schedule.toml"
    schedule.write_text(SCHEDULE)
    compose = load_compose(interpolation_env(schedule))
    redis_port, flower_port = free_port(), free_port()
    published = {6379: redis_port, 5555: flower_port}
    services = {
        name: localize(name, compose, redis_port, published, tmp / "scratch")
        for name in compose["services"]
    }
    (tmp / "logs").mkdir()
    # the container hostname stands for the host's: Celery names the worker celery@<gethostname()>
    stack = Stack(compose, services, redis_port, flower_port, socket.gethostname(), tmp / "logs")
    try:
        stack.start("redis")
        wait_for(
            "redis health check",
            lambda: run_health_check(stack, "redis").returncode == 0,
            alive=stack.check_alive,
        )
        for name in ("worker", "beat", "flower"):
            stack.start(name)
        yield stack
    finally:
        for name in reversed(list(stack.procs)):
            stack.stop(name)

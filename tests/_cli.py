"""The command line in a test: run in the test's own process (``main`` with its exit code and
the output captured by pytest's ``capsys``), or as a ``ktour`` process of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from knights_tour.cli import main

KTOUR = (sys.executable, "-m", "knights_tour")
"""The command line of ``ktour`` as a process of its own: this interpreter running the package."""


def run_cli(capsys: Any, *args: str) -> tuple[int, str, str]:
    """Run ``ktour ARGS...`` through :func:`knights_tour.cli.main`; return its exit code and
    what it wrote to stdout and stderr."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def ktour_env(**extra: str) -> dict[str, str]:
    """The environment of a ``ktour`` process: this process's, without ``KT_REDIS_URL`` (a
    test names its Redis), with ``extra`` on top."""
    env = {k: v for k, v in os.environ.items() if k != "KT_REDIS_URL"}
    env.update(extra)
    return env


def start_ktour(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """Start ``ktour ARGS`` as a process of its own with ``env`` as its whole environment,
    its stdout and stderr piped (text); the caller waits for it or kills it."""
    return subprocess.Popen(
        [*KTOUR, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def ktour(
    *args: str,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    cwd: Path | None = None,
    timeout: float = 180.0,
) -> subprocess.CompletedProcess[str]:
    """Run ``ktour ARGS`` as a process of its own, to its end (``timeout`` seconds at most) and
    return it with its output; ``env`` entries go on top of :func:`ktour_env`."""
    return subprocess.run(
        [*KTOUR, *args],
        env=ktour_env(**(env or {})),
        input=stdin,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )

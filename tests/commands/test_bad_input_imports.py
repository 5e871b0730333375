"""``ktour run`` / ``submit`` refuse bad input before they load what the work needs: a
malformed size, an unknown solver, a bad limit, ``--workers 0`` without a Redis URL or a
malformed Redis URL is refused without rich, numpy, the solvers' dependencies, Celery or even
redis-py; an unreachable Redis with redis-py alone (one PING), not the batch machinery.
``ktour workers`` refuses a malformed or unreachable Redis URL before it loads Celery.

Each case runs ``python -X importtime -m knights_tour ...`` (Python's own list of every module
it imported) with a fresh, empty data dir; the message and exit code are those pinned by
tests/commands/test_failures.py. Port 1 of the loopback has no server: connection refused.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from _importtime import run_importtime

pytestmark = pytest.mark.process

HEAVY = ("numpy", "numba", "ortools", "pyarrow", "rich", "celery", "kombu", "billiard", "psutil")
"""Top-level packages a refused ``ktour run`` / ``submit`` must not load."""


def _ktour(args: list[str], data_dir: Path) -> tuple[subprocess.CompletedProcess, set[str]]:
    """``python -X importtime -m knights_tour ARGS``: the process and the modules it loaded."""
    return run_importtime(["-m", "knights_tour", *args], data_dir, data_dir.parent)


def _error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("ktour:")]


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["run", "--sizes", "abc"], "cannot read board size 'abc'"),
        (["run", "--sizes", "5", "--solver", "nope"], "unknown solver 'nope'"),
        (["run", "--sizes", "5", "--time-limit", "-1"], "Invalid value for '--time-limit'"),
        (["run", "--sizes", "5", "--workers", "0"], "0 starts no worker"),
        (
            ["run", "--sizes", "5", "--workers", "0", "--redis", "redis://127.0.0.1:1/abc"],
            "database 'abc' is not a number",
        ),
        (
            ["submit", "--sizes", "5", "--redis", "http://127.0.0.1:1/0"],
            "scheme 'http'; use redis://, rediss:// or unix://",
        ),
    ],
)
def test_bad_input_is_refused_before_redis_py_or_the_batch_machinery_loads(
    tmp_path: Path, args: list[str], fragment: str
) -> None:
    proc, modules = _ktour(args, tmp_path / "kt-data")
    lines = _error_lines(proc)
    assert proc.returncode == 2 and len(lines) == 1 and fragment in lines[0], proc.stderr[-2000:]
    assert "knights_tour.commands._checks" in modules  # the list is the real one
    loaded = sorted(m for m in modules if m.split(".")[0] in (*HEAVY, "redis"))
    assert loaded == []
    assert not (tmp_path / "kt-data").exists()  # nothing started


@pytest.mark.parametrize("command", ["run", "submit"])
def test_an_unreachable_redis_is_refused_before_the_batch_machinery_loads(
    tmp_path: Path, command: str
) -> None:
    url = "redis://127.0.0.1:1/0"
    proc, modules = _ktour([command, "--sizes", "5", "--redis", url], tmp_path / "kt-data")
    lines = _error_lines(proc)
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
    assert lines[0].startswith(f"ktour: error: cannot reach Redis at {url}: ")
    assert "redis" in modules  # reached through redis-py (connect), as the backend does
    assert sorted(m for m in modules if m.split(".")[0] in HEAVY) == []
    assert "knights_tour.commands._following" not in modules


@pytest.mark.parametrize(
    "url, fragment",
    [
        ("redis://127.0.0.1:1/abc", "database 'abc' is not a number"),
        ("redis://127.0.0.1:1/0", "cannot reach Redis at redis://127.0.0.1:1/0: "),
    ],
)
def test_workers_refuses_a_bad_redis_before_celery_loads(
    tmp_path: Path, url: str, fragment: str
) -> None:
    proc, modules = _ktour(["workers", "--redis", url], tmp_path / "kt-data")
    lines = _error_lines(proc)
    assert proc.returncode == 2 and len(lines) == 1 and fragment in lines[0], proc.stderr[-2000:]
    assert "knights_tour.worker.monitor" in modules  # the list is the real one
    unwanted = ("numpy", "pyarrow", "celery", "kombu", "billiard")  # rich draws its table
    assert sorted(m for m in modules if m.split(".")[0] in unwanted) == []

"""The commands that send no task load no Celery or kombu module: ``ktour solve``, ``verify``,
``draw`` (to the terminal and to SVG) and ``status`` of a finished batch, each run as
``python -X importtime -m knights_tour ...`` (Python's own list of every module it imported).

The import-linter contract ``celery-boundary`` (pyproject.toml) keeps Celery and kombu out of
the modules' top-level imports; this checks what a user's process really loads.

Facts: colour parity - on 5x5 an open tour starts only on the 13 squares of the majority
colour, so a sweep of 5x5 has 13 found and 12 no_tour.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from _importtime import run_importtime

from knights_tour.batches.jobs import make_batch_jobs, run_job
from knights_tour.batches.saving import save_record
from knights_tour.batches.store import create_batch


def _ktour(tmp: Path, *args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    return run_importtime(["-m", "knights_tour", *args], tmp / "data", tmp)


def _celery_modules(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in ("celery", "kombu", "billiard"))


@pytest.fixture(scope="module")
def tour_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("boundary")
    proc, modules = _ktour(tmp, "solve", "5", "a1", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not _celery_modules(modules), _celery_modules(modules)
    out = tmp / "tour.json"
    out.write_text(proc.stdout)
    assert json.loads(proc.stdout)["status"] == "found"
    return out


def test_the_probe_sees_celery_where_it_is_loaded(tmp_path: Path):
    """The check can fail: a process that imports the Celery app module is caught by it."""
    proc, modules = run_importtime(["-c", "import knights_tour.worker.celery"], tmp_path, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {"celery", "kombu"} <= set(_celery_modules(modules))


@pytest.mark.parametrize(
    "args",
    [("verify", "{tour}"), ("draw", "{tour}"), ("draw", "{tour}", "--svg", "{tmp}/tour.svg")],
    ids=["verify", "draw", "draw-svg"],
)
def test_offline_commands_load_no_celery(tour_file: Path, tmp_path: Path, args):
    argv = [a.format(tour=tour_file, tmp=tmp_path) for a in args]
    proc, modules = _ktour(tmp_path, *argv)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "knights_tour.cli" in modules  # the probe saw the command's imports
    assert not _celery_modules(modules), _celery_modules(modules)


def test_status_of_a_finished_batch_loads_no_celery(redis_client, redis_db_url, tmp_path):
    jobs = make_batch_jobs([5])
    batch_id = create_batch(redis_client, jobs, params={"sizes": "5"})
    for job in jobs:
        save_record(redis_client, batch_id, run_job(job, batch_id=batch_id))
    proc, modules = _ktour(tmp_path, "status", batch_id, "--redis", redis_db_url, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    status = json.loads(proc.stdout)
    assert status["complete"] is True
    assert Counter({k: v for k, v in status["counts"].items() if v}) == Counter(
        found=13, no_tour=12
    )  # colour parity on 5x5
    assert not _celery_modules(modules), _celery_modules(modules)

"""``ktour status`` of a batch in progress loads no numpy, no solver dependency, no rich and no
Celery: it reads the batch's bookkeeping keys and the workers' leases (``batches/progress.py``,
``batches/status.py``), never a job or a record, and prints plain text, so its process is the
interpreter, click and the Redis client. That is what keeps its answer near half a second on a
loaded 2-core machine (benchmarks/bench_status.py).

Each case runs ``python -X importtime -m knights_tour status ...`` (Python's own list of every
module it imported) from a new process against the embedded Redis of a data dir that this
process keeps running, as a second shell sees it during ``ktour run``: a batch of 5x5 with a
few records stored and a chunk of jobs held under a worker's live lease.

Facts: colour parity - on 5x5 an open tour starts only on the 13 squares of the majority
colour, so 13 of the 25 jobs find a tour and 12 prove there is none.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from _importtime import run_importtime

from knights_tour.batches import saving, store
from knights_tour.batches.jobs import make_batch_jobs, run_job
from knights_tour.local.embedded_redis import EmbeddedRedis
from knights_tour.store.connection import connect
from knights_tour.worker import leases
from knights_tour.worker.ledger import Ledger

HEAVY = ("numpy", "numba", "ortools", "rich", "celery", "kombu", "billiard")
"""Top-level packages ``ktour status`` must not load."""

RECORD_SIDE = (
    "knights_tour.tours.record",
    "knights_tour.batches.jobs",
    "knights_tour.tours.stored",
)
"""The job and record types (numpy behind them)."""

HELD = 8
"""Jobs claimed under the live lease (a chunk)."""

DONE = 5
"""Jobs with a record stored."""


def _python(args: list[str], data_dir: Path) -> tuple[subprocess.CompletedProcess, set[str]]:
    """``python -X importtime ARGS`` on ``data_dir``: the process and the modules it loaded."""
    return run_importtime(args, data_dir, data_dir)


def _unwanted(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY or m in RECORD_SIDE)


@pytest.fixture(scope="module")
def batch_in_progress(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """(data dir with a running embedded Redis, id of a 25-job batch of 5x5: ``DONE`` records
    stored, ``HELD`` more held under a live worker lease)."""
    data_dir = tmp_path_factory.mktemp("status-imports")
    with EmbeddedRedis(data_dir / "redis", password=secrets.token_hex(8)) as server:
        r = connect(server.url)
        try:
            jobs = make_batch_jobs([5])
            batch_id = store.create_batch(r, jobs, params={"sizes": "5", "sizes_asked": "5"})
            for job in jobs[:DONE]:
                saving.save_record(r, batch_id, run_job(job, batch_id=batch_id))
            token = f"worker-host:{os.getpid()}:{secrets.token_hex(4)}"
            assert leases.open_lease(r, token, 600_000)
            held = [j.key for j in jobs[DONE : DONE + HELD]]
            leases.claim(r, Ledger.for_batch(batch_id), token, held)
            yield data_dir, batch_id
        finally:
            r.close()


def test_the_probe_sees_numpy_where_the_record_type_is_loaded(tmp_path: Path):
    """The check can fail: the store module that decodes records brings numpy with it."""
    proc, modules = _python(["-c", "import knights_tour.batches.store"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {"numpy", "knights_tour.tours.record", "knights_tour.batches.jobs"} <= modules


def test_status_of_a_running_batch_loads_no_numpy_nor_rich(batch_in_progress):
    data_dir, batch_id = batch_in_progress
    proc, modules = _python(["-m", "knights_tour", "status"], data_dir)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]  # not complete
    assert f"batch {batch_id}: {DONE}/25 jobs done (running)" in proc.stdout
    queued = 25 - DONE - HELD
    assert f"progress: done {DONE}, running {HELD}, queued {queued}, failed 0" in proc.stdout
    assert "workers: 1 live, 1 on this batch" in proc.stdout
    assert "knights_tour.batches.status" in modules  # the probe saw the command's imports
    assert _unwanted(modules) == []


def test_status_json_of_a_running_batch_loads_no_numpy_nor_rich(batch_in_progress):
    data_dir, batch_id = batch_in_progress
    proc, modules = _python(["-m", "knights_tour", "status", batch_id, "--json"], data_dir)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    p = json.loads(proc.stdout)
    assert (p["done"], p["running"], p["queued"], p["state"]) == (DONE, HELD, 12, "running")
    parity = [(r + c) % 2 == 0 for r, c in (j.start for j in make_batch_jobs([5])[:DONE])]
    assert p["counts"] == {"found": sum(parity), "no_tour": DONE - sum(parity)}  # colour parity
    assert len(p["workers_busy"]) == 1
    assert _unwanted(modules) == []

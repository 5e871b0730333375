"""Fault: a worker main process SIGKILLed when the queue is already empty, nobody waiting.

Its message stays in kombu's ``unacked`` hash until the visibility timeout (420 s); no later
task of the batch runs on the surviving worker, and no client polls. Only the recovery timer
of the surviving worker's main process (``KT_LEASE_S / 2``) can re-send the lost work. The
batch (and the count) must complete within 30 s of the kill, every job recorded exactly once,
no job run twice, and the orphaned pool child must be gone.

Facts: every start square of the 20x20 board has an open knight's tour (Conrad et al. 1994; the
CP-SAT jobs all find one, each in about a tenth of a second, so a kill lands mid-chunk); OEIS
A165134: 6,637,920 directed open tours on the 6x6 board.
"""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest
from _faultkit import audit, drive, held_by, leased_by

from knights_tour.batches.client import submit_batch
from knights_tour.batches.jobs import make_batch_jobs
from knights_tour.board import Board
from knights_tour.counting import store as count_store
from knights_tour.counting.client import submit_count
from knights_tour.counting.plan import plan_count
from knights_tour.store import keys
from knights_tour.store.connection import connect
from knights_tour.worker import celery as worker
from knights_tour.worker import ledger, queue

pytestmark = [pytest.mark.fault, pytest.mark.timeout(240)]

RECOVERED_WITHIN_S = 30.0


def _queue_empty(r) -> bool:
    return queue.lists_empty(r, worker.queue_lists())


def _kill_main_when_queue_empty(pool, workers, held_by, deadline_s=120.0):
    """Poll until the project queue is empty and the first worker's pool child holds a lease
    (``held_by(pids)`` non-empty); then SIGKILL that worker's main process. Returns (kill wall
    time, jobs it held, the orphaned pool children)."""
    r = connect(pool.url)
    deadline = time.monotonic() + deadline_s
    victim = workers[0]
    while time.monotonic() < deadline:
        family = pool.family(victim)
        held = held_by({p.pid for p in family[1:]}) if len(family) >= 2 else set()
        if held and _queue_empty(r):
            os.kill(family[0].pid, signal.SIGKILL)
            pool.strays.extend(family[1:])
            return time.time(), held, family[1:]
        time.sleep(0.02)
    raise AssertionError("the victim never held a lease with the queue empty")


def _gone(procs, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(not p.is_running() or p.status() == psutil.STATUS_ZOMBIE for p in procs):
            return True
        time.sleep(0.1)
    return False


def test_batch_heals_with_queue_empty_and_nobody_waiting(fault_redis, worker_pool):
    url = fault_redis.url
    workers = worker_pool.start_all("heal-a", "heal-b")
    r = connect(url)
    jobs = make_batch_jobs([20], solver="cpsat")[:8]
    # Two tasks of four jobs: each worker takes one, and the queue is empty at once.
    batch_id = submit_batch(url, jobs, {"test": "self-healing"}, chunk_size=4)
    killed_at, held, orphans = _kill_main_when_queue_empty(
        worker_pool, workers, lambda pids: leased_by(r, batch_id, pids)
    )
    d = drive(r, url, batch_id, timeout_s=RECOVERED_WITHIN_S + 60, recover=False)
    assert d.status.get("complete"), (d.status, held)
    records = audit(r, batch_id, jobs)
    assert d.overwritten == set(), "a job ran again after its record was stored"
    finished = max(rec.finished_at for rec in records)
    print(
        f"\nqueue empty, nobody waiting: batch of {len(jobs)} complete "
        f"{finished - killed_at:.1f} s after the kill ({len(held)} job(s) held)"
    )
    assert finished - killed_at < RECOVERED_WITHIN_S
    assert _gone(orphans), "the orphaned pool child kept running"
    assert _swept(r, batch_id), "the finished batch stayed in the active set"


def _swept(r, batch_id: str, timeout_s: float = 30.0) -> bool:
    """The recovery timer drops a finished batch from the active set."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not r.sismember(keys.active_batches(), batch_id):
            return True
        time.sleep(0.2)
    return False


def _count_leased_by(r, count_id: str, pids: set[int]) -> set[str]:
    return held_by(r, ledger.Ledger.for_count(count_id), pids)


def test_count_heals_with_queue_empty_and_nobody_waiting(fault_redis, worker_pool):
    url = fault_redis.url
    workers = worker_pool.start_all("healc-a", "healc-b")
    r = connect(url)
    plan = plan_count(Board(6, 6), depth=1)
    cid = count_store.count_id_for(plan)
    count_store.register_count(r, cid, plan)
    # The two sub-jobs with the most tours (the longest) go last, one per worker, once the
    # others are counted: then the queue is empty while both run.
    heavy = [sj for sj in plan.subjobs if sj.key in ("6x6:o:0.8", "6x6:o:1.12")]
    assert len(heavy) == 2, [sj.key for sj in plan.subjobs]
    light = [sj for sj in plan.subjobs if sj not in heavy]
    submit_count(url, cid, light)
    deadline = time.monotonic() + 120
    while count_store.count_status(r, cid)["done"] < len(light):
        assert time.monotonic() < deadline, count_store.count_status(r, cid)
        time.sleep(0.1)
    submit_count(url, cid, heavy)
    killed_at, held, orphans = _kill_main_when_queue_empty(
        worker_pool, workers, lambda pids: _count_leased_by(r, cid, pids)
    )
    deadline = time.monotonic() + RECOVERED_WITHIN_S + 60
    while not (status := count_store.count_status(r, cid))["complete"]:
        assert time.monotonic() < deadline, (status, held)
        time.sleep(0.2)
    elapsed = time.time() - killed_at
    print(f"\nqueue empty, nobody waiting: count complete {elapsed:.1f} s after the kill")
    assert elapsed < RECOVERED_WITHIN_S
    assert status["errors"] == 0
    assert count_store.assemble_count(r, cid, plan).total == 6_637_920  # OEIS A165134
    assert _gone(orphans), "the orphaned pool child kept running"

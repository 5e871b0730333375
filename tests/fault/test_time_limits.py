"""Fault: jobs that exceed their time limit. The engine's exhaustive search on a board far too
big to finish in the limit, and a CP-SAT model whose solve runs in C++ (it does not see Python's
signals; the job's limit is passed to CP-SAT's own ``max_time_in_seconds``), both end as
``unknown`` with reason ``time_limit``; the worker survives and runs the next job. A chunk's
task limits are derived from its jobs' budgets, and a task that reaches its soft limit hands
back what it has not decided (never an ``error`` record)."""

from __future__ import annotations

import pytest
from _faultkit import drive

from knights_tour.batches.client import submit_batch
from knights_tour.batches.jobs import Job
from knights_tour.batches.store import collect, create_batch
from knights_tour.store import keys
from knights_tour.store.connection import connect
from knights_tour.tours.verify import verify_tour
from knights_tour.worker.celery import use_redis
from knights_tour.worker.ledger import Ledger, activate
from knights_tour.worker.messages import TASK_RUN_JOBS

pytestmark = [pytest.mark.fault, pytest.mark.timeout(180)]


def test_jobs_over_their_time_limit_end_unknown_and_the_worker_goes_on(fault_redis, worker_pool):
    url = fault_redis.url
    worker = worker_pool.start("tlimit-")
    pid = worker.pids[0]
    r = connect(url)
    slow_engine = Job(2000, 2000, (0, 0), exhaustive=True, time_limit_s=0.05)
    slow_cpsat = Job(50, 50, (0, 0), solver="cpsat", time_limit_s=0.5)
    after = Job(5, 5, (0, 0))  # a corner of 5x5 starts an open tour (Euler's board, 1759)
    # One chunk: the job after the slow ones must run in the same worker process.
    batch_id = submit_batch(
        url, [slow_engine, slow_cpsat, after], {"test": "time limit"}, chunk_size=3
    )
    d = drive(r, url, batch_id, timeout_s=150)
    assert d.status.get("complete"), d.status
    recs = {rec.job_key: rec for rec in collect(r, batch_id)}
    for job in (slow_engine, slow_cpsat):
        rec = recs[job.key]
        assert (rec.status, rec.reason) == ("unknown", "time_limit"), rec.reason
        assert rec.proof is None and rec.tour is None
        print(
            f"\n{job.key}: limit {job.time_limit_s} s, solver elapsed {rec.elapsed_s:.2f} s, "
            f"job {rec.job_elapsed_s:.2f} s"
        )
    # CP-SAT honoured its limit (its own timer; model building is not counted).
    assert recs[slow_cpsat.key].elapsed_s < slow_cpsat.time_limit_s + 2.0
    nxt = recs[after.key]
    assert nxt.status == "found" and verify_tour(5, nxt.tour, start=(0, 0)).ok
    assert len({rec.worker for rec in recs.values()}) == 1
    assert worker.procs[0].poll() is None and worker.pids[0] == pid  # the worker survived


def test_a_job_without_its_own_limit_gets_the_default_job_limit(fault_redis, worker_pool):
    """KT_JOB_TIME_LIMIT_S bounds every job that names no limit (so an exhaustive search never
    runs into Celery's task time limit and an error): unknown/time_limit, worker unharmed."""
    url = fault_redis.url
    worker = worker_pool.start("tdefault-", env={"KT_JOB_TIME_LIMIT_S": "0.05"})
    r = connect(url)
    endless = Job(2000, 2000, (0, 0), exhaustive=True)
    after = Job(5, 5, (0, 0))
    batch_id = submit_batch(url, [endless, after], {"test": "default limit"}, chunk_size=2)
    d = drive(r, url, batch_id, timeout_s=120)
    assert d.status.get("complete"), d.status
    recs = {rec.job_key: rec for rec in collect(r, batch_id)}
    assert (recs[endless.key].status, recs[endless.key].reason) == ("unknown", "time_limit")
    assert recs[after.key].status == "found"
    assert worker.procs[0].poll() is None


# -- the task's limits: derived from its chunk, and the hand-back when one is reached -----------
def _slow_jobs(n: int) -> list[Job]:
    """CP-SAT jobs of 0.6 s each: on 50x50 CP-SAT takes seconds to find a tour, so each ends at
    its own limit (unknown, time_limit) after 0.6 s of search plus the model's building. (The
    engine is no timer: it finds a tour of 2000x2000 within 0.6 s on some machines.)"""
    return [Job(50, 50, (0, c), solver="cpsat", time_limit_s=0.6) for c in range(n)]


def _warm_cpsat(url: str, r) -> None:
    """Run one small CP-SAT job in the worker, so OR-Tools is loaded in its pool process before
    a test's time limit can land inside that import."""
    batch_id = submit_batch(url, [Job(5, 5, (0, 0), solver="cpsat")], {"test": "warm"})
    assert drive(r, url, batch_id, timeout_s=120).status.get("complete")


def test_a_chunk_longer_than_the_fixed_task_limit_is_not_cut(fault_redis, worker_pool):
    """The app's fixed limits are 1 s soft / 2 s hard here; a chunk of four 0.6 s jobs and a
    5x5 job runs under limits derived from its budgets, so all five end in the same task with
    their own answers - none cut, none an error."""
    url = fault_redis.url
    env = {"KT_SOFT_TIME_LIMIT_S": "1", "KT_HARD_TIME_LIMIT_S": "2"}
    worker = worker_pool.start("tchunk-", env=env)
    pid = worker.pids[0]
    r = connect(url)
    _warm_cpsat(url, r)
    slow = _slow_jobs(4)
    after = Job(5, 5, (0, 0))  # a corner of 5x5 starts an open tour (Euler's board, 1759)
    batch_id = submit_batch(url, [*slow, after], {"test": "derived limits"}, chunk_size=5)
    d = drive(r, url, batch_id, timeout_s=150)
    assert d.status.get("complete"), d.status
    recs = {rec.job_key: rec for rec in collect(r, batch_id)}
    assert sum(recs[j.key].job_elapsed_s for j in slow) > 2.0  # longer than the hard limit
    for job in slow:
        rec = recs[job.key]
        assert (rec.status, rec.reason, rec.attempts) == ("unknown", "time_limit", 1)
    assert recs[after.key].status == "found" and recs[after.key].attempts == 1
    assert worker.procs[0].poll() is None and worker.pids[0] == pid


def test_a_task_at_its_soft_limit_hands_back_what_it_has_not_decided(fault_redis, worker_pool):
    """A chunk sent with a fixed 1 s soft limit of its own (Celery's per-message option, as
    today's fixed limit was) and 3.6 s of jobs is cut inside a job or between two: the jobs
    not decided go back to the queue and end in later tasks; no record is an error."""
    url = fault_redis.url
    worker = worker_pool.start("thandback-")
    r = connect(url)
    _warm_cpsat(url, r)
    jobs = [*_slow_jobs(6), Job(5, 5, (0, 0))]
    batch_id = create_batch(r, jobs, {"test": "hand-back"})
    activate(r, Ledger.for_batch(batch_id))
    celery_app = use_redis(url)
    celery_app.send_task(
        TASK_RUN_JOBS,
        args=[batch_id, [j.to_dict() for j in jobs]],
        queue=keys.QUEUE,
        ignore_result=True,
        soft_time_limit=1.0,
        time_limit=60.0,
    )
    d = drive(r, url, batch_id, timeout_s=150)
    assert d.status.get("complete"), d.status
    recs = collect(r, batch_id)
    assert len(recs) == len(jobs)
    assert not [rec for rec in recs if rec.status == "error"], [rec.reason for rec in recs]
    assert {rec.status for rec in recs} == {"unknown", "found"}
    assert sum(rec.attempts > 1 for rec in recs) <= 1  # only the job the limit cut, if any
    log_text = "".join(p.read_text(errors="replace") for p in worker_pool.log_dir.glob("*.log"))
    assert "handed back" in log_text, log_text[-3000:]
    assert worker.procs[0].poll() is None


def test_the_job_budget_reaches_the_cross_check_in_a_worker(fault_redis, worker_pool):
    """A job's time_limit_s (what ``--time-limit`` sets) bounds its CP-SAT cross-check in a
    worker too. The worker's own CP-SAT default is 1000 s here, long enough for CP-SAT to
    decide 50x50 (seconds), so only the job's 0.5 s budget can leave it undecided."""
    url = fault_redis.url
    worker_pool.start("tcross-", env={"KT_CPSAT_TIME_LIMIT_S": "1000"})
    r = connect(url)
    job = Job(50, 50, (0, 0), verify="cpsat", time_limit_s=0.5)
    batch_id = submit_batch(url, [job], {"test": "budget reaches the cross-check"})
    d = drive(r, url, batch_id, timeout_s=150)
    assert d.status.get("complete"), d.status
    (rec,) = collect(r, batch_id)
    assert rec.status == "found" and verify_tour(50, rec.tour, start=(0, 0)).ok
    assert rec.cpsat_reason == "time_limit", (rec.cpsat_status, rec.cpsat_reason)
    assert not rec.mismatch and rec.checks.cpsat is None

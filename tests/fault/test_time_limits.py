"""Fault: jobs that exceed their time limit. The engine's exhaustive search on a board far too
big to finish in the limit, and a CP-SAT model whose solve runs in C++ (it does not see Python's
signals; the job's limit is passed to CP-SAT's own ``max_time_in_seconds``), both end as
``unknown`` with reason ``time_limit``; the worker survives and runs the next job."""

from __future__ import annotations

import pytest
from _faultkit import drive

from knights_tour.core.jobs import Job
from knights_tour.service.batches import submit_batch
from knights_tour.store.batches import collect
from knights_tour.store.connection import connect
from knights_tour.verify import verify_tour

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

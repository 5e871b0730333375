"""Fault: a worker killed with SIGKILL mid-batch, three times, then restarted.

Two real Celery worker processes run a batch of CP-SAT jobs on 20x20 (every start square has an
open knight's tour, Conrad et al. 1994; each job takes about a tenth of a second, long enough
for a kill to land mid-job, where the 8x8 model is solved in milliseconds). We SIGKILL the
pool child (Celery's ``task_reject_on_worker_lost`` requeues its message) or the worker main
process (its message stays unacknowledged until the visibility timeout; our job leases let
recovery re-send it within seconds). The batch must complete with every job's record present
exactly once and valid, no job left leased ("running"), no job executed twice, and each
interrupted job recovered quickly.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import psutil
import pytest
from _faultkit import LEASE_S, audit, drive, leased_by

from knights_tour.batches.client import submit_batch
from knights_tour.batches.jobs import make_batch_jobs
from knights_tour.store.connection import connect

pytestmark = [pytest.mark.fault, pytest.mark.timeout(240)]

KILLS = 3


def _jobs(count: int):
    return make_batch_jobs([20], solver="cpsat")[:count]


def _kill_when_busy(r, batch_id, pool, workers, target, kills, log, spread=None):
    """Return an on_tick callback that, whenever the batch has progressed and the victim
    worker holds a lease, SIGKILLs ``target(worker)`` and notes which jobs it held."""
    state = {"i": 0, "pending": None}

    def on_tick(st):
        i = state["i"]
        if i >= kills or st.get("done", 0) < (i + 1) * st.get("total", 1) // (spread or kills + 2):
            return
        for w in workers:  # any live worker whose pool process holds a lease now
            if not w.procs or w.procs[0].poll() is not None:
                continue
            family = pool.family(w)
            if len(family) < 2:
                continue  # pool child being replaced
            held = leased_by(r, batch_id, {p.pid for p in family})
            if not held:
                continue
            victim = target(family)
            if victim is family[0]:
                pool.strays.extend(family[1:])
            os.kill(victim.pid, signal.SIGKILL)
            log.append({"at": time.monotonic(), "jobs": held, "pid": victim.pid})
            state["i"] += 1
            return

    return on_tick


def _recovery_times(r, batch_id, log):
    """Seconds from each kill to the moment every job its victim held had a record."""
    from knights_tour.batches.store import collect

    done_at = {rec.job_key: rec.finished_at for rec in collect(r, batch_id)}
    wall_minus_mono = time.time() - time.monotonic()
    out = []
    for k in log:
        last = max(done_at[j] for j in k["jobs"])
        out.append(round(last - (k["at"] + wall_minus_mono), 2))
    return out


def test_pool_child_killed_three_times(fault_redis, worker_pool):
    url = fault_redis.url
    workers = worker_pool.start_all("childkill-a", "childkill-b")
    r = connect(url)
    jobs = _jobs(80)
    batch_id = submit_batch(url, jobs, {"test": "pool child kill"}, chunk_size=2)
    log: list[dict] = []
    tick = _kill_when_busy(r, batch_id, worker_pool, workers, lambda fam: fam[1], KILLS, log)
    d = drive(r, url, batch_id, timeout_s=180, on_tick=tick)
    assert d.status.get("complete"), d.status
    assert len(log) == KILLS
    records = audit(r, batch_id, jobs)
    assert d.overwritten == set(), "a job ran again after its record was stored"
    by_key = {rec.job_key: rec for rec in records}
    # At least one kill hit a job mid-run (a kill can also land between two jobs of a chunk).
    assert any(by_key[j].attempts >= 2 for k in log for j in k["jobs"])
    times = _recovery_times(r, batch_id, log)
    print(
        f"\npool child kills: {len(jobs)} jobs, {KILLS} kills, resent by recovery "
        f"{len(d.resent)}, recovery s {times}, batch {d.seconds:.1f} s"
    )
    # The Celery worker replaces each killed child (the last one may still be starting).
    deadline = time.monotonic() + 60
    while not all(len(worker_pool.family(w)) == 2 for w in workers):
        assert time.monotonic() < deadline, "a killed pool process was not replaced"
        time.sleep(0.2)
    assert max(times) < 6 * LEASE_S + 10


def test_worker_main_process_killed_three_times_and_restarted(fault_redis, worker_pool):
    url = fault_redis.url
    workers = worker_pool.start_all("mainkill-a", "mainkill-b")
    r = connect(url)
    jobs = _jobs(120)  # room for three kills, each after a restart
    batch_id = submit_batch(url, jobs, {"test": "main process kill"}, chunk_size=2)
    log: list[dict] = []
    # Kills at 1/8, 2/8, 3/8 of the batch, each of a worker busy at that moment.
    tick_kill = _kill_when_busy(
        r, batch_id, worker_pool, workers, lambda fam: fam[0], KILLS, log, spread=2 * KILLS + 2
    )
    restarted = {"n": 0}
    restarting: set[int] = set()
    threads: list[threading.Thread] = []
    finished = threading.Event()

    def restart(i: int, name: str) -> None:
        workers[i] = worker_pool.start(name)
        restarting.discard(i)
        # LocalWorkers asks Linux to SIGTERM a worker when the thread that started it ends
        # (PR_SET_PDEATHSIG), so this thread lives until the test is over.
        finished.wait(300)

    def on_tick(st):
        for i, w in enumerate(workers):  # restart a killed worker (as a supervisor would)
            if i not in restarting and w.procs and w.procs[0].poll() is not None:
                restarting.add(i)
                restarted["n"] += 1
                t = threading.Thread(
                    target=restart, args=(i, f"mainkill-r{restarted['n']}-"), daemon=True
                )
                t.start()
                threads.append(t)
        tick_kill(st)

    d = drive(r, url, batch_id, timeout_s=200, on_tick=on_tick)
    finished.set()
    for t in threads:
        t.join(timeout=30)
    assert d.status.get("complete"), d.status
    assert len(log) == KILLS and restarted["n"] == KILLS
    audit(r, batch_id, jobs)
    assert d.overwritten == set(), "a job ran again after its record was stored"
    times = _recovery_times(r, batch_id, log)
    print(
        f"\nmain process kills: {len(jobs)} jobs, {KILLS} kills, resent by recovery "
        f"{len(d.resent)}, recovery s {times}, batch {d.seconds:.1f} s"
    )
    # Without the leases these jobs would wait for the visibility timeout (420 s).
    assert max(times) < 6 * LEASE_S + 30
    # What happened to the pool children orphaned by the kills (recorded for the report).
    alive = [p for p in worker_pool.strays if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    print(f"orphaned pool children still alive at the end: {len(alive)}")

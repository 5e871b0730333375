"""Fault: a worker's pool process stalled (SIGSTOP) for longer than its lease while it holds
jobs, and resumed (SIGCONT) only after another worker has recorded those jobs.

This is what a machine that swaps, a VM paused by its host, or a process cut off from Redis
looks like from outside: the leases lapse, recovery re-sends the jobs, the other worker runs
them. When the stalled process wakes up, the job it was computing may finish a second time and
the jobs it had claimed but not started are still on its list. Neither may change a record
that was already stored (the first record of a job is kept), nothing is duplicated, and the
worker says in its log what happened.
"""

from __future__ import annotations

import time

import psutil
import pytest
from _faultkit import audit, drive, leased_by

from knights_tour.batches.client import submit_batch
from knights_tour.batches.jobs import make_batch_jobs
from knights_tour.batches.store import collect
from knights_tour.store import keys
from knights_tour.store.connection import connect

pytestmark = [pytest.mark.fault, pytest.mark.timeout(240)]


def _recorded(r, batch_id: str, job_keys) -> set[str]:
    pipe = r.pipeline(transaction=False)
    for k in job_keys:
        pipe.hexists(keys.batch_records(batch_id), k)
    return {k for k, yes in zip(job_keys, pipe.execute()) if yes}


DROPPED = ("ran a second time", "lapsed before its job started")
"""What a worker logs for a job it finished after its lease lapsed (its record is dropped)
and for one it had claimed but no longer holds when it gets to it (not run)."""


def _dropped(log_path) -> str:
    """The log lines of ``log_path`` about jobs whose result the worker dropped, as one text."""
    lines = log_path.read_text(errors="replace").splitlines()
    return "\n".join(line for line in lines if any(m in line for m in DROPPED))


def test_a_worker_stalled_past_its_lease_changes_no_stored_record(fault_redis, worker_pool):
    url = fault_redis.url
    workers = worker_pool.start_all("stall-a", "stall-b")
    r = connect(url)
    jobs = make_batch_jobs([20], solver="cpsat")[:40]  # open tours exist from every start
    batch_id = submit_batch(url, jobs, {"test": "stall"}, chunk_size=2)
    stall: dict = {}

    def on_tick(st):
        if "proc" not in stall:
            for w in workers:
                family = worker_pool.family(w)
                if len(family) < 2 or not leased_by(r, batch_id, {family[1].pid}):
                    continue
                child = family[1]
                child.suspend()
                # Now that it cannot move, see what it holds and what is still unrecorded.
                held = leased_by(r, batch_id, {child.pid})
                pending = held - _recorded(r, batch_id, sorted(held))
                if pending:
                    stall.update(proc=child, worker=w, pending=pending, at=time.monotonic())
                    return
                child.resume()  # it had just finished; try again on a later tick
        elif "resumed_at" not in stall:
            if _recorded(r, batch_id, sorted(stall["pending"])) == stall["pending"]:
                stall["proc"].resume()
                stall["resumed_at"] = time.monotonic()

    try:
        d = drive(r, url, batch_id, timeout_s=180, on_tick=on_tick)
        assert "proc" in stall, "no pool process was ever caught holding a job"
        deadline = time.monotonic() + 60
        while "resumed_at" not in stall and time.monotonic() < deadline:
            on_tick(d.status)
            time.sleep(0.2)
        # Another worker recorded the jobs: their leases had lapsed (LEASE_S) while it slept.
        assert "resumed_at" in stall, "the stalled jobs were never recovered"

        # The resumed process finishes or drops each job it held; it logs one line per job.
        log_path = worker_pool.log_dir / f"{stall['worker'].node_prefix}1.log"
        victim_node = stall["worker"].node_names[0]

        def settled() -> bool:
            by_victim = {rec.job_key for rec in collect(r, batch_id) if rec.worker == victim_node}
            return all(k in _dropped(log_path) or k in by_victim for k in stall["pending"])

        while not settled() and time.monotonic() < deadline:
            for rec in collect(r, batch_id):  # keep watching for a rewritten record
                k = rec.job_key
                if d.first_seen.setdefault(k, rec.finished_at) != rec.finished_at:
                    d.overwritten.add(k)
            time.sleep(0.2)
        assert settled(), "the resumed pool process did not finish with its jobs"
    finally:
        proc = stall.get("proc")
        if proc is not None and proc.is_running() and proc.status() == psutil.STATUS_STOPPED:
            proc.resume()

    assert d.status.get("complete"), d.status
    records = audit(r, batch_id, jobs)
    for rec in collect(r, batch_id):
        k = rec.job_key
        assert d.first_seen.get(k, rec.finished_at) == rec.finished_at
    assert d.overwritten == set(), "a stored record was replaced"
    by_key = {rec.job_key: rec for rec in records}
    # The pending jobs were recorded by the other worker while this one was stopped.
    assert all(by_key[k].worker != victim_node for k in stall["pending"])
    assert "lease heartbeat ran" in log_path.read_text(errors="replace")  # it saw the stall
    assert all(k in _dropped(log_path) for k in stall["pending"])
    print(
        f"\nstall: {len(stall['pending'])} job(s) held while stopped for "
        f"{stall['resumed_at'] - stall['at']:.1f} s; batch {d.seconds:.1f} s"
    )

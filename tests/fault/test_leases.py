"""Leases and recovery, in this process against a real Redis (no worker needed): the claim of a
chunk, one lease per process, orphan detection, the re-send grace period, who is blamed for a
worker's death, the cap on worker deaths per job, and what a chunk costs Redis."""

from __future__ import annotations

import json
import logging
import time

import pytest

from knights_tour.batches.jobs import make_batch_jobs, run_job
from knights_tour.batches.saving import save_record
from knights_tour.batches.store import collect, create_batch
from knights_tour.settings import get_settings
from knights_tour.store import keys
from knights_tour.store.connection import connect
from knights_tour.worker import holders, leases, orphans
from knights_tour.worker.lease_keeper import LeaseKeeper
from knights_tour.worker.ledger import Ledger
from knights_tour.worker.recovery import resend

pytestmark = [pytest.mark.fault]


def _bookkeeping(r, batch_id: str) -> dict:
    """The batch's recovery hashes that exist, with their entries."""
    led = Ledger.for_batch(batch_id)
    return {k: r.hgetall(k) for k in (led.started, led.attempts, led.requeued) if r.exists(k)}


def _die(r, keeper: LeaseKeeper) -> None:
    """The process of ``keeper`` dies: its heartbeat stops and its lease runs out (here: is
    deleted)."""
    r.delete(keys.lease(keeper.token))


def test_a_chunk_is_claimed_once_and_a_recorded_job_is_skipped(redis_client):
    jobs = make_batch_jobs([5])[:3]
    batch_id = create_batch(redis_client, jobs, {})
    led = Ledger.for_batch(batch_id)
    a, b = LeaseKeeper(lease_s=5), LeaseKeeper(lease_s=5)
    names = [j.key for j in jobs]
    token_a, got = a.claim(redis_client, led, names)
    assert got.claimed() == names and not got.careful and set(got.deaths.values()) == {0}
    _, other = b.claim(redis_client, led, names)
    assert other.claimed() == [] and set(other.outcomes.values()) == {leases.HELD}
    assert holders.running(redis_client, led) == sorted(names)
    assert 0 < redis_client.pttl(keys.lease(token_a)) <= 5000  # one lease for the process
    assert not any(redis_client.exists(keys.lease(n)) for n in names)
    assert leases.release(redis_client, led, b.token, names) == 0  # not b's: no effect
    _, other = b.claim(redis_client, led, names)
    assert other.claimed() == []
    save_record(redis_client, batch_id, run_job(jobs[0], batch_id=batch_id))
    assert leases.release(redis_client, led, token_a, names[1:]) == 2  # a gives the rest up
    _, other = b.claim(redis_client, led, names)
    assert other.outcomes == {
        names[0]: leases.DONE,
        names[1]: leases.CLAIMED,
        names[2]: leases.CLAIMED,
    }
    assert holders.running(redis_client, led) == sorted(names[1:])


def test_a_dead_process_jobs_are_orphans_resent_once_per_grace_period(redis_client):
    jobs = make_batch_jobs([5])[:3]
    batch_id = create_batch(redis_client, jobs, {})
    led = Ledger.for_batch(batch_id)
    dead = LeaseKeeper(lease_s=5)
    dead.claim(redis_client, led, [j.key for j in jobs])
    save_record(redis_client, batch_id, run_job(jobs[2], batch_id=batch_id))
    assert orphans.find_orphans(redis_client, led) == []  # its lease is live
    _die(redis_client, dead)
    want = sorted(j.key for j in jobs[:2])
    assert orphans.find_orphans(redis_client, led) == want  # the recorded one is not
    sent = []
    assert resend(redis_client, led, want, lambda b, d: sent.append((b, d))) == want
    assert len(sent) == 1 and sent[0][0] == batch_id
    assert sorted(json.dumps(d, sort_keys=True) for d in sent[0][1]) == sorted(
        json.dumps(j.to_dict(), sort_keys=True) for j in jobs[:2]
    )
    # Not sent again while the re-sent message may still be waiting in the queue...
    assert orphans.find_orphans(redis_client, led) == []
    assert resend(redis_client, led, want, lambda b, d: sent.append(d)) == []
    # ...but once a task claims it and dies again, it is an orphan at once.
    other = LeaseKeeper(lease_s=5)
    other.claim(redis_client, led, [jobs[0].key])
    _die(redis_client, other)
    assert orphans.find_orphans(redis_client, led, requeue_grace_s=60) == [jobs[0].key]


def test_a_death_is_blamed_on_a_plain_chunk_then_only_on_the_job_that_ran(redis_client):
    jobs = make_batch_jobs([5])[:3]
    batch_id = create_batch(redis_client, jobs, {})
    led = Ledger.for_batch(batch_id)
    names = [j.key for j in jobs]
    first = LeaseKeeper(lease_s=5)
    first.claim(redis_client, led, names)  # a plain chunk: any of its jobs may be running
    _die(redis_client, first)
    assert resend(redis_client, led, names, lambda *a: None) == names
    second = LeaseKeeper(lease_s=5)
    token, got = second.claim(redis_client, led, names)
    assert got.careful and got.deaths == dict.fromkeys(names, 1)
    leases.begin(redis_client, led, token, names[1])  # careful: the job about to run
    _die(redis_client, second)
    assert resend(redis_client, led, names, lambda *a: None) == names
    deaths = {k: int(v) for k, v in redis_client.hgetall(led.attempts).items()}
    cap = get_settings().max_attempts
    assert deaths == {
        names[0]: min(1, cap - 1),
        names[1]: min(1, cap - 1) + 1,
        names[2]: min(1, cap - 1),
    }


def resend_now(r, led: Ledger, names: list[str]) -> list[str]:
    """Re-send ``names`` ignoring the grace period (as once the visibility timeout is over)."""
    return [k for k, _ in orphans.take_for_resend(r, led, names, requeue_grace_s=-1)]


def test_a_job_that_keeps_killing_its_worker_gets_an_error_record(task_env):
    from knights_tour.tasks import run_jobs

    r = connect(task_env)
    # a5 and c5: squares of the corners' colour, where 5x5 open tours start (Euler's board)
    jobs = make_batch_jobs([5])[0:3:2]
    batch_id = create_batch(r, jobs, {})
    led = Ledger.for_batch(batch_id)
    cap = get_settings().max_attempts
    poison, other = jobs[0].key, jobs[1].key
    deaths = 0
    while int(r.hget(led.attempts, poison) or 0) < cap:  # lost again and again
        assert deaths <= cap, "a death in a careful chunk was not blamed on its job"
        k = LeaseKeeper(lease_s=5)
        token, got = k.claim(r, led, [poison, other])
        assert got.careful == (deaths > 0)
        if got.careful:
            leases.begin(r, led, token, poison)
        _die(r, k)
        assert sorted(resend_now(r, led, [poison, other])) == sorted([poison, other])
        deaths += 1
    # Blamed once (the plain chunk, short of the cap): it never killed a worker.
    assert int(r.hget(led.attempts, other)) == min(1, cap - 1)
    summary = run_jobs.run(batch_id, [j.to_dict() for j in jobs])
    assert summary["counts"] == {"error": 1, "found": 1}
    recs = {rec.job_key: rec for rec in collect(r, batch_id)}
    assert recs[poison].error_type == "WorkerLost" and recs[poison].attempts == cap + 1
    assert f"worker lost {cap} times" in recs[poison].reason
    assert recs[other].status == "found" and recs[other].attempts == min(2, cap)
    assert _bookkeeping(r, batch_id) == {}


def test_a_task_skips_jobs_already_recorded(task_env):
    from knights_tour.tasks import run_jobs

    r = connect(task_env)
    jobs = make_batch_jobs([5])[:3]
    batch_id = create_batch(r, jobs, {})
    first = run_jobs.run(batch_id, [j.to_dict() for j in jobs])
    before = collect(r, batch_id)
    again = run_jobs.run(batch_id, [j.to_dict() for j in jobs])
    assert first["jobs"] == 3 and again["jobs"] == 3 and again["counts"] == {"skipped": 3}
    assert collect(r, batch_id) == before
    assert all(rec.attempts == 1 for rec in before)
    assert _bookkeeping(r, batch_id) == {}


def test_unclaimed_jobs_are_those_no_task_took(redis_client):
    jobs = make_batch_jobs([5])[:4]
    batch_id = create_batch(redis_client, jobs, {})
    led = Ledger.for_batch(batch_id)
    LeaseKeeper(lease_s=5).claim(redis_client, led, [jobs[0].key])
    save_record(redis_client, batch_id, run_job(jobs[1], batch_id=batch_id))
    orphans.mark_requeued(redis_client, led, [jobs[2].key])
    assert orphans.find_unclaimed(redis_client, led, requeue_grace_s=60) == [jobs[3].key]
    assert orphans.find_unclaimed(redis_client, led, requeue_grace_s=0, now=10**10) == sorted(
        [jobs[2].key, jobs[3].key]
    )
    sent = []
    assert resend(
        redis_client, led, [jobs[0].key, jobs[1].key, jobs[3].key], lambda b, d: sent.append(d)
    ) == [jobs[3].key]  # 0 is held, 1 recorded
    assert sent == [[jobs[3].to_dict()]]


def test_a_process_whose_lease_lapsed_takes_a_new_token_and_leaves_taken_jobs(redis_client, caplog):
    jobs = make_batch_jobs([5])[:2]
    batch_id = create_batch(redis_client, jobs, {})
    led = Ledger.for_batch(batch_id)
    a, b = LeaseKeeper(lease_s=5), LeaseKeeper(lease_s=5)
    names = [j.key for j in jobs]
    old, _ = a.claim(redis_client, led, names)
    assert a.confirm(redis_client)  # known alive: renewed a moment ago
    _die(redis_client, a)  # a stalled past its lease: it lapses
    assert b.claim(redis_client, led, [names[0]])[1].claimed() == [names[0]]
    a._last_ok -= 60  # noqa: SLF001 - as if the stall had lasted a minute
    assert not a.known_alive() and not a.confirm(redis_client)
    assert "lapsed" in caplog.text and a.token is None
    assert not redis_client.exists(keys.lease(old))  # a lapsed lease is never renewed
    new, got = a.claim(redis_client, led, names)
    assert new != old and redis_client.exists(keys.lease(new))
    assert got.outcomes == {names[0]: leases.HELD, names[1]: leases.CLAIMED}


def test_the_heartbeat_keeps_the_lease_of_a_busy_process(redis_client):
    keeper = LeaseKeeper(lease_s=2)
    token = keeper.ensure(redis_client)
    began = time.monotonic()
    while time.monotonic() - began < 3 * keeper.lease_s:  # outlives its lifetime thrice
        assert redis_client.exists(keys.lease(token)), "the lease lapsed while renewed"
        time.sleep(0.1)
    assert keeper.known_alive()


def _commands(r) -> int:
    stats = r.info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k not in ("cmdstat_info",))


def test_a_chunk_costs_redis_the_same_few_commands_whatever_its_size(task_env, caplog):
    from knights_tour.tasks import run_jobs

    caplog.set_level(logging.WARNING)
    r = connect(task_env)
    jobs = make_batch_jobs([5, 6])  # 61 jobs of a few milliseconds
    cost = {}
    for n in (10, 60):
        batch_id = create_batch(r, jobs[:n], {})
        before = _commands(r)
        summary = run_jobs.run(batch_id, [j.to_dict() for j in jobs[:n]])
        cost[n] = _commands(r) - before
        assert summary["jobs"] == n and len(collect(r, batch_id)) == n
    # Claim, store (a flush at most every half second) and tidy: a constant per chunk and
    # per flush, Lua scripts' inner calls included, not a number per job.
    assert cost[60] - cost[10] <= 30, cost
    assert cost[60] <= 60, cost

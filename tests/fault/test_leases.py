"""Job leases and recovery, in this process against a real Redis (no worker needed): the claim
protocol, orphan detection, the re-send grace period, and the cap on worker deaths per job."""

from __future__ import annotations

import json

import pytest

from knights_tour.store import keys
from knights_tour.store import leases as recovery
from knights_tour.core.jobs import make_batch_jobs
from knights_tour.settings import get_settings
from knights_tour.store.batches import collect, create_batch, save_record
from knights_tour.store.connection import connect

pytestmark = [pytest.mark.fault]


def test_claims_are_exclusive_and_a_recorded_job_is_skipped(redis_client):
    jobs = make_batch_jobs([5])[:2]
    batch_id = create_batch(redis_client, jobs, {})
    a, b = recovery.LeaseKeeper(lease_s=5), recovery.LeaseKeeper(lease_s=5)
    k = jobs[0].key
    assert a.claim(redis_client, batch_id, k) == recovery.CLAIMED
    assert b.claim(redis_client, batch_id, k) == recovery.HELD
    assert recovery.running(redis_client, batch_id) == [k]
    assert 0 < redis_client.pttl(keys.batch_lease(batch_id, k)) <= 5000
    b.release(redis_client, batch_id, k, finished=False)  # not b's lease: no effect
    assert b.claim(redis_client, batch_id, k) == recovery.HELD
    save_record(redis_client, batch_id, {"job_key": k, "status": "found"})
    a.release(redis_client, batch_id, k, finished=True)
    assert b.claim(redis_client, batch_id, k) == recovery.DONE
    assert recovery.running(redis_client, batch_id) == []
    assert not any(redis_client.exists(x) for x in keys.batch_recovery_keys(batch_id))


def test_an_expired_lease_is_an_orphan_resent_once_per_grace_period(redis_client):
    jobs = make_batch_jobs([5])[:3]
    batch_id = create_batch(redis_client, jobs, {})
    dead = recovery.LeaseKeeper(lease_s=5)
    for j in jobs:
        assert dead.claim(redis_client, batch_id, j.key) == recovery.CLAIMED
    save_record(redis_client, batch_id, {"job_key": jobs[2].key, "status": "found"})
    assert recovery.find_orphans(redis_client, batch_id) == []  # leases still live
    # The worker dies: its heartbeat stops and the leases run out (here: deleted).
    for j in jobs:
        redis_client.delete(keys.batch_lease(batch_id, j.key))
    want = sorted(j.key for j in jobs[:2])
    assert recovery.find_orphans(redis_client, batch_id) == want  # the recorded one is not
    sent = []
    resent = recovery.recover_batch(redis_client, batch_id, lambda b, d: sent.append((b, d)),
                                    requeue_grace_s=60)
    assert resent == want and len(sent) == 1
    assert sorted(json.dumps(d, sort_keys=True) for d in sent[0][1]) == sorted(
        json.dumps(j.to_dict(), sort_keys=True) for j in jobs[:2]
    )
    # Not sent again while the re-sent message may still be waiting in the queue...
    assert recovery.recover_batch(redis_client, batch_id, lambda b, d: sent.append(d),
                                  requeue_grace_s=60) == []
    # ...but once a task claims it and dies again, it is an orphan at once.
    other = recovery.LeaseKeeper(lease_s=5)
    assert other.claim(redis_client, batch_id, jobs[0].key) == recovery.CLAIMED
    redis_client.delete(keys.batch_lease(batch_id, jobs[0].key))
    assert recovery.find_orphans(redis_client, batch_id, requeue_grace_s=60) == [jobs[0].key]


def test_a_job_that_keeps_killing_its_worker_gets_an_error_record(task_env):
    from knights_tour.tasks import run_jobs

    r = connect(task_env)
    job = make_batch_jobs([5])[0]
    batch_id = create_batch(r, [job], {})
    cap = get_settings().max_attempts
    for _ in range(cap):  # started and lost `cap` times
        k = recovery.LeaseKeeper(lease_s=5)
        assert k.claim(r, batch_id, job.key) == recovery.CLAIMED
        k.begin(r, batch_id, job.key)
        r.delete(keys.batch_lease(batch_id, job.key))
    summary = run_jobs.run(batch_id, [job.to_dict()])
    assert summary["counts"] == {"error": 1}
    (rec,) = collect(r, batch_id)
    assert rec["error_type"] == "WorkerLost" and rec["attempts"] == cap + 1
    assert f"worker lost {cap} times" in rec["reason"]
    assert not any(r.exists(x) for x in keys.batch_recovery_keys(batch_id))


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


def test_unclaimed_jobs_are_those_no_task_took(redis_client):
    jobs = make_batch_jobs([5])[:4]
    batch_id = create_batch(redis_client, jobs, {})
    k = recovery.LeaseKeeper(lease_s=5)
    assert k.claim(redis_client, batch_id, jobs[0].key) == recovery.CLAIMED
    save_record(redis_client, batch_id, {"job_key": jobs[1].key, "status": "found"})
    recovery.mark_requeued(redis_client, batch_id, [jobs[2].key])
    assert recovery.find_unclaimed(redis_client, batch_id, requeue_grace_s=60) == [jobs[3].key]
    assert recovery.find_unclaimed(redis_client, batch_id, requeue_grace_s=0,
                                   now=10**10) == sorted([jobs[2].key, jobs[3].key])
    sent = []
    assert recovery.resend(redis_client, batch_id, [jobs[1].key, jobs[3].key],
                           lambda b, d: sent.append(d)) == [jobs[3].key]  # 1 has a record
    assert sent == [[jobs[3].to_dict()]]


def test_bookkeeping_of_a_worker_killed_after_saving_is_tidied(redis_client):
    job = make_batch_jobs([5])[0]
    batch_id = create_batch(redis_client, [job], {})
    k = recovery.LeaseKeeper(lease_s=5)
    assert k.claim(redis_client, batch_id, job.key) == recovery.CLAIMED
    k.begin(redis_client, batch_id, job.key)
    save_record(redis_client, batch_id, {"job_key": job.key, "status": "found"})
    redis_client.delete(keys.batch_lease(batch_id, job.key))  # killed before releasing
    assert recovery.find_orphans(redis_client, batch_id) == []
    assert not any(redis_client.exists(x) for x in keys.batch_recovery_keys(batch_id))


def test_a_job_whose_lease_lapsed_after_the_claim_is_not_started(redis_client, caplog):
    jobs = make_batch_jobs([5])[:1]
    batch_id = create_batch(redis_client, jobs, {})
    a, b = recovery.LeaseKeeper(lease_s=5), recovery.LeaseKeeper(lease_s=5)
    k = jobs[0].key
    assert a.claim(redis_client, batch_id, k) == recovery.CLAIMED
    redis_client.delete(keys.batch_lease(batch_id, k))  # a stalled past its lease: it lapses
    assert b.claim(redis_client, batch_id, k) == recovery.CLAIMED
    assert b.begin(redis_client, batch_id, k) == 1
    assert a.begin(redis_client, batch_id, k) == 0  # a must leave the job to b
    assert a.held() == [] and b.held() == [keys.batch_lease(batch_id, k)]
    assert "lapsed before its job started" in caplog.text
    assert redis_client.hget(keys.batch_attempts(batch_id), k) in ("1", b"1")
    b.release(redis_client, batch_id, k, finished=False)

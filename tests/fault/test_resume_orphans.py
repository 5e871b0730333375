"""A resume sends each unrecorded job once: not again when a queued task or a live worker still
carries it, and not a second time by recovery when the worker that held it is gone.

Real embedded Redis and real Celery worker processes; the interrupted run is set up in Redis
the way its workers leave it (claims under a lease that is then gone, claims under a live one,
records of the jobs done). Fact from outside the code: every square of a 6x6 board starts an
open knight's tour (Conrad et al. 1994), so the batch ends with 36 ``found`` records.
"""

from __future__ import annotations

import base64
import json
from collections import Counter

import pytest
from _faultkit import audit, drive

from knights_tour.batches import saving
from knights_tour.batches.cancelling import cancel_batch, queued_items
from knights_tour.batches.client import make_jobs, resume_batch, start_or_resume, submit_batch
from knights_tour.batches.jobs import JobOptions, run_job
from knights_tour.store import keys
from knights_tour.store.connection import connect
from knights_tour.worker import celery as worker
from knights_tour.worker import leases
from knights_tour.worker.ledger import Ledger
from knights_tour.worker.orphans import find_orphans, take_for_resend

pytestmark = pytest.mark.timeout(300)


def _key(d: dict) -> str:
    """A job dict's key, spelled out (``rows x cols : start : solver : open/closed``); a job
    dict leaves ``closed`` out when it is false."""
    kind = "closed" if d.get("closed", False) else "open"
    return f"{d['rows']}x{d['cols']}:{d['start'][0]},{d['start'][1]}:{d['solver']}:{kind}"


def _sent(r, batch_id: str) -> Counter[str]:
    """Job key -> how many queued run-jobs messages of ``batch_id`` carry it."""
    return Counter(_key(d) for d in queued_items(r, batch_id))


def _take_one_task(r) -> list[str]:
    """Take one task off the queue, as a worker does; the job keys it carries."""
    name = next(n for n in worker.queue_lists() if r.llen(n))
    envelope = json.loads(r.rpop(name))
    body = envelope["body"]
    if envelope.get("properties", {}).get("body_encoding") == "base64":
        body = base64.b64decode(body)
    return [_key(d) for d in json.loads(body)[0][1]]


def _claimed(r, led: Ledger, token: str, item_keys: list[str], live: bool) -> None:
    """``item_keys`` claimed by the worker process ``token``, whose lease is then gone unless
    ``live`` (a minute long: it outlives the test's checks)."""
    assert leases.open_lease(r, token, 60_000)
    got = leases.claim(r, led, token, item_keys)
    assert got.claimed() == item_keys
    if not live:
        r.delete(keys.lease(token))


def _interrupted(r, url: str):
    """A 6x6 batch left as a Ctrl-C'd run leaves it: 5 jobs recorded, 8 claimed by a killed
    worker (one already blamed for a death), 4 held by a live worker, then cancelled."""
    _, jobs, params = make_jobs(["6"], JobOptions())
    batch_id = submit_batch(url, jobs, params, chunk_size=4)
    led = Ledger.for_batch(batch_id)
    order = [j.key for j in jobs]
    for job in jobs[:5]:
        assert saving.save_record(r, batch_id, run_job(job, batch_id=batch_id, worker="run1"))
    orphans, held = order[5:13], order[13:17]
    _claimed(r, led, "host:1:killed", orphans, live=False)
    r.hset(led.attempts, orphans[0], 1)  # recovery had blamed a death on it
    _claimed(r, led, "host:2:alive", held, live=True)
    cancel_batch(r, batch_id)
    assert _sent(r, batch_id) == Counter()
    return batch_id, jobs, led, orphans, held


def test_resume_after_an_interrupt_sends_each_unrecorded_job_once(fault_redis, worker_pool):
    url = fault_redis.url
    r = connect(url)
    batch_id, jobs, led, orphans, held = _interrupted(r, url)
    reused, sent = resume_batch(url, batch_id, chunk_size=4)
    unrecorded = {j.key for j in jobs[5:]}
    assert (reused, sent) == (5, len(unrecorded) - len(held))
    assert _sent(r, batch_id) == Counter(unrecorded - set(held))  # each once; the held not
    # The orphans were released as a fresh start: no claim, no death left on them.
    assert r.hmget(led.started, orphans) == [None] * 8
    assert r.hmget(led.attempts, orphans) == [None] * 8
    # A recovery pass now finds nothing to send: the resume marked what it sent.
    assert take_for_resend(r, led, sorted(unrecorded - set(held))) == []
    assert find_orphans(r, led) == []
    # Resuming again at once sends nothing more (everything is queued or held).
    assert resume_batch(url, batch_id, chunk_size=4) == (5, 0)
    assert _sent(r, batch_id) == Counter(unrecorded - set(held))
    # The live worker finishes what it holds.
    for job in jobs[13:17]:
        assert saving.save_record(r, batch_id, run_job(job, batch_id=batch_id, worker="run1"))
    worker_pool.start("resumed")
    d = drive(r, url, batch_id, timeout_s=180)
    assert d.status["complete"], d.status
    assert d.resent == []  # recovery re-sent nothing: the resume had sent it all
    records = audit(r, batch_id, jobs)
    assert len(records) == 36 and all(rec.status == "found" for rec in records)
    resumed = [rec for rec in records if rec.worker != "run1"]  # run by the resumed workers
    assert len(resumed) == 36 - 5 - len(held)
    assert [rec.job_key for rec in resumed if rec.attempts != 1] == []
    assert not d.overwritten


def test_recovery_first_then_resume_sends_an_orphan_once(fault_redis):
    url = fault_redis.url
    r = connect(url)
    _, jobs, params = make_jobs(["6"], JobOptions())
    batch_id = submit_batch(url, jobs, params, chunk_size=4)
    led = Ledger.for_batch(batch_id)
    # The queue was lost (as with a Redis that came back without it); one worker died.
    r.delete(*worker.queue_lists())
    assert _sent(r, batch_id) == Counter()
    orphans = [j.key for j in jobs[:6]]
    _claimed(r, led, "host:3:killed", orphans, live=False)
    taken = [k for k, _ in take_for_resend(r, led, find_orphans(r, led))]
    assert taken == sorted(orphans)  # recovery re-sends them (not done here: its message lost)
    reused, sent = resume_batch(url, batch_id, chunk_size=4)
    # The orphans recovery just took are left to it; every other job is sent once.
    assert (reused, sent) == (0, 30)
    assert _sent(r, batch_id) == Counter(j.key for j in jobs[6:])


def test_a_second_identical_run_sends_nothing_while_the_first_carries_every_job(fault_redis):
    url = fault_redis.url
    r = connect(url)
    _, jobs, params = make_jobs(["5", "6"], JobOptions())
    first, reused, sent = start_or_resume(url, jobs, params, chunk_size=5)
    assert (reused, sent) == (0, len(jobs))
    before = _sent(r, first)
    assert before == Counter(j.key for j in jobs)
    # A worker of the first run took a task and holds its jobs now.
    led = Ledger.for_batch(first)
    held = _take_one_task(r)
    _claimed(r, led, "host:4:alive", held, live=True)
    again, reused, sent = start_or_resume(url, jobs, params, chunk_size=5)
    assert (again, reused, sent) == (first, 0, 0)
    assert _sent(r, first) == before - Counter(held)  # nothing sent twice
    # Cancelled (its queued tasks dropped), the same run sends every job nobody holds.
    cancel_batch(r, first)
    assert _sent(r, first) == Counter()
    assert resume_batch(url, first, chunk_size=5) == (0, len(jobs) - len(held))
    assert _sent(r, first) == Counter(j.key for j in jobs) - Counter(held)


def test_ending_the_leases_of_killed_processes_ends_only_theirs(fault_redis):
    r = connect(fault_redis.url)
    tokens = ("box:11:a", "w1@box:12:b", "box:111:c", "other:11:d", "w1@other:12:e")
    for token in tokens:  # named by host, or by Celery node name (node@host)
        assert leases.open_lease(r, token, 60_000)
    assert sorted(leases.end_leases_of(r, "box", [11, 12])) == ["box:11:a", "w1@box:12:b"]
    assert [bool(r.exists(keys.lease(t))) for t in tokens] == [False, False, True, True, True]
    assert leases.end_leases_of(r, "box", []) == []

"""Storing many records in one script call, against a real Redis: first record kept, each job
counted once in the tally, a retried write counts as stored, bookkeeping cleared, the end of
the batch announced once."""

from __future__ import annotations

from knights_tour.batches.jobs import make_batch_jobs
from knights_tour.batches.progress import batch_progress, batch_status
from knights_tour.batches.saving import save_records
from knights_tour.batches.store import create_batch
from knights_tour.store import keys
from knights_tour.store.events import Wakeup


def _row(job, status="found", mismatch=False, payload=None):
    return (job.key, status, mismatch, payload if payload is not None else f"rec:{job.key}")


def test_first_record_kept_and_each_job_counted_once(redis_client):
    jobs = make_batch_jobs([5])[:4]
    batch_id = create_batch(redis_client, jobs, {})
    a, b, c, d = jobs
    assert save_records(redis_client, batch_id, [_row(a), _row(b, "no_tour", True)]) == [True, True]
    # a again, identical (a retried write): stored; b again, different: the first is kept;
    # c twice in one call: its first row is kept; d new.
    got = save_records(
        redis_client,
        batch_id,
        [
            _row(a),
            _row(b, "found", False, "other"),
            _row(c, "unknown"),
            _row(c, "found", False, "second"),
            _row(d, "error"),
        ],
    )
    assert got == [True, False, True, False, True]
    assert redis_client.hget(keys.batch_records(batch_id), b.key) == f"rec:{b.key}"
    assert redis_client.hget(keys.batch_records(batch_id), c.key) == f"rec:{c.key}"
    tally = redis_client.hgetall(keys.batch_tally(batch_id))
    assert tally == {"found": "1", "no_tour": "1", "unknown": "1", "error": "1", "mismatch": "1"}
    progress, status = batch_progress(redis_client, batch_id), batch_status(redis_client, batch_id)
    for st in (progress, status):
        assert st["complete"] and st["done"] == 4 and st["mismatches"] == 1
        assert st["counts"] == {"error": 1, "found": 1, "no_tour": 1, "unknown": 1}


def test_bookkeeping_is_cleared_and_the_end_announced_once(redis_client):
    jobs = make_batch_jobs([5])[:3]
    batch_id = create_batch(redis_client, jobs, {})
    recovery = (
        keys.batch_started(batch_id),
        keys.batch_attempts(batch_id),
        keys.batch_requeued(batch_id),
    )
    for name in recovery:
        redis_client.hset(name, mapping={j.key: "x" for j in jobs})
    with Wakeup(redis_client, keys.batch_events(batch_id)) as wakeup:
        save_records(redis_client, batch_id, [_row(jobs[0]), _row(jobs[1])])
        assert not wakeup.wait(0.2)  # not complete yet: nothing announced
        save_records(redis_client, batch_id, [_row(jobs[2])])
        assert wakeup.wait(10)  # the last record announces the end
    left = {k: redis_client.hgetall(k) for k in recovery}
    assert left == {k: {} for k in recovery}


def test_binary_payloads_round_trip(redis_client):
    job = make_batch_jobs([5])[0]
    batch_id = create_batch(redis_client, [job], {})
    payload = bytes(range(256))
    assert save_records(redis_client, batch_id, [_row(job, payload=payload)]) == [True]
    assert save_records(redis_client, batch_id, [_row(job, payload=payload)]) == [True]
    raw = redis_client.connection_pool.get_connection()
    try:
        raw.send_command("HGET", keys.batch_records(batch_id), job.key)
        assert raw.read_response(disable_decoding=True) == payload
    finally:
        redis_client.connection_pool.release(raw)

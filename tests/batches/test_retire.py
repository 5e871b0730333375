"""Replacing records, the one way it happens: a retry retires each matching record once to the
job's earlier records, and the job's next record is stored as a first one (real Redis).

Facts from outside the code: on 5x5 exactly the 13 squares of the corners' colour start an
open knight's tour, the other 12 are refused by the colour-parity argument without a search;
every square of 6x6 starts one (Conrad et al. 1994).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from knights_tour.batches.job_view import job_views
from knights_tour.batches.jobs import Job, JobOptions, make_batch_jobs, run_job
from knights_tour.batches.progress import batch_progress, batch_status
from knights_tour.batches.records import earlier_records
from knights_tour.batches.retrying import parse_statuses, retry_jobs
from knights_tour.batches.saving import save_record
from knights_tour.batches.store import batch_jobs, collect, create_batch
from knights_tour.errors import CorruptKeyError, InvalidJobError, KnightsTourError
from knights_tour.store import keys
from knights_tour.store.cleanup import forget_batch
from knights_tour.store.connection import connect
from knights_tour.tours.record import Status

NODES_TOO_FEW = 5
"""A node budget below the squares of the board: no tour can be found within it."""


def _recorded_batch(r, size: int, options: JobOptions) -> tuple[str, list[Job]]:
    jobs = make_batch_jobs([size], options)
    batch_id = create_batch(r, jobs, {"sizes": f"{size}x{size}"})
    for job in jobs:
        assert save_record(r, batch_id, run_job(job, batch_id, worker="w1@host"))
    return batch_id, jobs


def _run_missing(r, batch_id: str) -> None:
    """What the workers do for a resumed batch: run each job without a record, store it."""
    missing = set(batch_status(r, batch_id, max_missing=10**6)["missing_keys"])
    for job in batch_jobs(r, batch_id):
        if job.key in missing:
            assert save_record(r, batch_id, run_job(job, batch_id, worker="w2@host"))


def test_a_retry_retires_each_record_once_and_the_next_one_is_stored_as_first(redis_client):
    r = redis_client
    batch_id, jobs = _recorded_batch(r, 5, JobOptions(node_limit=NODES_TOO_FEW))
    before = {rec.job_key: rec for rec in collect(r, batch_id)}
    unknown = sorted(k for k, rec in before.items() if rec.status is Status.UNKNOWN)
    assert len(unknown) == 13 and batch_progress(r, batch_id)["complete"]

    retried = retry_jobs(r, batch_id, ["unknown"], {"node_limit": 100_000})

    assert sorted(retried) == unknown  # the same keys: the solver did not change
    st = batch_status(r, batch_id, max_missing=100)
    assert st["missing_keys"] == unknown and st["counts"] == {"no_tour": 12}
    assert batch_progress(r, batch_id)["counts"] == {"no_tour": 12}  # the tally agrees
    assert {j.key: j.node_limit for j in batch_jobs(r, batch_id) if j.key in unknown} == {
        k: 100_000 for k in unknown
    }
    # asked again (or re-delivered) before the jobs ran: nothing left to retire
    assert retry_jobs(r, batch_id, ["unknown"], {"node_limit": 100_000}) == []
    assert all(len(earlier_records(r, batch_id, k)) == 1 for k in unknown)

    _run_missing(r, batch_id)
    after = {rec.job_key: rec for rec in collect(r, batch_id)}
    assert len(after) == 25
    assert [k for k, rec in after.items() if rec.status is Status.FOUND] == unknown
    assert all(after[k].worker == "w2@host" for k in unknown)
    for k in unknown:  # the replaced record is kept, as it was
        (old,) = earlier_records(r, batch_id, k)
        assert old == before[k] and old.status is Status.UNKNOWN
    # the retried job's record is its first again: a second delivery does not replace it
    job = next(j for j in batch_jobs(r, batch_id) if j.key == unknown[0])
    again = run_job(job, batch_id, worker="w3@host")
    assert not save_record(r, batch_id, again)
    assert {rec.job_key: rec.worker for rec in collect(r, batch_id)}[job.key] == "w2@host"
    assert batch_progress(r, batch_id)["counts"] == {"found": 13, "no_tour": 12}
    forget_batch(r, batch_id)  # the earlier records go with the batch
    assert not any(r.exists(keys.batch_earlier(batch_id, k)) for k in unknown)


def test_a_retry_with_another_solver_moves_the_job_and_its_attempts(redis_client):
    r = redis_client
    batch_id, jobs = _recorded_batch(r, 6, JobOptions(node_limit=NODES_TOO_FEW))
    assert retry_jobs(r, batch_id, ["unknown"]) != []
    _run_missing(r, batch_id)  # the same options: unknown again
    a6 = "6x6:0,0:warnsdorff:open"
    assert len(earlier_records(r, batch_id, a6)) == 1

    retried = retry_jobs(r, batch_id, ["unknown"], {"solver": "cpsat", "time_limit_s": 30.0})

    assert len(retried) == 36 and all(":cpsat:" in k for k in retried)
    assert r.hlen(keys.batch_jobs(batch_id)) == 36  # the same jobs, under their new keys
    assert r.hexists(keys.batch_jobs(batch_id), a6) == 0
    assert not r.exists(keys.batch_earlier(batch_id, a6))
    _run_missing(r, batch_id)
    records = collect(r, batch_id)
    assert len(records) == 36 and {(rec.solver, rec.status) for rec in records} == {
        ("cpsat", Status.FOUND)
    }
    (view,) = job_views(r, batch_id, "a6")
    assert view.job.key == "6x6:0,0:cpsat:open" and view.state == "recorded"
    assert [(e.solver, e.status) for e in view.earlier] == [("warnsdorff", Status.UNKNOWN)] * 2


def test_a_retry_that_would_make_an_invalid_job_moves_nothing(redis_client):
    r = redis_client
    batch_id, _ = _recorded_batch(r, 5, JobOptions(node_limit=NODES_TOO_FEW))
    with pytest.raises(InvalidJobError):
        retry_jobs(r, batch_id, ["unknown"], {"time_limit_s": -1.0})
    assert batch_status(r, batch_id)["complete"]
    with pytest.raises(KnightsTourError, match="unknown batch"):
        retry_jobs(r, "no-such-batch", ["unknown"])


def test_statuses_are_read_from_a_comma_separated_list():
    assert parse_statuses("unknown, error,unknown") == ("unknown", "error")
    for bad in ("", "unknown,lost", ","):
        with pytest.raises(KnightsTourError, match="known: found, no_tour, unknown, error"):
            parse_statuses(bad)


def test_two_retries_at_once_move_each_record_once(redis_client, redis_db_url):
    batch_id, _ = _recorded_batch(redis_client, 5, JobOptions(node_limit=NODES_TOO_FEW))
    clients = [connect(redis_db_url) for _ in range(4)]
    with ThreadPoolExecutor(len(clients)) as pool:
        results = list(pool.map(lambda c: retry_jobs(c, batch_id, ["unknown"]), clients))
    moved = [k for keys_moved in results for k in keys_moved]
    assert len(moved) == len(set(moved)) == 13
    assert all(len(earlier_records(redis_client, batch_id, k)) == 1 for k in moved)
    assert batch_status(redis_client, batch_id)["missing"] == 13
    for c in clients:
        c.close()


def test_a_job_entry_that_is_not_a_job_is_named_and_nothing_is_retired(redis_client):
    r = redis_client
    batch_id, _ = _recorded_batch(r, 5, JobOptions(node_limit=NODES_TOO_FEW))
    r.hset(keys.batch_jobs(batch_id), "5x5:0,0:warnsdorff:open", "{not json")
    with pytest.raises(CorruptKeyError, match="5x5:0,0:warnsdorff:open"):
        retry_jobs(r, batch_id, ["unknown"])
    assert batch_status(r, batch_id)["complete"]

"""A batch's lifecycle under the user's control: cancel (only its own queued tasks dropped,
workers skip its jobs, nothing re-sends them, other batches are not delayed) and resume
(the same jobs and params find the unfinished batch; recorded jobs are not sent again).

Facts: every start square of the 5x5 board that has an open knight's tour is of the colour of
the corners (13 of 25 squares; a 25-step tour starts and ends on the majority colour), so a
5x5 batch ends with 13 ``found`` and 12 ``no_tour`` records.
"""

from __future__ import annotations

import json
import time

import pytest

from knights_tour.batches import progress, saving, store
from knights_tour.batches.cancelling import cancel_batch
from knights_tour.batches.client import (
    batch_digest,
    make_jobs,
    recover_lost_jobs,
    start_or_resume,
    submit_batch,
    wait_for_batch,
)
from knights_tour.batches.jobs import JobOptions
from knights_tour.cli import main
from knights_tour.store import keys
from knights_tour.store.connection import connect
from knights_tour.tours.record import Record, Status
from knights_tour.worker import celery as worker
from knights_tour.worker.lease_keeper import LeaseKeeper
from knights_tour.worker.ledger import Ledger
from knights_tour.worker.recovery import sweep

pytestmark = [pytest.mark.fault, pytest.mark.timeout(180)]


def _queued(r) -> int:
    return sum(r.llen(name) for name in worker.queue_lists())


def test_cancel_drops_only_its_tasks_and_nothing_resends_it(fault_redis, worker_pool, capsys):
    url = fault_redis.url
    r = connect(url)
    _, jobs8, params8 = make_jobs(["8"], JobOptions(solver="cpsat"))
    _, jobs5, params5 = make_jobs(["5"], JobOptions(exhaustive=True))
    abandoned = submit_batch(url, jobs8, params8, chunk_size=4)  # 16 tasks, no worker yet
    other = submit_batch(url, jobs5, params5, chunk_size=5)  # 5 tasks
    assert _queued(r) == 16 + 5
    # A job of the abandoned batch looks lost with its worker (claimed, no lease, no record).
    r.hset(keys.batch_started(abandoned), jobs8[0].key, f"{time.time() - 60:.3f}")
    assert cancel_batch(r, abandoned) == 16
    assert _queued(r) == 5, "another batch's tasks were dropped"
    assert progress.batch_state(r, abandoned) == progress.CANCELLED
    assert not r.sismember(keys.active_batches(), abandoned)
    # Nothing re-sends a cancelled batch: not a waiting client, not the workers' timer.
    assert recover_lost_jobs(r, url, abandoned) == []
    sent: list = []
    sweep(r, lambda *a: sent.append(a), lambda *a: sent.append(a))
    assert all(a[0] != abandoned for a in sent)
    # A worker that still gets one of its messages skips the job at claim time.
    _, got = LeaseKeeper(lease_s=5).claim(r, Ledger.for_batch(abandoned), [jobs8[1].key])
    assert got.cancelled and got.claimed() == []
    # A waiting client stops at once instead of waiting for ever.
    st = wait_for_batch(r, abandoned, timeout_s=30, recover_url=url)
    assert st["state"] == progress.CANCELLED and not st["complete"]
    # status / batches say cancelled, with no ETA and nothing queued.
    assert main(["status", abandoned, "--redis", url, "--json"]) == 1
    shown = json.loads(capsys.readouterr().out)
    assert (shown["state"], shown["eta_s"], shown["queued"]) == ("cancelled", None, 0)
    assert main(["batches", "--redis", url, "--json"]) == 0
    listed = {b["batch_id"]: b["state"] for b in json.loads(capsys.readouterr().out)}
    assert listed[abandoned] == "cancelled" and listed[other] != "cancelled"
    # The other batch runs as if the abandoned one had never been.
    worker_pool.start("life-a")
    st = wait_for_batch(r, other, timeout_s=120, recover_url=url)
    assert st["complete"] and st["counts"] == {"found": 13, "no_tour": 12}
    assert r.hlen(keys.batch_records(abandoned)) == 0


def test_resume_sends_only_unrecorded_jobs_and_fresh_starts_over(fault_redis, worker_pool):
    url = fault_redis.url
    r = connect(url)
    _, jobs, params = make_jobs(["5"], JobOptions(exhaustive=True))
    first, reused, sent = start_or_resume(url, jobs, params, chunk_size=5)
    assert (reused, sent) == (0, 25) and _queued(r) == 5
    cancel_batch(r, first)
    assert _queued(r) == 0
    # As if 7 jobs had been recorded before the interruption.
    for job in jobs[:7]:
        saving.save_record(
            r,
            first,
            Record(
                rows=job.rows,
                cols=job.cols,
                start=job.start,
                solver=job.solver,
                status=Status.FOUND,
                job_key=job.key,
                worker="before-the-interruption",
            ),
        )
    again, reused, sent = start_or_resume(url, jobs, params, chunk_size=5)
    assert (again, reused, sent) == (first, 7, 18)
    assert progress.batch_state(r, again) is None  # no longer cancelled
    assert _queued(r) == 4  # 18 unrecorded jobs in chunks of 5
    worker_pool.start("life-b")
    st = wait_for_batch(r, again, timeout_s=120, recover_url=url)
    assert st["complete"]
    kept = [rec for rec in store.collect(r, again) if rec.worker == "before-the-interruption"]
    assert len(kept) == 7, "a recorded job was computed again"
    # Other params are another batch; --fresh is a new batch even with the same ones.
    assert batch_digest(jobs, {**params, "closed": True}) != batch_digest(jobs, params)
    fresh, reused, sent = start_or_resume(url, jobs, params, chunk_size=25, fresh=True)
    assert fresh != first and (reused, sent) == (0, 25)


def test_cancel_command(fault_redis, capsys):
    url = fault_redis.url
    r = connect(url)
    _, jobs, params = make_jobs(["6"], JobOptions())
    batch_id = submit_batch(url, jobs, params, chunk_size=4)
    assert main(["cancel", batch_id, "--redis", url]) == 0
    assert f"batch {batch_id} cancelled: 0/36 jobs done, 9 queued task(s) dropped" in (
        capsys.readouterr().out
    )
    assert _queued(r) == 0
    assert main(["cancel", "no-such-batch", "--redis", url]) == 2
    assert capsys.readouterr().err.startswith("ktour: error: unknown batch 'no-such-batch'")

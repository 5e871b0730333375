"""Fault: a message taken off the queue by a process that dies before its task starts, with
nobody waiting for the batch.

A real kombu consumer (a subprocess on the Celery app's own connection) takes one message of
the batch off the queue without acknowledging it and exits at once (``os._exit``, like a worker
killed as it received the message). kombu keeps the message in its ``unacked`` hash until the
visibility timeout (``KT_VISIBILITY_TIMEOUT_S``, 420 s), so Celery does not bring it back within
the test; no job of it was claimed, so it has no lease to lapse. Only the workers' recovery
timer (no client polls: the test watches with ``recover=False``) can re-send its jobs: once the
queue is empty and nothing of the batch has run for ``KT_LEASE_S``. The batch must complete
within 30 s of the last other record, every job recorded exactly once, none run twice.

Fact: every start square of 6x6 has an open knight's tour (OEIS A165134: no zero count), so
every job finds one, each checked by the verifier in ``audit``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from _faultkit import audit, drive
from _polling import wait_for

from knights_tour.batches.client import submit_batch
from knights_tour.batches.jobs import Job, make_batch_jobs
from knights_tour.store.connection import connect

pytestmark = [pytest.mark.fault, pytest.mark.timeout(240)]

RECOVERED_WITHIN_S = 30.0

TAKE_AND_DIE = r"""
import json, os, sys
from knights_tour.worker import celery as worker
from knights_tour.store import keys
app = worker.use_redis(sys.argv[1])
conn = app.connection_for_read()
message = conn.default_channel.basic_get(keys.QUEUE)   # no ack: kombu records it as unacked
args, _kwargs, _embed = message.decode()
print(json.dumps(args), flush=True)
os._exit(0)   # die before any task starts: no ack, no reject, no restore
"""


def _take_one_message(url: str) -> tuple[str, list[dict]]:
    """Run the consumer that takes one message and dies; return the message's (batch, jobs)."""
    out = subprocess.run(
        [sys.executable, "-c", TAKE_AND_DIE, url],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    batch_id, job_dicts = json.loads(out.stdout.strip().splitlines()[-1])
    return batch_id, job_dicts


def test_a_message_taken_and_never_started_comes_back_with_nobody_waiting(fault_redis, worker_pool):
    url = fault_redis.url
    r = connect(url)
    jobs = make_batch_jobs([6])
    batch_id = submit_batch(url, jobs, {"test": "lost message"}, chunk_size=4)
    taken_batch, taken = _take_one_message(url)
    taken_keys = {Job.from_dict(d).key for d in taken}
    assert taken_batch == batch_id and len(taken_keys) == 4
    assert r.hlen("unacked") == 1  # kombu holds it until the visibility timeout
    worker_pool.start_all("lostmsg-a", "lostmsg-b")
    d = drive(r, url, batch_id, timeout_s=RECOVERED_WITHIN_S + 90, recover=False)
    assert d.status.get("complete"), d.status
    records = audit(r, batch_id, jobs)
    assert d.overwritten == set(), "a job ran again after its record was stored"
    # The taken message is still kombu's (not restored): the workers' recovery re-sent its
    # jobs. (The workers ack their own messages just after the last record: poll for that.)
    wait_for(lambda: r.hlen("unacked") == 1, "kombu restored the message, or acks hang", 60)
    others = [rec.finished_at for rec in records if rec.job_key not in taken_keys]
    lost = [rec.finished_at for rec in records if rec.job_key in taken_keys]
    late = max(lost) - max(others)
    print(
        f"\nmessage taken and never started, nobody waiting: its {len(taken_keys)} jobs "
        f"recorded {late:.1f} s after the rest of the batch"
    )
    assert late < RECOVERED_WITHIN_S

"""Submitting a batch into a real Redis, with no worker: the tasks sent (their jobs, their
``argsrepr``), the messages of a failed block, the submission's noted times and the line that
states the batch's time from the start of its submission."""

from __future__ import annotations

import base64
import json
import threading
import time

import pytest

from knights_tour.batches.chunking import plan_chunks
from knights_tour.batches.client import make_jobs, send_order, submit_batch
from knights_tour.batches.jobs import JobOptions, error_record
from knights_tour.batches.saving import save_record
from knights_tour.batches.store import batch_jobs, create_batch, note_submission, submission
from knights_tour.commands._records import wait_with_progress
from knights_tour.store import keys
from knights_tour.worker.celery import queue_lists, sending
from knights_tour.worker.messages import TASK_RUN_JOBS


def _messages(r) -> list[dict]:
    """Every message queued on the project's queue lists, oldest first: its headers and its
    (JSON-decoded) arguments."""
    out = []
    for name in queue_lists():
        for raw in reversed(r.lrange(name, 0, -1)):  # LPUSHed: the oldest is last
            envelope = json.loads(raw)
            args = json.loads(base64.b64decode(envelope["body"]))[0]
            out.append({"headers": envelope["headers"], "args": args})
    return out


def _complete(r, batch_id: str, jobs) -> None:
    """Store a record for every job of the batch (no solving: error records)."""
    for job in jobs:
        save_record(r, batch_id, error_record(job, "stand-in", batch_id))


def test_a_batch_is_sent_as_its_chunks_with_a_short_argsrepr(redis_client, redis_db_url):
    _, jobs, params = make_jobs(["5-9"], JobOptions())
    batch_id = submit_batch(redis_db_url, jobs, params)
    sent = _messages(redis_client)
    chunks = plan_chunks(send_order(jobs))
    assert [m["args"] for m in sent] == [
        [batch_id, [j.to_dict() for j in chunk]] for chunk in chunks
    ]
    for m in sent:
        assert m["headers"]["task"] == TASK_RUN_JOBS
        # Celery's saferepr of the whole chunk would run to about a kilobyte per task
        assert m["headers"]["argsrepr"].startswith(f"['{batch_id}', [{{")
        assert len(m["headers"]["argsrepr"]) < 300
        assert m["headers"]["kwargsrepr"] == "{}"
    assert sorted(j.key for j in batch_jobs(redis_client, batch_id)) == sorted(j.key for j in jobs)


def test_the_stored_jobs_are_the_jobs_json(redis_client, redis_db_url):
    options = JobOptions(solver="cpsat", closed=True, time_limit_s=3, node_limit=7)
    _, jobs, params = make_jobs(["5", "3x4"], options)
    _, plain, _ = make_jobs(["6"], JobOptions())
    batch_id = submit_batch(redis_db_url, jobs + plain, params)
    stored = redis_client.hgetall(keys.batch_jobs(batch_id))
    assert {k: json.loads(v) for k, v in stored.items()} == {
        j.key: j.to_dict() for j in jobs + plain
    }


def test_messages_of_a_block_that_fails_are_not_sent(redis_client, redis_db_url):
    with pytest.raises(RuntimeError), sending(redis_db_url) as send:
        send(TASK_RUN_JOBS, ["b", []])
        send(TASK_RUN_JOBS, ["b", []])
        raise RuntimeError("the submission stops here")
    assert _messages(redis_client) == []
    with sending(redis_db_url) as send:
        for i in range(3):
            send(TASK_RUN_JOBS, [f"b{i}", []])
    assert [m["args"][0] for m in _messages(redis_client)] == ["b0", "b1", "b2"]


def test_the_submission_is_noted_from_its_start_to_its_last_task(redis_client, redis_db_url):
    _, jobs, params = make_jobs(["5"], JobOptions())
    began = time.time() - 30.0  # as if making the jobs had taken half a minute
    batch_id = submit_batch(redis_db_url, jobs, params, began=began)
    noted = submission(redis_client, batch_id)
    assert noted is not None and noted[0] == began
    assert began + 30.0 <= noted[1] <= time.time()
    assert submission(redis_client, "no-such-batch") is None


def test_the_done_line_counts_from_the_start_of_the_submission(redis_client, redis_db_url, capsys):
    _, jobs, params = make_jobs(["5"], JobOptions())
    batch_id = create_batch(redis_client, jobs, params)
    began = time.time() - 100.0
    note_submission(redis_client, batch_id, began, began + 1.0)
    finisher = threading.Timer(0.3, _complete, (redis_client, batch_id, jobs))
    finisher.start()
    try:
        status = wait_with_progress(redis_client, batch_id, len(jobs), 60.0, redis_db_url)
    finally:
        finisher.join()
    assert status["complete"]
    line = capsys.readouterr().err.strip().splitlines()[-1]
    head = f"ktour: batch {batch_id}: 25/25 jobs done in "
    assert line.startswith(head) and line.endswith(" s from the start of its submission")
    assert 100.0 <= float(line[len(head) :].split()[0]) < 160.0
    # complete before the wait: no time is claimed for the batch, only for the wait
    wait_with_progress(redis_client, batch_id, len(jobs), 60.0, redis_db_url)
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(f"ktour: batch {batch_id}: 25/25 jobs done (") and line.endswith(
        " s waited)"
    )

"""Fault: malformed messages on the queue (poison messages), beside a real batch.

Each kind a broken or foreign client could put on the queue is pushed raw (``LPUSH``, as the
issue's reproduction does) before two real workers start: an entry that is not JSON, a body
that is not base64, a body that is not JSON, Celery's body without its three parts (the
``e30=`` body that stopped every worker), arguments of the wrong shape, an unknown task name,
a message of an older Celery protocol (no task name in the headers) and one of a release whose
``run_jobs`` takes another argument (the rolling-upgrade case). A well-formed chunk of a batch
that does not exist comes too. Then a batch is submitted beside them.

The workers must take every one of them without dying (same PIDs, no ``CRITICAL`` line): each
malformed message acknowledged and kept in the dead-letter list with one ERROR line, the chunk
of the unknown batch dropped with one ERROR line and nothing written for it; the batch must
complete with one record per job, ``ktour status`` must count the dead letters and
``ktour dead-letters`` list each (and ``--clear`` remove them).

Fact: every start square of 6x6 has an open knight's tour (OEIS A165134: no zero count), so
every job finds one, each checked by the verifier in ``audit``.
"""

from __future__ import annotations

import json
import time

import psutil
import pytest
from _faultkit import audit, drive, poison_entries

from knights_tour.batches.client import submit_batch
from knights_tour.batches.jobs import make_batch_jobs
from knights_tour.cli import main
from knights_tour.store import keys
from knights_tour.store.connection import connect
from knights_tour.worker import celery as worker
from knights_tour.worker import dead_letters
from knights_tour.worker.messages import TASK_RUN_JOBS

pytestmark = [pytest.mark.fault, pytest.mark.timeout(400)]


def _log_text(worker_pool) -> str:
    return "".join(p.read_text(errors="replace") for p in worker_pool.log_dir.glob("*.log"))


def test_poison_messages_are_set_aside_and_the_workers_keep_serving(
    fault_redis, worker_pool, capsys
):
    url = fault_redis.url
    r = connect(url)
    jobs = make_batch_jobs([6])
    poison = poison_entries(r, url, jobs[0].to_dict())
    for entry in poison.values():
        r.lpush(keys.QUEUE, entry)
    worker.send(TASK_RUN_JOBS, ["no-such-batch", [jobs[0].to_dict()]], url=url)
    started = worker_pool.start_all("poison-a", "poison-b")
    pids = [p for w in started for p in w.pids]
    batch_id = submit_batch(url, jobs, {"test": "poison messages"}, chunk_size=4)

    d = drive(r, url, batch_id, timeout_s=240)
    assert d.status.get("complete"), d.status
    audit(r, batch_id, jobs)

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and dead_letters.summary(r)["count"] < len(poison):
        time.sleep(0.2)
    parked = [json.loads(e) for e in r.lrange(keys.dead_letters(), 0, -1)]
    assert len(parked) == len(poison), [p["reason"] for p in parked]
    assert all(p["reason"] and p["message"] for p in parked)

    text = _log_text(worker_pool)
    assert text.count("set aside a malformed queue message") == len(poison)
    assert text.count("no batch no-such-batch") == 1
    assert "CRITICAL" not in text and "Traceback" not in text
    assert r.keys(f"{keys.batch('no-such-batch')}*") == []
    assert all(psutil.pid_exists(p) for p in pids), "a worker died"
    assert r.llen(keys.QUEUE) == 0 and r.hlen(worker.UNACKED_KEY) == 0

    code = main(["status", batch_id, "--redis", url])
    out, _ = capsys.readouterr()
    assert code == 0
    assert f"dead letters: {len(poison)} malformed queue message(s)" in out
    assert keys.dead_letters() in out and "`ktour dead-letters` lists them" in out

    code = main(["dead-letters", "--redis", url, "--limit", "0"])
    lines = capsys.readouterr()[0].splitlines()
    assert code == 0 and len(lines) == 1 + len(poison), lines
    assert not any("corrupted" in line for line in lines)
    assert sum("task knights_tour.nope" in line for line in lines) == 1
    assert sum(line.endswith("; message: garbage{") for line in lines) == 1
    code = main(["dead-letters", "--redis", url, "--clear"])
    removed = f"dead letters: removed {len(poison)} from Redis list {keys.dead_letters()}\n"
    assert code == 0 and capsys.readouterr()[0] == removed
    assert r.llen(keys.dead_letters()) == 0

"""Helpers of the fault tier: drive a batch to completion the way a waiting ``ktour run`` does
(poll the status, re-send jobs lost with their worker), and audit the records at the end."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from knights_tour.batches.client import recover_lost_jobs
from knights_tour.batches.progress import batch_status
from knights_tour.batches.store import collect
from knights_tour.local.workers import LocalWorkers
from knights_tour.store import keys
from knights_tour.store.connection import REDIS_ERRORS
from knights_tour.tours.verify import verify_tour
from knights_tour.worker import celery as worker
from knights_tour.worker import holders
from knights_tour.worker.ledger import Ledger
from knights_tour.worker.messages import TASK_RUN_JOBS

LEASE_S = 2.0
"""Lease used by the fault tier's workers (KT_LEASE_S): short, so recovery is quick to test."""


@dataclass
class Drive:
    """What happened while a batch was driven to completion."""

    first_seen: dict[str, float] = field(default_factory=dict)  # job_key -> finished_at
    overwritten: set[str] = field(default_factory=set)  # records rewritten after first seen
    resent: list[str] = field(default_factory=list)  # job keys re-sent by recovery
    redis_errors: int = 0
    seconds: float = 0.0
    status: dict[str, Any] = field(default_factory=dict)


def drive(
    r,
    url: str,
    batch_id: str,
    timeout_s: float,
    on_tick: Callable[[dict[str, Any]], None] | None = None,
    poll_s: float = 0.2,
    recover: bool = True,
) -> Drive:
    """Poll ``batch_id`` until complete (or ``timeout_s``), running recovery on every poll (as a
    waiting ``ktour run`` does; ``recover=False``: like nobody waiting) and watching for records
    that get rewritten (a job executed twice)."""
    d = Drive()
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:
        try:
            st = batch_status(r, batch_id)
            d.status = st
            for rec in collect(r, batch_id):
                k = rec.job_key
                if k in d.first_seen and d.first_seen[k] != rec.finished_at:
                    d.overwritten.add(k)
                d.first_seen.setdefault(k, rec.finished_at)
            if recover:
                d.resent += recover_lost_jobs(r, url, batch_id)
        except REDIS_ERRORS:
            d.redis_errors += 1
            st = {"complete": False}
        if on_tick is not None:
            on_tick(st)
        if st.get("complete"):
            break
        time.sleep(poll_s)
    d.seconds = time.monotonic() - began
    return d


def leased_by(r, batch_id: str, pids: set[int]) -> set[str]:
    """Job keys of ``batch_id`` held (claimed under a live lease) by one of the processes
    ``pids`` (a token is ``host:pid:random``)."""
    return held_by(r, Ledger.for_batch(batch_id), pids)


def held_by(r, led: Ledger, pids: set[int]) -> set[str]:
    """Item keys of ``led`` held by one of the processes ``pids``."""
    out = set()
    for k, token in holders.holders(r, led).items():
        parts = token.split(":")
        if len(parts) >= 2 and parts[1].isdigit() and int(parts[1]) in pids:
            out.add(k)
    return out


def audit(r, batch_id: str, jobs) -> list[dict[str, Any]]:
    """Check the end state of a batch: one record per job (no more, no less), every found tour
    passes the verifier, no lease or recovery bookkeeping left. Returns the records."""
    records = collect(r, batch_id)
    want = sorted(j.key for j in jobs)
    got = [rec.job_key for rec in records]
    assert sorted(got) == want, "records missing or extra"
    assert len(got) == len(set(got)), "duplicate records"
    for rec in records:
        assert rec.batch_id == batch_id
        assert rec.status in ("found", "no_tour"), rec
        if rec.status == "found":
            assert verify_tour((rec.rows, rec.cols), rec.tour, start=rec.start).ok
    led = Ledger.for_batch(batch_id)
    assert holders.running(r, led) == []
    left = {k: r.hgetall(k) for k in (led.started, led.attempts, led.requeued) if r.exists(k)}
    assert not left, f"bookkeeping left: {left}"
    return records


def _b64(body: object) -> str:
    return base64.b64encode(json.dumps(body).encode()).decode()


TEMPLATE_QUEUE = "kt-test-template"
"""A queue no worker consumes, where :func:`_template` sends its message."""


def _template(r, url: str) -> dict:
    """A real task message as kombu puts it on the project queue: sent to
    :data:`TEMPLATE_QUEUE` (so that no worker takes it first), taken back off that queue and
    addressed to the project queue."""
    app = worker.use_redis(url)
    app.send_task(TASK_RUN_JOBS, args=["template", []], queue=TEMPLATE_QUEUE, ignore_result=True)
    raw = r.rpop(TEMPLATE_QUEUE)
    assert raw is not None
    env = json.loads(raw)
    env["properties"]["delivery_info"] = {"exchange": keys.QUEUE, "routing_key": keys.QUEUE}
    return env


def _variant(template: dict, n: int, body: str | None = None, **headers: object) -> str:
    env = json.loads(json.dumps(template))
    env["properties"]["delivery_tag"] = f"poison-{n}"
    env["headers"]["id"] = f"poison-{n}"
    for k, v in headers.items():
        if v is None:
            env["headers"].pop(k, None)
        else:
            env["headers"][k] = v
    if body is not None:
        env["body"] = body
    return json.dumps(env)


def poison_entries(r, url: str, job: dict) -> dict[str, str]:
    """A malformed queue entry of each kind (the kind -> the entry, for ``LPUSH``), made from
    a real task message of ``url`` (sent, then taken back off the queue); ``job`` is a job
    dict for the entry of another release's arguments."""
    template = _template(r, url)
    return {
        "not JSON": "garbage{",
        "body not base64": _variant(template, 1, body="!!!notbase64"),
        "body not JSON": _variant(template, 2, body=base64.b64encode(b"garbage{").decode()),
        "body without its parts": _variant(template, 3, body="e30="),
        "arguments of the wrong shape": _variant(template, 4, body=_b64([[1, 2, 3], {}, {}])),
        "unknown task": _variant(template, 5, body=_b64([[], {}, {}]), task="knights_tour.nope"),
        "older protocol": _variant(
            template, 6, body=_b64({"task": TASK_RUN_JOBS, "args": ["b", []]}), task=None
        ),
        "another release's arguments": _variant(
            template, 7, body=_b64([["some-batch", [job], {"priority": 1}], {}, {}])
        ),
    }


class WorkerPool:
    """Starts single Celery worker processes (prefork, concurrency 1) on one Redis URL and
    stops every one of them at the end, whatever state the test left them in."""

    def __init__(self, url: str, log_dir, env: dict[str, str] | None = None) -> None:
        self.url = url
        self.log_dir = log_dir
        self.env = {"KT_LEASE_S": str(LEASE_S), **(env or {})}
        self.started: list[LocalWorkers] = []
        self.strays: list = []  # psutil.Process of pool children whose parent a test killed

    def start(self, name: str, env: dict[str, str] | None = None) -> LocalWorkers:
        """Start one worker and wait until it answers a ping."""
        return self.start_all(name, env=env)[0]

    def start_all(self, *names: str, env: dict[str, str] | None = None) -> list[LocalWorkers]:
        """Start one worker per name, all at once, and wait until every one answers."""
        workers = [
            LocalWorkers(
                self.url,
                count=1,
                concurrency=1,
                node_prefix=name,
                env={**self.env, **(env or {})},
                ready_timeout_s=120,
                log_dir=self.log_dir,
                loglevel="INFO",
            )
            for name in names
        ]
        self.started.extend(workers)
        for w in workers:
            w.spawn()
        for w in workers:
            w.wait_ready()
        return workers

    def family(self, w: LocalWorkers) -> list:
        """psutil.Process of the worker's main process and its pool children."""
        import psutil

        main = psutil.Process(w.pids[0])
        return [main, *main.children(recursive=True)]

    def stop_all(self) -> None:
        """SIGKILL every worker started here, its pool children and the strays, and reap them:
        the test is over and its Redis goes with it, so a warm shutdown (a second or two per
        worker) would save nothing."""
        import psutil

        for w in self.started:
            w.kill()
        alive = [p for p in self.strays if p.is_running()]
        for p in alive:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(alive, timeout=10)

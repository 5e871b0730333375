"""Helpers of the fault tier: drive a batch to completion the way a waiting ``ktour run`` does
(poll the status, re-send jobs lost with their worker), and audit the records at the end."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from knights_tour.service.batches import recover_lost_jobs
from knights_tour.service.local_workers import LocalWorkers
from knights_tour.store import keys, leases
from knights_tour.store.batches import batch_status, collect
from knights_tour.store.connection import REDIS_ERRORS
from knights_tour.store.ledger import Ledger
from knights_tour.verify import verify_tour

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
    for k, token in leases.holders(r, led).items():
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
    assert leases.running(r, Ledger.for_batch(batch_id)) == []
    left = {k: r.hgetall(k) for k in keys.batch_recovery_keys(batch_id) if r.exists(k)}
    assert not left, f"bookkeeping left: {left}"
    return records


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
        import psutil

        for w in self.started:
            w.stop(timeout_s=10)
        alive = [p for p in self.strays if p.is_running()]
        for p in alive:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(alive, timeout=10)

"""The worker side of batches: run a chunk of jobs and store one record per job. The Celery task
in :mod:`knights_tour.tasks` is a thin wrapper around :func:`run_chunk` (count sub-jobs:
:mod:`knights_tour.counting.execution`).

A chunk costs Redis a small constant number of calls, not a number per job: the whole chunk
is claimed in one script call (:class:`knights_tour.worker.claims.ChunkClaim`,
:func:`knights_tour.worker.leases.claim`; jobs already recorded
are skipped, so a duplicate delivery never runs them again, and jobs another live worker
holds are left to it - recovery re-sends them if it dies), the lease is renewed by the
process's heartbeat (:mod:`knights_tour.worker.lease_keeper`), and the records are buffered
and stored together (:func:`knights_tour.batches.saving.save_records`) at the chunk's end or
every :data:`FLUSH_S` seconds, whichever comes first, so progress stays live. A job on which
workers died ``KT_MAX_ATTEMPTS`` times gets an ``error`` record (``error_type``
``WorkerLost``) instead of running. Messages are untrusted: an invalid job becomes an
``error`` record, never a crash.

**At the task's time limit.** A chunk's limits leave every job its whole budget
(:func:`knights_tour.batches.chunking.chunk_time_limits`). A task whose soft limit is reached
all the same (Celery raises ``SoftTimeLimitExceeded`` wherever the task is) stores the records
of the jobs it finished and hands every job it has not decided back: released, sent again in
one task at recovery priority and marked re-sent (:func:`_hand_back`). The job the limit
interrupted keeps no record; it is blamed one attempt as a worker death in careful mode is
(its next claim is careful), and once it has been cut ``KT_MAX_ATTEMPTS`` times it is recorded
as undecided - ``unknown``, reason ``time_limit`` - never as an ``error`` that would hide a
later answer. At the hard limit the process is killed; its lease lapses and recovery re-sends
what it held (:mod:`knights_tour.worker.recovery`).
"""

from __future__ import annotations

import logging
import time
from collections import Counter, deque
from collections.abc import Sequence
from typing import TypedDict

import redis

from knights_tour.batches.jobs import Job, error_record, parse_jobs, run_job
from knights_tour.batches.saving import row_of, save_records
from knights_tour.settings import get_settings
from knights_tour.store import keys
from knights_tour.tours.record import Record, Status
from knights_tour.worker.claims import ChunkClaim, redis_client, retrying
from knights_tour.worker.lease_keeper import keeper
from knights_tour.worker.ledger import Ledger
from knights_tour.worker.messages import TIME_LIMIT_EXCEPTIONS, Send, TaskLimitReached

log = logging.getLogger(__name__)

FLUSH_S = 0.5
"""Buffered records are stored at the latest when a job ends this many seconds after the last
store (and always at the chunk's end), so a waiting client sees progress."""


class ChunkSummary(TypedDict):
    """What :func:`run_chunk` returns (the task's result): the batch, the records written and
    jobs skipped (``jobs``), their ``counts`` by status (plus ``skipped`` and
    ``handed_back``), the worker's node name and the chunk's wall time in seconds."""

    batch_id: str
    jobs: int
    counts: dict[str, int]
    worker: str | None
    elapsed_s: float


class _Records:
    """The records of a chunk not yet stored, and storing them (one script call per flush)."""

    def __init__(self, r: redis.Redis, batch_id: str) -> None:
        self.r, self.batch_id = r, batch_id
        self.rows: list[Record] = []  # encoded when stored
        self.added: set[str] = set()  # job keys of every record of the chunk
        self.last = time.monotonic()

    def add(self, record: Record) -> None:
        self.rows.append(record)
        self.added.add(str(record.job_key))

    def unstored(self) -> list[str]:
        """Job keys of the buffered records (not stored yet)."""
        return [str(record.job_key) for record in self.rows]

    def due(self) -> bool:
        return bool(self.rows) and time.monotonic() - self.last >= FLUSH_S

    def flush(self, retry: bool = True) -> None:
        """Store the buffered records; log those dropped because another was stored first.
        ``retry``: keep trying for ``KT_SAVE_RETRY_S`` while Redis is unreachable (else one
        attempt)."""
        if self.rows:
            rows = [row_of(record) for record in self.rows]
            save = lambda: save_records(self.r, self.batch_id, rows)  # noqa: E731
            stored = retrying(save) if retry else save()
            self.rows = []
            dropped = [
                job_key for (job_key, *_), kept in zip(rows, stored, strict=True) if not kept
            ]
            if dropped:  # one line for all of them: a lapse is one event
                log.warning(
                    "job(s) %s of batch %s ran a second time (the lease lapsed while "
                    "they ran); the records stored first are kept",
                    ", ".join(dropped),
                    self.batch_id,
                )
        self.last = time.monotonic()


def _worker_lost(job: Job, deaths: int, batch_id: str) -> Record:
    record = error_record(
        job, f"worker lost {deaths} times while running this job; given up", batch_id
    )
    record.error_type = "WorkerLost"
    return record


def _job_key(job: Job) -> str:
    return job.key


def _run_jobs(
    held: ChunkClaim, todo: deque[Job], records: _Records, counts: Counter[str], worker: str | None
) -> None:
    """Run the claimed jobs ``todo`` in order, buffering their records.

    Raises
    ------
    TaskLimitReached
        If the task's soft time limit interrupted a job (:func:`_hand_back` takes over).
    """
    batch_id = held.led.id
    max_attempts = get_settings().max_attempts
    while todo:
        todo = held.ready(todo, _job_key, records.flush)
        if not todo:
            break
        job = todo.popleft()
        deaths = held.start(job.key)
        if deaths >= max_attempts:
            record = _worker_lost(job, deaths, batch_id)
        else:
            record = run_job(job, batch_id=batch_id, worker=worker)
            if record.error_type in TIME_LIMIT_EXCEPTIONS:
                raise TaskLimitReached(job.key)
        record.attempts, record.worker = deaths + 1, worker
        records.add(record)
        held.done(job.key)
        counts[record.status.value] += 1
        if held.careful or records.due():
            records.flush()


def _hand_back(
    held: ChunkClaim,
    jobs: Sequence[Job],
    records: _Records,
    counts: Counter[str],
    worker: str | None,
    send: Send,
) -> None:
    """After the task's soft time limit: store the finished jobs' records, then hand back the
    jobs of ``jobs`` this task has not decided (one task at recovery priority via ``send``;
    released and marked re-sent). The job the limit interrupted is blamed one attempt
    (``attempts`` entry + 1, so its next claim is careful); the cut that makes
    ``KT_MAX_ATTEMPTS`` records it as ``unknown`` with reason ``time_limit`` instead.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis stays unreachable (the task layer retries the whole chunk).
    """
    led = held.led
    cut = held.current
    given_up = held.blame_cut()
    if given_up is not None:
        job_key, tries = given_up
        record = error_record(next(j for j in jobs if j.key == job_key), "time_limit", led.id)
        record.status, record.error_type = Status.UNKNOWN, None
        record.attempts, record.worker = tries, worker
        records.add(record)
        held.done(job_key)
        counts[record.status.value] += 1
    records.flush()
    if held.claimed_all:
        back = [j for j in jobs if j.key in held.unfinished]
    else:  # stopped inside a claim: what it got is unknown; a job not ours is skipped again
        back = [j for j in jobs if j.key not in records.added]
    if back:
        note = f" ({cut} was cut)" if cut is not None else ""
        counts["handed_back"] += held.hand_back(back, send, "job(s)", note)


def run_chunk(batch_id: str, job_dicts: object, worker: str | None, send: Send) -> ChunkSummary:
    """Run a chunk of jobs of batch ``batch_id`` and store one record per job.

    Parameters
    ----------
    batch_id : str
    job_dicts : list of dict
        Jobs as :meth:`Job.to_dict` gives them (untrusted: a list of them or one, each is
        validated).
    worker : str or None
        Node name of this worker, copied into the records.
    send : callable
        ``send(job_dicts)`` puts a task for more jobs of this batch on the queue at recovery
        priority (the hand-back at the task's soft time limit).

    Returns
    -------
    ChunkSummary
        A tiny summary: ``batch_id``, ``jobs`` (records written and jobs skipped), ``counts``
        by status (plus ``skipped``: recorded, held by another worker, or cancelled;
        ``handed_back``: sent again at the task's time limit),
        ``worker`` (node name) and ``elapsed_s``.

    A chunk of a batch that is not in Redis (forgotten, or never submitted) is dropped with
    one ERROR line: nothing is written for it.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis stays unreachable for ``KT_SAVE_RETRY_S`` (the task layer retries the task).
    StorageFullError
        If Redis refuses writes for ``KT_SAVE_RETRY_S``; the chunk's claims are given back
        first, or left to lapse (:meth:`ChunkClaim.release`).
    """
    began = time.perf_counter()
    r = redis_client()
    counts: Counter[str] = Counter()
    if not retrying(lambda: r.exists(keys.batch(batch_id))):
        log.error("dropped a chunk of %s: no batch %s in Redis", _jobs_text(job_dicts), batch_id)
        return _summary(batch_id, Counter(), worker, began)
    records = _Records(r, batch_id)

    def keep(record: Record) -> None:
        records.add(record)
        counts[record.status.value] += 1

    valid, invalid = parse_jobs(job_dicts, batch_id, worker, keep)
    if invalid:
        log.error(
            "batch %s: %d job(s) of a message failed validation, recorded as errors (%s)",
            batch_id,
            len(invalid),
            invalid[0],
        )
    held = ChunkClaim(r, Ledger.for_batch(batch_id), keeper())
    try:
        held.run(
            valid,
            _job_key,
            lambda todo: _run_jobs(held, todo, records, counts, worker),
            lambda: _hand_back(held, valid, records, counts, worker, send),
        )
        records.flush()
    finally:
        if records.rows:  # stopped by an exception: keep what was finished, if Redis allows
            try:
                records.flush(retry=False)
            except redis.RedisError:  # away or refusing writes: run those jobs again
                held.release(records.unstored())
        held.release()
    counts["skipped"] += held.skipped
    if not counts["skipped"]:
        del counts["skipped"]
    return _summary(batch_id, counts, worker, began)


def _jobs_text(job_dicts: object) -> str:
    return f"{len(job_dicts)} job(s)" if isinstance(job_dicts, list) else "jobs"


def _summary(batch_id: str, counts: Counter[str], worker: str | None, began: float) -> ChunkSummary:
    return {
        "batch_id": batch_id,
        "jobs": sum(counts.values()),
        "counts": dict(counts),
        "worker": worker,
        "elapsed_s": round(time.perf_counter() - began, 6),
    }


__all__ = ["run_chunk", "ChunkSummary", "FLUSH_S"]

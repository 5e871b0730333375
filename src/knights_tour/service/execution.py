"""The worker side of batches and counts: run a chunk of jobs (or count sub-jobs) and store
one record (partial count) per item. The Celery tasks in :mod:`knights_tour.tasks` are thin
wrappers around :func:`run_chunk` and :func:`run_count_chunk`.

Each job is leased first (:mod:`knights_tour.store.leases`): a job already recorded is skipped,
so a duplicate delivery never runs it again; a job leased by another live task is waited for;
a job whose workers died ``KT_MAX_ATTEMPTS`` times gets an ``error`` record (``error_type``
``WorkerLost``). Messages are untrusted: an invalid job becomes an ``error`` record, never a
crash.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import redis

from knights_tour.core.counting import SubJob
from knights_tour.core.jobs import Job, error_record, run_job
from knights_tour.result import Record
from knights_tour.settings import get_settings
from knights_tour.store import counts as count_store
from knights_tour.store import keys, leases
from knights_tour.store.batches import save_record
from knights_tour.store.connection import REDIS_ERRORS, connect
from knights_tour.worker import DEFAULT_REDIS_URL

log = logging.getLogger(__name__)

SAVE_RETRY_S = 30.0
"""How long a task keeps retrying to store a record while Redis is unreachable, in seconds."""

Send = Callable[[list[dict[str, Any]]], None]
"""Puts one task for a list of job dicts of the running batch on the queue, served first."""

_redis_client: redis.Redis | None = None


def redis_client() -> redis.Redis:
    """This worker process's Redis client (the broker's server, ``KT_REDIS_URL``); created on
    first use.

    Raises
    ------
    BackendUnavailableError
        If Redis cannot be reached.
    """
    global _redis_client
    if _redis_client is None:
        _redis_client = connect(get_settings().redis_url or DEFAULT_REDIS_URL)
    return _redis_client


def _save(batch_id: str, record: Record) -> bool:
    """save_record, retrying for up to :data:`SAVE_RETRY_S` while Redis is unreachable;
    False if the job already had a different record (kept: this run's is dropped)."""
    deadline = time.monotonic() + SAVE_RETRY_S
    delay = 0.2
    while True:
        try:
            return save_record(redis_client(), batch_id, record)
        except REDIS_ERRORS:
            if time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


def invalid_key(job_dict: object) -> str:
    """A stable key for a job dict that failed validation (so a re-delivery adds no record)."""
    try:
        text = json.dumps(job_dict, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        text = repr(job_dict)
    return "invalid:" + hashlib.sha1(text.encode()).hexdigest()[:16]


class _Chunk:
    """One chunk of one batch being run by this process: its leases, its counts."""

    def __init__(self, batch_id: str, worker: str | None) -> None:
        self.batch_id = batch_id
        self.worker = worker
        self.r = redis_client()
        self.keeper = leases.keeper()
        self.counts: Counter[str] = Counter()
        self.max_attempts = get_settings().max_attempts

    def validate(self, job_dicts: list[Any]) -> list[Job]:
        """The valid jobs; an error record is stored for each invalid one."""
        valid: list[Job] = []
        for raw in job_dicts:
            try:
                valid.append(Job.from_dict(raw))
            except Exception as exc:  # noqa: BLE001 - invalid input becomes an error record
                record = error_record(raw, exc, self.batch_id, job_key=invalid_key(raw))
                record.worker = self.worker
                _save(self.batch_id, record)
                self.counts[record.status.value] += 1
        return valid

    def run_one(self, job: Job) -> Record | None:
        """Run a claimed job (or give it up after too many worker deaths) and store it;
        None if its lease lapsed before it started and another task has the job now."""
        attempts = self.keeper.begin(self.r, self.batch_id, job.key)
        if not attempts and self.keeper.claim(self.r, self.batch_id, job.key) == leases.CLAIMED:
            attempts = self.keeper.begin(self.r, self.batch_id, job.key)  # nobody took it
        if not attempts:  # recorded or held by another task since our lease lapsed
            self.counts["skipped"] += 1
            return None
        if attempts > self.max_attempts:
            record = error_record(
                job, f"worker lost {attempts - 1} times while running this job; given up",
                self.batch_id,
            )
            record.error_type = "WorkerLost"
            record.worker = self.worker
        else:
            record = run_job(job, batch_id=self.batch_id, worker=self.worker)
        record.attempts = attempts
        if not _save(self.batch_id, record):
            log.warning("job %s of batch %s ran a second time (its lease lapsed while it "
                        "ran); the record stored first is kept", job.key, self.batch_id)
        self.keeper.release(self.r, self.batch_id, job.key, finished=True)
        self.counts[record.status.value] += 1
        return record

    def hand_off(self, rest: list[Job], send: Send) -> None:
        """Give the jobs this task has no time left for to a fresh task."""
        if rest:
            send([j.to_dict() for j in rest])
            leases.mark_requeued(self.r, self.batch_id, [j.key for j in rest])

    def run_claimed(self, mine: list[Job], held: dict[str, Job], send: Send) -> None:
        """Run our claimed jobs, then the ones another task held once they are freed."""
        for i, job in enumerate(mine):
            record = self.run_one(job)
            if record is not None and record.error_type == "SoftTimeLimitExceeded":
                for j in mine[i + 1:]:
                    self.keeper.release(self.r, self.batch_id, j.key, finished=False)
                self.hand_off(mine[i + 1:] + list(held.values()), send)
                return
        if held:
            wait_s = 3 * self.keeper.lease_s
            for key, got in leases.wait_for_claim(self.keeper, self.r, self.batch_id,
                                                  list(held), wait_s):
                if got == leases.CLAIMED:
                    self.run_one(held[key])
                else:
                    self.counts["skipped"] += 1

    def release_all(self, valid: list[Job]) -> None:
        """Free the leases still held (after an exception) so a redelivery can run them."""
        ours = {keys.batch_lease(self.batch_id, j.key): j.key for j in valid}
        for lease in self.keeper.held():
            if lease in ours:
                self.keeper.release(self.r, self.batch_id, ours[lease], finished=False)


def run_chunk(
    batch_id: str, job_dicts: list[dict[str, Any]], worker: str | None, send: Send
) -> dict[str, Any]:
    """Run a chunk of jobs of batch ``batch_id`` and store one record per job.

    Parameters
    ----------
    batch_id : str
    job_dicts : list of dict
        Jobs as :meth:`Job.to_dict` gives them (untrusted: each is validated).
    worker : str or None
        Node name of this worker, copied into the records.
    send : callable
        ``send(job_dicts)`` puts a task for more jobs of this batch on the queue at recovery
        priority (soft-time-limit hand-off, jobs lost with another worker).

    Returns
    -------
    dict
        A tiny summary: ``batch_id``, ``jobs`` (records written), ``counts`` by status (plus
        ``skipped``), ``worker`` (node name) and ``elapsed_s``.
    """
    began = time.perf_counter()
    chunk = _Chunk(batch_id, worker)
    valid = chunk.validate(job_dicts if isinstance(job_dicts, list) else [job_dicts])
    outcome = leases.claim_all(chunk.keeper, chunk.r, batch_id, [j.key for j in valid])
    chunk.counts["skipped"] += sum(1 for o in outcome.values()
                                   if o in (leases.DONE, leases.CANCELLED))
    mine = [j for j in valid if outcome[j.key] == leases.CLAIMED]
    held = {j.key: j for j in valid if outcome[j.key] == leases.HELD}
    try:
        chunk.run_claimed(mine, held, send)
    finally:
        chunk.release_all(valid)
    counts = chunk.counts
    if not counts["skipped"]:
        del counts["skipped"]
    # Workers also re-send jobs of this batch lost with another worker, so a batch heals
    # while any of its tasks still run, with or without a waiting client.
    try:
        leases.recover_batch(chunk.r, batch_id, lambda _bid, dicts: send(dicts))
    except REDIS_ERRORS:
        pass
    return {
        "batch_id": batch_id,
        "jobs": sum(counts.values()),
        "counts": dict(counts),
        "worker": worker,
        "elapsed_s": round(time.perf_counter() - began, 6),
    }


def _run_subjob(r: redis.Redis, led: leases.Ledger, keeper: leases.LeaseKeeper, sj: SubJob,
                worker: str | None) -> bool | None:
    """Run one claimed sub-job (or give it up after too many worker deaths) and store its
    partial count; True if it was counted, False if given up, None if its lease lapsed
    before it started (another task has it now)."""
    attempts = keeper.begin(r, led, sj.key)
    if not attempts:
        return None
    ok = True
    try:
        if attempts > get_settings().max_attempts:
            count_store.save_partial(
                r, led.id, sj.key, None, 0, worker=worker,
                error=f"WorkerLost: worker lost {attempts - 1} times on this sub-job; given up")
            ok = False
        else:
            began = time.perf_counter()
            count, nodes = sj.run()
            count_store.save_partial(r, led.id, sj.key, count, nodes,
                                     time.perf_counter() - began, worker)
    except BaseException:
        keeper.release(r, led, sj.key, finished=False)
        raise
    keeper.release(r, led, sj.key, finished=True)
    return ok


def run_count_chunk(
    count_id: str, subjob_dicts: list[dict[str, Any]], worker: str | None
) -> dict[str, Any]:
    """Run count sub-jobs (:class:`knights_tour.core.counting.SubJob` dicts) of ``count_id`` and
    store each partial count under its sub-job key. Each sub-job is leased first, as batch jobs
    are: one that already has a partial count is skipped (resubmission, re-delivery), one
    another live task holds is left to it; a malformed one is stored as an error entry.

    Returns
    -------
    dict
        A tiny summary: ``count_id``, ``ran``, ``skipped``, ``errors``, ``worker``.
    """
    r = redis_client()
    led = leases.Ledger.for_count(count_id)
    keeper = leases.keeper()
    ran = skipped = errors = 0
    for raw in subjob_dicts if isinstance(subjob_dicts, list) else [subjob_dicts]:
        try:
            sj = SubJob.from_dict(raw)
        except Exception as exc:  # noqa: BLE001 - invalid input becomes an error entry
            key = raw.get("key") if isinstance(raw, dict) else None
            count_store.save_partial(r, count_id, str(key or invalid_key(raw)), None, 0,
                                     worker=worker, error=f"{type(exc).__name__}: {exc}")
            errors += 1
            continue
        if keeper.claim(r, led, sj.key) != leases.CLAIMED:
            skipped += 1
            continue
        outcome = _run_subjob(r, led, keeper, sj, worker)
        if outcome is None:
            skipped += 1
        elif outcome:
            ran += 1
        else:
            errors += 1
    return {"count_id": count_id, "ran": ran, "skipped": skipped, "errors": errors,
            "worker": worker}


__all__ = ["run_chunk", "run_count_chunk", "redis_client", "invalid_key", "SAVE_RETRY_S"]

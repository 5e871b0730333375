"""Celery tasks (a thin adapter): the worker-side entry.

The task :func:`run_jobs` takes a batch id and a chunk of job dicts (JSON), validates each with
:meth:`knights_tour.core.jobs.Job.from_dict` (an invalid job becomes an ``error`` record, never a
crash), runs it with :func:`knights_tour.core.jobs.run_job`, and writes each record under its own job
key with :func:`knights_tour.store.batches.save_record`. All the logic lives in ``jobs`` and ``store``.

The client side (submit, wait, recover, collect) is :mod:`knights_tour.service.batches`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

import redis

from knights_tour.store import keys
from knights_tour.core.jobs import Job, error_record, run_job
from knights_tour.settings import get_settings
from knights_tour.service.batches import RECOVERY_PRIORITY
from knights_tour.store.batches import REDIS_ERRORS, connect, save_record
from knights_tour.worker import DEFAULT_REDIS_URL, TASK_COUNT_SUBJOBS, TASK_RUN_JOBS, app

log = logging.getLogger(__name__)

SAVE_RETRY_S = 30.0
"""How long a task keeps retrying to store a record while Redis is unreachable."""

_redis_client: redis.Redis | None = None


def _redis() -> redis.Redis:
    """This process's Redis client for records (same server as the broker); created lazily."""
    global _redis_client
    if _redis_client is None:
        _redis_client = connect(get_settings().redis_url or DEFAULT_REDIS_URL)
    return _redis_client


def _save(batch_id: str, record: Mapping[str, Any]) -> None:
    """save_record, retrying for up to :data:`SAVE_RETRY_S` while Redis is unreachable."""
    deadline = time.monotonic() + SAVE_RETRY_S
    delay = 0.2
    while True:
        try:
            save_record(_redis(), batch_id, record)
            return
        except REDIS_ERRORS:
            if time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


def _invalid_key(job_dict: object) -> str:
    """A stable key for a job dict that failed validation (so a re-delivery overwrites)."""
    try:
        text = json.dumps(job_dict, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        text = repr(job_dict)
    return "invalid:" + hashlib.sha1(text.encode()).hexdigest()[:16]


JOB_TASK_OPTIONS: dict[str, Any] = {
    "acks_late": True,
    "autoretry_for": REDIS_ERRORS,
    "retry_backoff": True,
    "retry_backoff_max": 60,
    "max_retries": 5,
}
"""Options shared by the tasks that run work (batch chunks, count sub-jobs): late
acknowledgement, and retries with back-off when Redis is briefly unreachable."""


@app.task(name=TASK_RUN_JOBS, bind=True, **JOB_TASK_OPTIONS)
def run_jobs(self: Any, batch_id: str, job_dicts: list[dict[str, Any]]) -> dict[str, Any]:
    """Run a chunk of jobs of batch ``batch_id`` and store one record per job.

    Each job is leased first (:mod:`knights_tour.store.leases`): a job already recorded is skipped,
    so a duplicate delivery never runs it again; a job leased by another live task is waited
    for; a job whose workers died ``KT_MAX_ATTEMPTS`` times gets an ``error`` record
    (``error_type`` ``WorkerLost``). Records carry ``attempts`` (starts since the last record).

    Parameters
    ----------
    batch_id : str
    job_dicts : list of dict
        Jobs as :meth:`Job.to_dict` gives them (untrusted: each is validated).

    Returns
    -------
    dict
        A tiny summary: ``batch_id``, ``jobs`` (records written), ``counts`` by status,
        ``worker`` (node name) and ``elapsed_s``.
    """
    from knights_tour.store import leases as recovery

    began = time.perf_counter()
    worker = getattr(self.request, "hostname", None)
    counts: Counter[str] = Counter()
    if not isinstance(job_dicts, list):
        job_dicts = [job_dicts]
    valid: list[Job] = []
    for raw in job_dicts:
        try:
            valid.append(Job.from_dict(raw))
        except Exception as exc:  # noqa: BLE001 - invalid input becomes an error record
            record = error_record(raw, exc, batch_id, job_key=_invalid_key(raw))
            record["worker"] = worker
            _save(batch_id, record)
            counts[record["status"]] += 1
    # Lease every job of the chunk (recovery re-sends them if this worker dies); a job whose
    # record is already stored is skipped (late duplicate delivery), one leased by another live
    # task is waited for after the rest (recovery.wait_for_claim).
    r = _redis()
    keeper = recovery.keeper()
    outcome = recovery.claim_all(keeper, r, batch_id, [j.key for j in valid])
    counts["skipped"] += sum(1 for o in outcome.values() if o == recovery.DONE)
    mine = [j for j in valid if outcome[j.key] == recovery.CLAIMED]
    held = {j.key: j for j in valid if outcome[j.key] == recovery.HELD}
    max_attempts = get_settings().max_attempts

    def run_one(job: Job) -> dict[str, Any]:
        attempts = keeper.begin(r, batch_id, job.key)
        if attempts > max_attempts:
            record = error_record(
                job, f"worker lost {attempts - 1} times while running this job; given up",
                batch_id,
            )
            record["error_type"] = "WorkerLost"
            record["worker"] = worker
        else:
            record = run_job(job, batch_id=batch_id, worker=worker)
        record["attempts"] = attempts
        _save(batch_id, record)
        keeper.release(r, batch_id, job.key, finished=True)
        counts[record["status"]] += 1
        return record

    try:
        for i, job in enumerate(mine):
            record = run_one(job)
            if record.get("error_type") == "SoftTimeLimitExceeded":
                rest = [j for j in mine[i + 1:]] + list(held.values())
                for j in mine[i + 1:]:
                    keeper.release(r, batch_id, j.key, finished=False)
                held = {}
                if rest:  # hand the jobs this task has no time left for to a fresh task
                    self.app.send_task(
                        TASK_RUN_JOBS, args=[batch_id, [j.to_dict() for j in rest]],
                        queue=keys.QUEUE, ignore_result=True, priority=RECOVERY_PRIORITY,
                    )
                    recovery.mark_requeued(r, batch_id, [j.key for j in rest])
                break
        if held:
            wait_s = 3 * keeper.lease_s
            for key, got in recovery.wait_for_claim(keeper, r, batch_id, list(held), wait_s):
                if got == recovery.CLAIMED:
                    run_one(held[key])
                else:
                    counts["skipped"] += 1
    finally:
        ours = {keys.batch_lease(batch_id, j.key): j.key for j in valid}
        for lease in keeper.held():  # an exception: free what we hold for a redelivery
            if lease in ours:
                keeper.release(r, batch_id, ours[lease], finished=False)
    if not counts["skipped"]:
        del counts["skipped"]
    # Workers also re-send jobs of this batch lost with another worker, so a batch heals
    # while any of its tasks still run, with or without a waiting client.
    try:
        recovery.recover_batch(r, batch_id, lambda bid, dicts: self.app.send_task(
            TASK_RUN_JOBS, args=[bid, dicts], queue=keys.QUEUE, ignore_result=True,
            priority=RECOVERY_PRIORITY,
        ))
    except REDIS_ERRORS:
        pass
    return {
        "batch_id": batch_id,
        "jobs": sum(counts.values()),
        "counts": dict(counts),
        "worker": worker,
        "elapsed_s": round(time.perf_counter() - began, 6),
    }


# -- tour counts (issue 7): a thin adapter over knights_tour.core.counting / count_store -----------

@app.task(name=TASK_COUNT_SUBJOBS, bind=True, **JOB_TASK_OPTIONS)
def count_subjobs(self: Any, count_id: str, subjob_dicts: list[dict[str, Any]]) -> dict[str, Any]:
    """Run count sub-jobs (:class:`knights_tour.core.counting.SubJob` dicts) of count ``count_id`` and
    store each partial count under its sub-job key. A sub-job that already has a partial count
    is skipped (resubmission, re-delivery); a malformed one is stored as an error entry.

    Returns a tiny summary: ``count_id``, ``ran``, ``skipped``, ``errors``, ``worker``.
    """
    from knights_tour.store import counts as count_store
    from knights_tour.core.counting import SubJob

    worker = getattr(self.request, "hostname", None)
    r = _redis()
    ran = skipped = errors = 0
    for raw in subjob_dicts if isinstance(subjob_dicts, list) else [subjob_dicts]:
        try:
            sj = SubJob.from_dict(raw)
        except Exception as exc:  # noqa: BLE001 - invalid input becomes an error entry
            key = raw.get("key") if isinstance(raw, dict) else None
            count_store.save_partial(r, count_id, str(key or _invalid_key(raw)), None, 0,
                                     worker=worker, error=f"{type(exc).__name__}: {exc}")
            errors += 1
            continue
        if count_store.has_partial(r, count_id, sj.key):
            skipped += 1
            continue
        began = time.perf_counter()
        count, nodes = sj.run()
        count_store.save_partial(r, count_id, sj.key, count, nodes,
                                 time.perf_counter() - began, worker)
        ran += 1
    return {"count_id": count_id, "ran": ran, "skipped": skipped, "errors": errors,
            "worker": worker}


__all__ = ["run_jobs", "count_subjobs"]


# -- beat: scheduled sweeps and collection (knights_tour.service.schedule, knights_tour.service.collector) ----

from knights_tour.service.schedule import TASK_COLLECT, TASK_SUBMIT_SWEEP  # noqa: E402


@app.task(name=TASK_SUBMIT_SWEEP, bind=True, acks_late=True)
def submit_sweep(self: Any, sweep: dict[str, Any]) -> dict[str, Any]:
    """Submit the batch of a scheduled sweep (sent by celery beat; see knights_tour.service.schedule).

    The batch id is derived from the task id, so a re-delivered message re-sends only the
    jobs without a record instead of starting a second batch. Returns ``{"batch_id", "sweep"}``.
    """
    from knights_tour.service.schedule import run_sweep

    name = str(sweep.get("name", "sweep")) if isinstance(sweep, dict) else "sweep"
    task_id = str(getattr(self.request, "id", None) or "")[:8] or None
    batch_id = f"sweep-{name}-{task_id}" if task_id else None
    batch_id = run_sweep(get_settings().redis_url or DEFAULT_REDIS_URL, sweep, batch_id=batch_id)
    log.info("scheduled sweep %s submitted as batch %s", name, batch_id)
    return {"batch_id": batch_id, "sweep": name}


@app.task(name=TASK_COLLECT)
def collect_reports() -> dict[str, Any]:
    """Write a report for every finished, not yet collected batch (sent by celery beat).

    A thin adapter around :func:`knights_tour.service.collector.collect_finished` with
    ``KT_REPORTS_DIR`` and ``KT_COLLECT_LOCK_TIMEOUT_S``; returns its result dict.
    """
    from knights_tour.service.collector import collect_finished

    settings = get_settings()
    result = collect_finished(
        _redis(), settings.reports_path, lock_timeout_s=settings.collect_lock_timeout_s
    )
    if result["written"]:
        log.info("collected %d batch(es): %s", len(result["written"]), result["written"])
    return result


__all__ += ["submit_sweep", "collect_reports"]

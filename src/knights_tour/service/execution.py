"""The worker side of batches and counts: run a chunk of jobs (or count sub-jobs) and store one
record (partial count) per item. The Celery tasks in :mod:`knights_tour.tasks` are thin
wrappers around :func:`run_chunk` and :func:`run_count_chunk`.

A chunk costs Redis a small constant number of calls, not a number per job: the whole chunk
is claimed in one script call (:func:`knights_tour.store.leases.claim`; jobs already recorded
are skipped, so a duplicate delivery never runs them again, and jobs another live worker
holds are left to it - recovery re-sends them if it dies), the lease is renewed by the
process's heartbeat (:mod:`knights_tour.service.lease_keeper`), and the records are buffered
and stored together (:func:`knights_tour.store.saving.save_records`) at the chunk's end or
every :data:`FLUSH_S` seconds, whichever comes first, so progress stays live. A job on which
workers died ``KT_MAX_ATTEMPTS`` times gets an ``error`` record (``error_type``
``WorkerLost``) instead of running. Messages are untrusted: an invalid job becomes an
``error`` record, never a crash.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any, TypeVar

import redis

from knights_tour.core.counting import SubJob
from knights_tour.core.jobs import Job, error_record, run_job
from knights_tour.core.records import encode_record
from knights_tour.messages import DEFAULT_REDIS_URL
from knights_tour.service.lease_keeper import LeaseKeeper, keeper
from knights_tour.settings import get_settings
from knights_tour.store import counts as count_store
from knights_tour.store import leases
from knights_tour.store.connection import REDIS_ERRORS, connect
from knights_tour.store.ledger import Ledger
from knights_tour.store.saving import Row, save_records

log = logging.getLogger(__name__)

SAVE_RETRY_S = 30.0
"""How long a task keeps retrying to store records while Redis is unreachable, in seconds."""

FLUSH_S = 0.5
"""Buffered records are stored at the latest when a job ends this many seconds after the last
store (and always at the chunk's end), so a waiting client sees progress."""

Send = Callable[[list[dict[str, Any]]], None]
"""Puts one task for a list of job dicts of the running batch on the queue, served first."""

T = TypeVar("T")


def redis_client() -> redis.Redis:
    """This worker process's Redis client (the broker's server, ``KT_REDIS_URL``): one per
    process and URL, created on first use and kept for every later job.

    Raises
    ------
    BackendUnavailableError
        If Redis cannot be reached.
    """
    return _client_for(get_settings().redis_url or DEFAULT_REDIS_URL)


@functools.cache
def _client_for(url: str) -> redis.Redis:
    """The client of :func:`redis_client` for ``url`` (kept: connections are pooled)."""
    return connect(url)


def _retrying(call: Callable[[], T]) -> T:
    """``call()``, retried for up to :data:`SAVE_RETRY_S` while Redis is unreachable."""
    deadline = time.monotonic() + SAVE_RETRY_S
    delay = 0.2
    while True:
        try:
            return call()
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


# -- the record's shape: the only lines here that know it ------------------------------------
def _field(record: Any, name: str) -> Any:
    return record.get(name) if isinstance(record, Mapping) else getattr(record, name, None)


def _stamp(record: Any, **fields: Any) -> None:
    if isinstance(record, MutableMapping):
        record.update(fields)
    else:
        for name, value in fields.items():
            setattr(record, name, value)


def _status(record: Any) -> str:
    status = _field(record, "status")
    return str(getattr(status, "value", status))


def _row(record: Any) -> Row:
    return (
        str(_field(record, "job_key")),
        _status(record),
        bool(_field(record, "mismatch")),
        encode_record(record),
    )


class _Records:
    """The records of a chunk not yet stored, and storing them (one script call per flush)."""

    def __init__(self, r: redis.Redis, batch_id: str) -> None:
        self.r, self.batch_id = r, batch_id
        self.rows: list[Row] = []
        self.last = time.monotonic()

    def add(self, record: Any) -> None:
        self.rows.append(_row(record))

    def due(self) -> bool:
        return bool(self.rows) and time.monotonic() - self.last >= FLUSH_S

    def flush(self, retry: bool = True) -> None:
        """Store the buffered records; log those dropped because another was stored first.
        ``retry``: keep trying for :data:`SAVE_RETRY_S` while Redis is unreachable (else one
        attempt)."""
        if self.rows:
            rows = self.rows
            save = lambda: save_records(self.r, self.batch_id, rows)  # noqa: E731
            stored = _retrying(save) if retry else save()
            self.rows = []
            dropped = [job_key for (job_key, *_), kept in zip(rows, stored) if not kept]
            if dropped:  # one line for all of them: a lapse is one event
                log.warning(
                    "job(s) %s of batch %s ran a second time (the lease lapsed while "
                    "they ran); the records stored first are kept",
                    ", ".join(dropped),
                    self.batch_id,
                )
        self.last = time.monotonic()


class _Claimed:
    """What one chunk holds of one ledger: the claim, the lease checks before each item, and
    the re-claim after a lapse (the same for batch jobs and count sub-jobs)."""

    def __init__(self, r: redis.Redis, led: Ledger, keeper_: LeaseKeeper) -> None:
        self.r, self.led, self.keeper = r, led, keeper_
        self.token = ""
        self.claim_id = ""
        self.careful = False
        self.deaths: dict[str, int] = {}
        self.unfinished: set[str] = set()
        self.skipped = 0

    def claim(self, items: Sequence[T], key: Callable[[T], str]) -> deque[T]:
        """Claim ``items``; the ones now ours, in order (others are counted as skipped)."""
        first: dict[str, T] = {}
        for item in items:
            first.setdefault(key(item), item)
        names = list(first)
        outcomes: dict[str, str] = {}
        self.careful = False
        for i in range(0, len(names), leases.SCRIPT_BATCH):
            part = names[i : i + leases.SCRIPT_BATCH]
            self.token, got = _retrying(lambda: self.keeper.claim(self.r, self.led, part))
            self.careful = self.careful or got.careful
            self.claim_id = got.claim
            self.deaths.update(got.deaths)
            outcomes.update(got.outcomes)
        mine = [(k, i) for k, i in first.items() if outcomes.get(k) == leases.CLAIMED]
        self.skipped += len(items) - len(mine)
        self.unfinished.update(k for k, _ in mine)
        return deque(i for _, i in mine)

    def ready(self, todo: deque[T], key: Callable[[T], str], flush: Callable[[], None]) -> deque[T]:
        """``todo`` if the lease is alive; else (the process was stalled past its lease) what
        is left of it once claimed again under a new token."""
        if self.keeper.known_alive():
            return todo
        flush()
        if _retrying(lambda: self.keeper.confirm(self.r)):
            return todo
        rest = list(todo)
        log.warning(
            "%s %s: the lease lapsed before its job started for %s (this process was "
            "stalled longer than %.1f s); claiming them again",
            self.led.kind,
            self.led.id,
            ", ".join(key(i) for i in rest),
            self.keeper.lease_s,
        )
        self.unfinished.difference_update(key(i) for i in rest)
        return self.claim(rest, key)

    def start(self, item_key: str) -> int:
        """Mark ``item_key`` started (careful mode only); returns the deaths blamed on it."""
        if self.careful:
            _retrying(lambda: leases.begin(self.r, self.led, self.token, item_key, self.claim_id))
        return self.deaths.get(item_key, 0)

    def done(self, item_key: str) -> None:
        self.unfinished.discard(item_key)

    def release(self, item_keys: Sequence[str] | None = None) -> None:
        """Give up the claims on ``item_keys`` (default: every unfinished one), so another task
        may run them at once. Redis errors are ignored (recovery re-sends them)."""
        names = list(self.unfinished if item_keys is None else item_keys)
        self.unfinished.difference_update(names)
        if names and self.token:
            try:
                leases.release(self.r, self.led, self.token, names)
            except REDIS_ERRORS:
                pass


def _worker_lost(job: Job, deaths: int, batch_id: str) -> Any:
    record = error_record(
        job, f"worker lost {deaths} times while running this job; given up", batch_id
    )
    _stamp(record, error_type="WorkerLost")
    return record


def _job_key(job: Job) -> str:
    return job.key


def _validate(
    job_dicts: Any, batch_id: str, worker: str | None, records: _Records, counts: Counter[str]
) -> list[Job]:
    """The valid jobs of a message; an error record is buffered for each invalid one."""
    valid: list[Job] = []
    for raw in job_dicts if isinstance(job_dicts, list) else [job_dicts]:
        try:
            valid.append(Job.from_dict(raw))
        except Exception as exc:  # noqa: BLE001 - invalid input becomes an error record
            record = error_record(raw, exc, batch_id, job_key=invalid_key(raw))
            _stamp(record, worker=worker)
            records.add(record)
            counts[_status(record)] += 1
    return valid


def _run_jobs(
    held: _Claimed,
    todo: deque[Job],
    records: _Records,
    counts: Counter[str],
    worker: str | None,
    send: Send,
) -> None:
    """Run the claimed jobs ``todo`` in order, buffering their records; after a job that hit
    the soft time limit, hand the rest to a fresh task."""
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
        _stamp(record, attempts=deaths + 1, worker=worker)
        records.add(record)
        held.done(job.key)
        counts[_status(record)] += 1
        if held.careful or records.due():
            records.flush()
        if _field(record, "error_type") == "SoftTimeLimitExceeded" and todo:
            rest = [j.key for j in todo]
            held.release(rest)
            send([j.to_dict() for j in todo])
            leases.mark_requeued(held.r, held.led, rest)
            return


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
        priority (the soft-time-limit hand-off).

    Returns
    -------
    dict
        A tiny summary: ``batch_id``, ``jobs`` (records written and jobs skipped), ``counts``
        by status (plus ``skipped``: recorded, held by another worker, or cancelled),
        ``worker`` (node name) and ``elapsed_s``.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis stays unreachable for :data:`SAVE_RETRY_S` (the task layer retries the task).
    """
    began = time.perf_counter()
    r = redis_client()
    counts: Counter[str] = Counter()
    records = _Records(r, batch_id)
    valid = _validate(job_dicts, batch_id, worker, records, counts)
    held = _Claimed(r, Ledger.for_batch(batch_id), keeper())
    try:
        _run_jobs(held, held.claim(valid, _job_key), records, counts, worker, send)
        records.flush()
    finally:
        if records.rows:  # stopped by an exception: keep what was finished, if Redis allows
            try:
                records.flush(retry=False)
            except REDIS_ERRORS:
                pass
        held.release()
    counts["skipped"] += held.skipped
    if not counts["skipped"]:
        del counts["skipped"]
    return {
        "batch_id": batch_id,
        "jobs": sum(counts.values()),
        "counts": dict(counts),
        "worker": worker,
        "elapsed_s": round(time.perf_counter() - began, 6),
    }


def run_count_chunk(
    count_id: str, subjob_dicts: list[dict[str, Any]], worker: str | None
) -> dict[str, Any]:
    """Run count sub-jobs (:class:`knights_tour.core.counting.SubJob` dicts) of ``count_id`` and
    store each partial count under its sub-job key. The sub-jobs are claimed as batch jobs
    are: one that already has a partial count is skipped (resubmission, re-delivery), one
    another live worker holds is left to it; a malformed one is stored as an error entry.
    Sub-jobs are long (seconds), so each partial count is stored as it is counted.

    Returns
    -------
    dict
        A tiny summary: ``count_id``, ``ran``, ``skipped``, ``errors``, ``worker``.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    r = redis_client()
    led = Ledger.for_count(count_id)
    ran = errors = 0
    valid: list[SubJob] = []
    for raw in subjob_dicts if isinstance(subjob_dicts, list) else [subjob_dicts]:
        try:
            valid.append(SubJob.from_dict(raw))
        except Exception as exc:  # noqa: BLE001 - invalid input becomes an error entry
            name = raw.get("key") if isinstance(raw, dict) else None
            count_store.save_partial(
                r,
                count_id,
                str(name or invalid_key(raw)),
                None,
                0,
                worker=worker,
                error=f"{type(exc).__name__}: {exc}",
            )
            errors += 1
    held = _Claimed(r, led, keeper())
    max_attempts = get_settings().max_attempts
    key = lambda s: s.key  # noqa: E731
    try:
        todo = held.claim(valid, key)
        while todo:
            todo = held.ready(todo, key, lambda: None)
            if not todo:
                break
            sj = todo.popleft()
            deaths = held.start(sj.key)
            if deaths >= max_attempts:
                count_store.save_partial(
                    r,
                    count_id,
                    sj.key,
                    None,
                    0,
                    worker=worker,
                    error=f"WorkerLost: worker lost {deaths} times on this sub-job; given up",
                )
                errors += 1
            else:
                began = time.perf_counter()
                count, nodes = sj.run()
                count_store.save_partial(
                    r, count_id, sj.key, count, nodes, time.perf_counter() - began, worker
                )
                ran += 1
            leases.finish(r, led, [sj.key])
            held.done(sj.key)
    finally:
        held.release()
    return {
        "count_id": count_id,
        "ran": ran,
        "skipped": held.skipped,
        "errors": errors,
        "worker": worker,
    }


__all__ = ["run_chunk", "run_count_chunk", "redis_client", "invalid_key", "SAVE_RETRY_S", "FLUSH_S"]
